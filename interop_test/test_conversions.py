"""A stream made by each of PyTorch, CuPy, cuda.core and Numba goes into streambridge and
back out into each of the others: the same CUstream, usable by every framework."""

import pytest
from _interop import framework

import streambridge


def numba_handle(s):
    """ctypes c_void_p in older Numba, a cuda-python CUstream in numba-cuda."""
    return s.handle.value or 0 if hasattr(s.handle, "value") else int(s.handle)


def make_torch():
    s = framework("torch").cuda.Stream()
    return s, s.cuda_stream


def make_cupy():
    s = framework("cupy").cuda.Stream(non_blocking=True)
    return s, s.ptr


def make_cuda_core():
    dev = framework("cuda.core").Device(0)
    dev.set_current()
    s = dev.create_stream()
    return s, int(s.handle)


def make_numba():
    s = framework("numba.cuda").stream()
    return s, numba_handle(s)


def make_streambridge():
    s = streambridge.Stream(non_blocking=True)
    return s, s.ptr


MAKERS = {"torch": make_torch, "cupy": make_cupy, "cuda.core": make_cuda_core, "numba": make_numba,
          "streambridge": make_streambridge}


def handle_and_sync(name, obj):
    """The CUstream a framework's stream object holds, after synchronizing it its own way."""
    if name == "torch":
        obj.synchronize()
        return obj.cuda_stream
    if name == "cupy":
        obj.synchronize()
        return obj.ptr
    if name == "cuda.core":
        obj.sync()
        return int(obj.handle)
    obj.synchronize()  # numba
    return numba_handle(obj)


@pytest.mark.parametrize("source", MAKERS)
@pytest.mark.parametrize("target", ["torch", "cupy", "cuda.core", "numba"])
def test_round_trip(source, target):
    owner, handle = MAKERS[source]()
    s = streambridge.as_stream(owner)
    assert (s.ptr, s.device_id) == (handle, 0)
    out = getattr(s, "to_" + target.replace(".", "_"))()
    assert handle_and_sync(target, out) == handle
    if target == "cupy":
        assert out.device_id == 0, "CuPy must be told the stream's device (-1 would mean the current one)"
    again = streambridge.as_stream(out)
    assert again == s


@pytest.mark.parametrize("special", [0, 1, 2], ids=["null", "legacy", "per-thread"])
@pytest.mark.parametrize("target", ["torch", "cupy", "cuda.core", "numba"])
def test_default_streams_convert_to_each_frameworks_meaning(special, target):
    s = streambridge.ExternalStream(special, 0)
    out = getattr(s, "to_" + target.replace(".", "_"))()
    got = handle_and_sync(target, out)
    if target == "cupy":
        assert out.device_id == 0, "this device's default stream, not the current device's"
    if target == "torch" and special in (0, 1):  # torch's default stream is the legacy one
        torch = framework("torch")
        assert out == torch.cuda.default_stream(0), "not a new pooled stream, as torch.cuda.ExternalStream(0) gives"
    else:
        assert got == special or (special == 0 and got in (0, 1)), (target, special, got)
