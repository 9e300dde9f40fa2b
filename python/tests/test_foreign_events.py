"""Event.from_handle and as_event: another library's CUevent, proven live before the driver
sees it and before every use after, never destroyed by streambridge. On the software driver
here (its events lie in memory as the real driver's do: a list per context, an identity per
event); interop_test/test_foreign_events_gpu.py runs torch's, CuPy's, cuda.core's and
Numba's on the GPU."""

import gc

import pytest

import streambridge as sb
from streambridge import _core


def test_a_borrowed_event_records_waits_queries_and_times():
    s = sb.Stream(non_blocking=True)
    theirs_start, theirs_end = sb.Event(), sb.Event()
    start, end = sb.Event.from_handle(theirs_start.ptr), sb.Event.from_handle(theirs_end.ptr)
    assert start.borrowed and not theirs_start.borrowed
    assert (start.ptr, start.device_id, start.is_timing_enabled) == (theirs_start.ptr, 0, None)
    start.record(s)
    s.launch_host_func(lambda _: None, None)
    end.record(s)
    s.wait(end)
    end.synchronize()
    assert end.query() and end.done and end.is_done
    assert start.elapsed_time(end) >= 0 and end - start >= 0
    assert "borrowed" in repr(start)


def test_close_forgets_a_borrowed_event_and_never_destroys_it():
    theirs = sb.Event()
    gc.collect()
    made = _core.live_events()
    borrowed = sb.Event.from_handle(theirs.ptr)
    assert _core.live_events() == made  # not ours: not counted
    borrowed.close()
    with pytest.raises(sb.ClosedError):
        borrowed.query()
    another = sb.Event.from_handle(theirs.ptr)
    del another
    gc.collect()
    theirs.record(sb.Stream())  # still alive: neither the close nor the collection destroyed it
    theirs.synchronize()
    assert _core.live_events() == made


@pytest.mark.parametrize("handle", [3, 0xDEADBEEF0, 0x7FFFFFFFFFF8, 2**64 - 8, 1 << 47])
def test_garbage_handles_are_invalid(handle):
    with pytest.raises(sb.InvalidHandleError, match="not a live CUDA event"):
        sb.Event.from_handle(handle)


@pytest.mark.parametrize("handle, error", [(0, ValueError), (-1, ValueError), (2**64, ValueError),
                                           (1.5, TypeError), ("0x10", TypeError), (None, TypeError)])
def test_what_is_no_handle_at_all(handle, error):
    with pytest.raises(error):
        sb.Event.from_handle(handle)


def test_a_stream_is_not_an_event():
    s = sb.Stream()
    with pytest.raises(sb.InvalidHandleError, match="not a live CUDA event"):
        sb.Event.from_handle(s.ptr)


def test_a_destroyed_event_is_refused_at_the_wrap_and_at_every_use():
    theirs = sb.Event()
    borrowed = sb.Event.from_handle(theirs.ptr)
    handle = theirs.ptr
    theirs.close()
    s = sb.Stream()
    for use in (borrowed.query, borrowed.synchronize, lambda: borrowed.record(s), lambda: s.wait_event(borrowed),
                lambda: borrowed.wait(s), lambda: borrowed.elapsed_time(sb.Event())):
        with pytest.raises(sb.InvalidHandleError, match="was destroyed"):
            use()
    with pytest.raises(sb.InvalidHandleError):
        sb.Event.from_handle(handle)


def test_identity_survives_address_reuse():
    theirs = sb.Event()
    borrowed = sb.Event.from_handle(theirs.ptr)
    handle = theirs.ptr
    theirs.close()
    new = [sb.Event() for _ in range(4)]
    assert handle in [e.ptr for e in new]  # the software driver reuses a freed address at once
    with pytest.raises(sb.InvalidHandleError, match="now names another event"):
        borrowed.query()
    assert sb.Event.from_handle(handle).query()  # a new wrap is the new event


