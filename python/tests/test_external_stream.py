import inspect
import os
import subprocess
import sys

import pytest

import streambridge
from streambridge import _core


def test_external_stream_signature_mirrors_cupy_and_torch():
    params = inspect.signature(streambridge.ExternalStream).parameters
    assert list(params)[:2] == ["ptr", "device_id"]  # cupy.cuda.ExternalStream(ptr, device_id=-1)
    assert params["device_id"].default == -1
    assert {"stream_ptr", "device"} <= set(params)  # torch.cuda.ExternalStream(stream_ptr, device=None)


def test_external_stream_finds_its_device_from_the_handle(foreign_stream):
    handle, device = foreign_stream
    s = streambridge.ExternalStream(handle)
    assert s.device_id == device
    assert s.ptr == s.cuda_stream == s.handle == handle
    assert s.query() is True and s.done is True
    s.synchronize()
    assert s.__cuda_stream__() == (0, handle)
    assert "borrowed" in repr(s) and hex(handle) in repr(s)


@pytest.mark.parametrize("form", ["cupy-positional", "torch-int", "torch-string", "torch-device-like"])
def test_external_stream_device_forms(foreign_stream, form):
    handle, device = foreign_stream

    class TorchLikeDevice:
        type, index = "cuda", device

    make = {
        "cupy-positional": lambda: streambridge.ExternalStream(handle, device),
        "torch-int": lambda: streambridge.ExternalStream(stream_ptr=handle, device=device),
        "torch-string": lambda: streambridge.ExternalStream(stream_ptr=handle, device=f"cuda:{device}"),
        "torch-device-like": lambda: streambridge.ExternalStream(stream_ptr=handle, device=TorchLikeDevice()),
    }[form]
    assert make().device_id == device


def test_a_wrong_device_is_an_error(foreign_stream, stated_elsewhere):
    handle, _ = foreign_stream
    other, error, match = stated_elsewhere
    with pytest.raises(error, match=match):
        streambridge.ExternalStream(handle, other)


def test_streams_are_equal_by_handle_and_device(foreign_stream):
    handle, _ = foreign_stream
    a, b = streambridge.ExternalStream(handle), streambridge.ExternalStream(stream_ptr=handle)
    assert a == b and hash(a) == hash(b)


@pytest.mark.parametrize("handle", [3, 0xDEADBEEF, 0x7F0000000001, 2**47 - 8, 2**64 - 8])
def test_garbage_handles_raise_invalid_handle(handle):
    with pytest.raises(streambridge.InvalidHandleError, match="not a live CUDA stream") as info:
        streambridge.ExternalStream(handle)
    assert info.value.code == 400
    assert info.value.name == "CUDA_ERROR_INVALID_HANDLE"
    assert isinstance(info.value, streambridge.CUDAError) and isinstance(info.value, RuntimeError)


