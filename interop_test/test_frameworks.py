"""Streams of PyTorch, CuPy and cuda.core through streambridge, on a GPU machine.

Run there with the installed wheel: STREAMBRIDGE_REQUIRE_GPU=1 python3 -m pytest interop_test
"""

import gc

import pytest
from _interop import framework

import streambridge


def torch_stream():
    torch = framework("torch")
    s = torch.cuda.Stream()
    return s, s.cuda_stream


def cupy_stream():
    cupy = framework("cupy")
    s = cupy.cuda.Stream(non_blocking=True)
    return s, s.ptr


def cuda_core_stream():
    core = framework("cuda.core")
    dev = core.Device(0)
    dev.set_current()
    s = dev.create_stream()
    return s, int(s.handle)


@pytest.mark.parametrize("make", [torch_stream, cupy_stream, cuda_core_stream], ids=["torch", "cupy", "cuda.core"])
def test_each_frameworks_stream_wraps_on_its_device(make):
    owner, handle = make()
    s = streambridge.ExternalStream(handle)
    assert s.device_id == 0
    assert s.query() is True
    s.synchronize()
    assert s.__cuda_stream__() == (0, handle)
    del owner


def freed_cupy():
    cupy = framework("cupy")
    s = cupy.cuda.Stream(non_blocking=True)
    h = s.ptr
    del s
    gc.collect()
    return h


def freed_cuda_core():
    core = framework("cuda.core")
    dev = core.Device(0)
    dev.set_current()
    s = dev.create_stream()
    h = int(s.handle)
    s.close()
    return h


def torch_tensor_pointer():
    torch = framework("torch")
    return torch.empty(16, device="cuda").data_ptr()


@pytest.mark.parametrize(
    "make",
    [lambda: 0xDEADBEEF, lambda: 2**64 - 8, lambda: 0x7F0000000001, freed_cupy, freed_cuda_core, torch_tensor_pointer],
    ids=["garbage", "near-2**64", "odd", "freed cupy stream", "freed cuda.core stream", "a tensor's data pointer"],
)
def test_hostile_handles_raise_and_the_process_lives(make):
    # each of these kills the process when handed to the frameworks' own ExternalStream
    with pytest.raises(streambridge.InvalidHandleError):
        streambridge.ExternalStream(make())


@pytest.mark.parametrize("make", [torch_stream, cupy_stream, cuda_core_stream], ids=["torch", "cupy", "cuda.core"])
def test_as_stream_takes_each_frameworks_stream_object(make):
    owner, handle = make()
    s = streambridge.as_stream(owner)
    assert s.ptr == handle and s.device_id == 0
    s.synchronize()
    if hasattr(type(owner), "__cuda_stream__"):
        t = streambridge.Stream.from_external(owner)
        assert t == s