def test_an_event_alone_in_its_context():
    # The last device of two has no other event in this process; on one device the lone
    # event is interop_test/test_foreign_events_gpu.py's, in a child process.
    theirs = sb.Event(device=sb.device_count() - 1)
    assert sb.Event.from_handle(theirs.ptr).query()


def test_a_stated_device_is_checked(two_devices):
    theirs = sb.Event(device=1)
    assert sb.Event.from_handle(theirs.ptr, device=1).device_id == 1
    with pytest.raises(sb.DeviceMismatchError, match="event .* is on device 1, not device 0"):
        sb.Event.from_handle(theirs.ptr, device=0)


def _framework_event(module, name="Event", **fields):
    cls = type(name, (), {})
    cls.__module__ = module
    obj = cls()
    for k, v in fields.items():
        setattr(obj, k, v)
    return obj


class _Handle:  # cuda.bindings' CUevent: converts with int()
    def __init__(self, h):
        self.h = h

    def __int__(self):
        return self.h


def test_as_event_reads_each_frameworks_event():
    theirs = sb.Event()
    shapes = {
        "torch": _framework_event("torch.cuda.streams", cuda_event=theirs.ptr),
        "cupy": _framework_event("cupy.cuda.stream", ptr=theirs.ptr),
        "cuda.core": _framework_event("cuda.core._event", handle=_Handle(theirs.ptr), is_closed=False),
        "numba": _framework_event("numba.cuda.cudadrv.driver", handle=_Handle(theirs.ptr)),
    }
    for name, obj in shapes.items():
        e = sb.as_event(obj)
        assert e.borrowed and e.ptr == theirs.ptr and e._owner is obj, name
    assert sb.as_event(theirs) is theirs
    assert sb.as_event(theirs.ptr).ptr == theirs.ptr
    assert sb.as_event(shapes["torch"]).to_torch() is shapes["torch"]
    assert sb.as_event(shapes["cupy"]).to_cupy() is shapes["cupy"]
    assert sb.as_event(shapes["cuda.core"]).to_cuda_core() is shapes["cuda.core"]


def test_as_event_refuses_what_is_not_an_event():
    with pytest.raises(ValueError, match="no CUevent yet"):
        sb.as_event(_framework_event("torch.cuda.streams", cuda_event=0))
    with pytest.raises(sb.ClosedError):
        sb.as_event(_framework_event("cuda.core._event", handle=_Handle(0x1000), is_closed=True))
    with pytest.raises(TypeError, match="not event-like"):
        sb.as_event(_framework_event("cupy.cuda.stream", name="Stream", ptr=sb.Stream().ptr))  # a stream
    with pytest.raises(TypeError, match="not event-like"):
        sb.as_event(object())
    with pytest.raises(sb.InvalidHandleError):
        sb.as_event(_framework_event("cupy.cuda.stream", ptr=0xDEADBEEF0))


def test_frameworks_cannot_wrap_a_cuevent_they_did_not_make():
    theirs = sb.Event()
    for e in (sb.Event(), sb.Event.from_handle(theirs.ptr)):
        for convert, name in ((e.to_torch, "PyTorch"), (e.to_cupy, "CuPy"), (e.to_cuda_core, "cuda.core")):
            with pytest.raises(TypeError, match=f"{name} cannot wrap a CUevent it did not make"):
                convert()


def test_a_fence_of_streambridge_is_not_wrapped_by_handle():
    """wait_stream's fence is an event the Go core made and destroys with its stream: no
    caller made it, so a handle that names it (a stale ptr whose address the fence took) is
    refused, where a wrapper of it would meet its destroy (the free-threaded chaos soak)."""
    a, b = sb.Stream(non_blocking=True), sb.Stream(non_blocking=True)
    a.wait_stream(b)
    fence = b._fence
    assert fence != 0
    with pytest.raises(sb.InvalidHandleError, match="fence"):
        sb.Event.from_handle(fence)
    e = sb.Event()
    e.record(b)
    assert sb.Event.from_handle(e.ptr).query() in (True, False), "an event a caller made is wrapped as ever"