def test_a_freed_handle_raises_invalid_handle(driver_name):
    owner = streambridge.Stream()
    handle = owner.ptr
    owner.close()
    with pytest.raises(streambridge.InvalidHandleError):
        streambridge.ExternalStream(handle)


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        (("12",), {}, TypeError, "must be an int, not str"),
        ((1.5,), {}, TypeError, "must be an int, not float"),
        ((True,), {}, TypeError, "must be an int, not bool"),
        ((-1,), {}, ValueError, "out of range"),
        ((2**64,), {}, ValueError, "out of range"),
        ((), {}, TypeError, "give the stream pointer once"),
        ((5,), {"stream_ptr": 5}, TypeError, "give the stream pointer once"),
        ((), {"stream_ptr": 5, "device": "gpu:0"}, ValueError, "cuda:N"),
        ((5, -2), {}, ValueError, "device must be -1 or a device ordinal"),
        ((), {"stream_ptr": 5, "device": 1.0}, TypeError, "device must be"),
    ],
)
def test_wrong_types_and_values(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        streambridge.ExternalStream(*args, **kwargs)


def test_special_handles_name_the_stated_devices_default_streams():
    device = streambridge.device_count() - 1
    for handle in (0, 1, 2):
        s = streambridge.ExternalStream(handle, device)
        assert s.device_id == device
        s.synchronize()


def test_close_is_idempotent_and_use_after_close_raises(foreign_stream):
    handle, _ = foreign_stream
    live = _core.live_keys()
    s = streambridge.ExternalStream(handle)
    assert _core.live_keys() == live, "a borrowed stream is checked, not kept in Go, until a call needs Go"
    assert s.is_non_blocking is True  # through Go: now it is
    assert _core.live_keys() == live + 1
    s.close()
    s.close()
    assert _core.live_keys() == live
    with pytest.raises(streambridge.ClosedError):
        s.query()
    assert streambridge.ExternalStream(handle).query(), "the borrowed stream lives on"


def test_wait_stream_between_two_streams(foreign_stream):
    handle, device = foreign_stream
    other = streambridge.Stream(non_blocking=True, device=device)
    other_handle = other.ptr
    try:
        a = streambridge.ExternalStream(handle)
        b = streambridge.ExternalStream(other_handle)
        b.wait_stream(a)
        b.synchronize()
        with pytest.raises(TypeError):
            b.wait_stream(handle)
    finally:
        other.close()


def test_import_without_a_driver_says_so():
    env = {k: v for k, v in os.environ.items() if k != "STREAMBRIDGE_DRIVER"}
    env["STREAMBRIDGE_LIBCUDA"] = "libcuda-that-does-not-exist.so.1"
    code = "import streambridge\ntry:\n    streambridge.driver()\nexcept streambridge.NoDriverError as e:\n    print('NoDriverError:', e)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "NoDriverError: no CUDA driver" in out.stdout
    assert "STREAMBRIDGE_DRIVER=sim" in out.stdout, "the message says how to go on without a GPU"


@pytest.mark.parametrize("when", ["before import", "after import, before first use"])
def test_the_driver_can_be_chosen_from_python(when):
    # Go sees the environment the process started with; the package hands os.environ over
    # when it first loads the driver.
    env = {k: v for k, v in os.environ.items() if k != "STREAMBRIDGE_DRIVER"}
    env["STREAMBRIDGE_LIBCUDA"] = "libcuda-that-does-not-exist.so.1"
    choose = "import os\nos.environ['STREAMBRIDGE_DRIVER'] = 'sim'\n"
    code = (choose + "import streambridge\n" if when == "before import" else "import streambridge\n" + choose) + \
        "print(streambridge.driver(), streambridge.Stream().query())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "sim True"


def test_a_stream_made_with_nothing_else_holding_the_context_stays_valid():
    # with no framework holding the primary context, streambridge's own retain keeps it
    owner = streambridge.Stream(non_blocking=True)
    try:
        s = streambridge.ExternalStream(owner.ptr)
        s.synchronize()
        assert s.query()
    finally:
        owner.close()


def test_a_borrowed_stream_destroyed_before_its_first_go_call_is_refused():
    owner = streambridge.Stream(non_blocking=True)
    s = streambridge.ExternalStream(owner.ptr)
    owner.close()  # its owner destroys it
    with pytest.raises(streambridge.InvalidHandleError):
        s.priority  # checked again before Go uses it


def test_later_wraps_refuse_and_accept_as_the_first_does(foreign_stream, stated_elsewhere, driver_name):
    # The first wrap of a device's stream is proven in Go; later ones by a few loads in the
    # C core (core.c, proven_here), falling back to Go for what the loads cannot prove. Both
    # must tell the same handles apart, identity included.
    handle, device = foreign_stream
    first = streambridge.ExternalStream(handle)
    owner = streambridge.Stream(non_blocking=True, device=device)
    freed = owner.ptr
    live = streambridge.ExternalStream(freed)
    assert live.device_id == device and live._id not in (0, first._id)
    owner.close()
    with pytest.raises(streambridge.InvalidHandleError, match="not a live CUDA stream"):
        streambridge.ExternalStream(freed)
    with pytest.raises(streambridge.InvalidHandleError, match="not a live CUDA stream"):
        streambridge.ExternalStream(handle + 8)
    other, error, match = stated_elsewhere
    with pytest.raises(error, match=match):
        streambridge.ExternalStream(handle, other)
    kept = []
    try:
        for _ in range(1000):  # a new stream at the freed address: wrapped as itself
            kept.append(streambridge.Stream(non_blocking=True, device=device))
            if kept[-1].ptr == freed:
                break
        assert kept[-1].ptr == freed or driver_name != "sim", "the software driver reuses a freed address at once"
        if kept[-1].ptr == freed:
            again = streambridge.ExternalStream(freed)
            assert again._id not in (0, live._id) and again.query()
            with pytest.raises(streambridge.InvalidHandleError, match="was destroyed"):
                live.query()
    finally:
        for k in kept:
            k.close()
