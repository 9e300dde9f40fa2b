import inspect
import subprocess
import sys
import types

import pytest

import streambridge


def test_signatures_mirror_cupy():
    stream = inspect.signature(streambridge.Stream).parameters
    assert list(stream)[:4] == ["null", "non_blocking", "ptds", "priority"]  # cupy.cuda.Stream
    event = inspect.signature(streambridge.Event).parameters
    assert list(event)[:3] == ["block", "disable_timing", "interprocess"]  # cupy.cuda.Event
    assert {"enable_timing", "blocking"} <= set(event)  # torch.cuda.Event's names


def test_created_stream_is_owned_and_destroyed_on_close():
    s = streambridge.Stream(non_blocking=True)
    assert "owned" in repr(s)
    assert s.device_id == 0
    assert s.is_non_blocking is True and s.is_nonblocking is True
    assert s.priority == 0
    assert s.query() is True
    handle = s.ptr
    assert streambridge.Stream.from_handle(handle) == s, "equal by handle and device"
    s.close()
    s.close()
    with pytest.raises(streambridge.InvalidHandleError):
        streambridge.ExternalStream(handle)


def test_null_and_per_thread_streams():
    assert streambridge.Stream(null=True).ptr == 0
    assert streambridge.Stream(ptds=True).ptr == 2
    with pytest.raises(ValueError, match="both"):
        streambridge.Stream(null=True, ptds=True)
    with pytest.raises(TypeError, match="non_blocking must be a bool"):
        streambridge.Stream(non_blocking="yes")
    with pytest.raises(TypeError, match="priority must be an int"):
        streambridge.Stream(priority=1.5)
    with pytest.raises(TypeError, match="priority must be an int, not bool"):
        streambridge.Stream(priority=True)
    with pytest.raises(ValueError, match="priority must fit a C int"):
        streambridge.Stream(priority=2**31)
    with pytest.raises(TypeError, match="device must be"):
        streambridge.Stream(device=1.5)
    s = streambridge.Stream(ptds=True, device="cuda:0")
    assert (s.ptr, s.device_id, s._owned) == (2, 0, False)
    s.close()
    s.close()
    with pytest.raises(streambridge.ClosedError):
        s.query()
    with pytest.raises(TypeError, match="already made"):
        streambridge.Stream.__init__(streambridge.Stream())


def test_record_query_and_elapsed_time():
    s = streambridge.Stream()
    start = s.record()
    end = streambridge.Event()
    s.record_event(end)
    end.synchronize()
    assert start.query() and end.done and end.is_done
    ms = start.elapsed_time(end)
    assert ms >= 0
    assert end - start == pytest.approx(ms)
    assert streambridge.get_elapsed_time(start, end) == pytest.approx(ms)


def test_event_options():
    untimed = streambridge.Event(enable_timing=False)
    timed = streambridge.Event()
    s = streambridge.Stream()
    s.record(timed)
    s.record(untimed)
    s.synchronize()
    with pytest.raises(streambridge.CUDAError) as info:
        timed.elapsed_time(untimed)
    assert info.value.name == "CUDA_ERROR_INVALID_HANDLE"
    with pytest.raises(ValueError, match="interprocess"):
        streambridge.Event(interprocess=True)
    streambridge.Event(interprocess=True, disable_timing=True).close()
    streambridge.Event(blocking=True).close()
    with pytest.raises(TypeError, match="enable_timing must be a bool"):
        streambridge.Event(enable_timing=1)


def test_elapsed_time_says_which_event_is_untimed_or_never_recorded():
    s = streambridge.Stream()
    timed, untimed, never = streambridge.Event(), streambridge.Event(disable_timing=True), streambridge.Event()
    s.record(timed)
    s.record(untimed)
    s.synchronize()
    cases = [(timed, untimed, "the end event was made with timing disabled"),
             (untimed, timed, "the start event was made with timing disabled"),
             (timed, never, "the end event was never recorded"),
             (never, timed, "the start event was never recorded")]
    for start, end, said in cases:
        with pytest.raises(streambridge.InvalidHandleError, match=said) as info:
            start.elapsed_time(end)
        assert (info.value.code, info.value.name) == (400, "CUDA_ERROR_INVALID_HANDLE"), "the driver's result is kept"
    s.record(never)
    never.synchronize()
    assert timed.elapsed_time(never) >= 0


def test_recording_an_event_on_a_stream_of_another_device_names_both(two_devices):
    e, s = streambridge.Event(device=0), streambridge.Stream(device=1)
    for record in (lambda: s.record(e), lambda: e.record(s), lambda: s.record_event(e)):
        with pytest.raises(streambridge.DeviceMismatchError,
                           match="the event was made on device 0, the stream is on device 1"):
            record()
    e.record(streambridge.Stream(device=0))
    s.wait_event(e)  # a wait may cross devices: the driver allows it
    s.synchronize()
    assert e.query()


def test_waits_between_streams_and_events():
    a, b = streambridge.Stream(non_blocking=True), streambridge.Stream(non_blocking=True)
    e = a.record()
    b.wait_event(e)
    b.wait(e)
    b.wait(a)
    b.wait_stream(a)
    e.wait(b)
    e.record()  # on the default stream
    e.wait()
    b.synchronize()
    with pytest.raises(TypeError):
        b.wait_event(a)
    with pytest.raises(TypeError):
        a.record(42)
    with pytest.raises(TypeError):
        e.record(42)


def test_closed_event_raises():
    e = streambridge.Event()
    e.close()
    e.close()
    with pytest.raises(streambridge.ClosedError):
        e.query()


def test_device_reads_as_int_torch_device_and_cuda_core_device():
    s = streambridge.Stream()
    dev = s.device
    assert dev == 0 and isinstance(dev, int)  # CuPy: an int ordinal
    assert (dev.type, dev.index) == ("cuda", 0) and str(dev) == "cuda:0"  # torch.device
    assert dev.device_id == 0  # cuda.core.Device
    if streambridge.device_count() > 1:
        assert streambridge.ExternalStream(0, 1).device == 1


class _CoreEventOptions:  # the shape of cuda.core.EventOptions
    def __init__(self, timing_enabled=False, blocking_sync=False, ipc_enabled=False):
        self.timing_enabled, self.blocking_sync, self.ipc_enabled = timing_enabled, blocking_sync, ipc_enabled


def test_event_takes_cuda_core_options():
    s = streambridge.Stream()
    assert streambridge.Event(options=_CoreEventOptions()).is_timing_enabled is False
    timed = s.record(options=_CoreEventOptions(timing_enabled=True))
    assert timed.is_timing_enabled is True
    ipc = streambridge.Event(options={"ipc_enabled": True})
    assert ipc.is_ipc_enabled and not ipc.is_timing_enabled
    with pytest.raises(TypeError, match="unknown event options"):
        streambridge.Event(options={"timing": True})
    with pytest.raises(TypeError, match="enable_timing must be a bool"):
        streambridge.Event(options=_CoreEventOptions(timing_enabled="yes"))


_CHILD_OPENS = """
import sys, streambridge
e = streambridge.Event.from_ipc_handle(0, bytes.fromhex(sys.argv[1]))
e.synchronize()
print("opened", e.query())
"""


def test_ipc_handle_round_trip():
    e = streambridge.Event(interprocess=True, disable_timing=True)
    handle = e.ipc_handle()
    assert isinstance(handle, bytes) and len(handle) == 64
    s = streambridge.Stream()
    e.record(s)
    if streambridge.driver() == "sim":  # its IPC reaches only this process
        opened = streambridge.Event.from_ipc_handle(0, handle)
        opened.synchronize()
        assert opened.query() is True
    else:  # the real driver refuses a handle from the same process: open it in a child
        child = subprocess.run([sys.executable, "-c", _CHILD_OPENS, handle.hex()],
                               capture_output=True, text=True, timeout=120)
        assert child.returncode == 0, child.stderr
        assert child.stdout.strip() == "opened True"
    with pytest.raises(streambridge.CUDAError) as zeros:
        streambridge.Event.from_ipc_handle(0, bytes(64))  # no event's handle
    assert zeros.value.name == "CUDA_ERROR_MAP_FAILED"  # the real driver's answer (H200, driver 580)
    with pytest.raises(ValueError, match="64 bytes"):
        streambridge.Event.from_ipc_handle(0, b"short")
    with pytest.raises(TypeError):
        streambridge.Event.from_ipc_handle(0, "not bytes")
    with pytest.raises(streambridge.CUDAError):
        streambridge.Event().ipc_handle()  # not interprocess


def test_many_streams_and_events_leave_the_table_as_it_was():
    # bench/memory.py does a million, with RSS, on the GPU; this is the same loop, smaller
    from streambridge import _core

    live, events, streams = _core.live_keys(), _core.live_events(), _core.live_streams()
    for _ in range(2000):
        streambridge.Stream().close()
        streambridge.Event().close()
        s = streambridge.Stream()
        streambridge.ExternalStream(s.ptr).close()
        streambridge.ExternalStream(s.ptr).priority  # given a Go key, then dropped unclosed
        del s  # closed by its finalizer
        streambridge.Event(disable_timing=True)  # destroyed when collected
    assert _core.live_keys() == live
    assert _core.live_events() == events
    assert _core.live_streams() == streams


@pytest.mark.parametrize("make", [
    lambda: streambridge.Stream(non_blocking=True),
    lambda: streambridge.Stream(null=True),
    lambda: streambridge.Stream(ptds=True),
    lambda: streambridge.ExternalStream(1, 0),
    lambda: streambridge.Stream.from_external(streambridge.Stream()),  # keeps its owner alive
], ids=["owned", "null", "per-thread", "legacy-1", "borrowed"])
def test_every_kind_of_stream_takes_the_one_path_and_refuses_use_after_close(make):
    s, t = make(), streambridge.Stream(non_blocking=True)
    e = streambridge.Event(disable_timing=True)
    seen = []
    assert s.record(e) is e
    t.wait_event(e)
    t.wait_stream(s)
    s.wait_stream(t)
    e.record(s)
    e.wait(s)
    s.launch_host_func(seen.append, "ran")
    t.synchronize()
    s.synchronize()
    assert e.query() is True and s.query() is True and seen == ["ran"]
    s.close()
    for call in (s.query, lambda: s.record(e), lambda: s.wait_event(e), lambda: t.wait_stream(s),
                 lambda: s.wait_stream(t), lambda: e.record(s), lambda: s.launch_host_func(seen.append, 1)):
        with pytest.raises(streambridge.ClosedError, match="stream was closed"):
            call()
    e.close()
    for call in (e.query, lambda: t.record(e), lambda: t.wait_event(e), lambda: e.record(t)):
        with pytest.raises(streambridge.ClosedError, match="event was closed"):
            call()


def test_none_means_the_current_stream_else_the_default_one():
    import threading

    s = streambridge.Stream(non_blocking=True)
    gate = threading.Event()
    s.launch_host_func(lambda _: gate.wait(5), None)  # s is busy until the gate opens
    e = streambridge.Event(disable_timing=True)
    with s:
        e.record()  # on s, the current stream
    assert e.query() is False
    gate.set()
    e.synchronize()
    e.record()  # outside: the device's legacy default stream, idle
    e.synchronize()
    assert e.query() is True


def test_every_error_class_carries_its_public_name_and_pickles():
    """Each exception class of streambridge._errors is streambridge.<name> where Python
    prints it (and streambridge.jax's errors carry it), and pickles by that name."""
    import pickle

    from streambridge import _errors

    classes = [v for v in vars(_errors).values() if isinstance(v, type) and issubclass(v, Exception)]
    assert len(classes) >= 11
    for cls in classes:
        assert cls.__module__ == "streambridge", cls
        assert getattr(streambridge, cls.__qualname__) is cls
        again = pickle.loads(pickle.dumps(cls("a message")))
        assert type(again) is cls and str(again) == "a message"


def _core_methods(cls):
    """The names of cls's C methods that are not object's: the core's."""
    return [name for name in dir(cls) if isinstance(d := inspect.getattr_static(cls, name), types.MethodDescriptorType)
            and d.__objclass__ is not object]


@pytest.mark.parametrize("make", [
    lambda: streambridge.Stream,
    lambda: streambridge.ExternalStream,
    lambda: streambridge.Event,
    lambda: type("UserStream", (streambridge.Stream,), {}),
    lambda: type("UserEvent", (streambridge.Event,), {}),
], ids=["Stream", "ExternalStream", "Event", "a user's Stream", "a user's Event"])
def test_every_class_calls_the_core_methods_as_its_own(make):
    # The interpreter's specialized call of a C method runs only on an instance of the
    # descriptor's exact type (objects.inc, "Subclasses"): each class holds its own.
    cls = make()
    names = _core_methods(cls)
    assert {"record", "query", "synchronize", "close"} <= set(names)
    for name in names:
        descriptor = inspect.getattr_static(cls, name)
        assert descriptor.__objclass__ is cls, f"{cls.__name__}.{name} is {descriptor!r}"
        assert name in vars(cls)


def test_a_subclass_keeps_what_it_defines_and_calls_the_rest():
    class Mine(streambridge.Stream):
        def query(self):
            return "mine"

    a, b = Mine(non_blocking=True), Mine(non_blocking=True)
    e = a.record()
    b.wait_event(e)
    assert a.query() == "mine"
    assert type(a).__dict__["record"].__objclass__ is Mine
    b.synchronize()
    with pytest.raises(TypeError, match="doesn't apply"):
        Mine.record(streambridge.Stream(non_blocking=True), e)  # as a method Mine defined itself
    with pytest.raises(TypeError):
        type("Keyword", (streambridge.Stream,), {}, flag=True)  # as object.__init_subclass__ refuses it
    a.close()
    b.close()
    e.close()


@pytest.mark.parametrize("base", [streambridge.Stream, streambridge.Event], ids=["Stream", "Event"])
def test_a_mixins_init_subclass_still_runs(base):
    seen = []

    class Mixin:
        def __init_subclass__(cls, **kwargs):
            seen.append((cls.__name__, kwargs, inspect.getattr_static(cls, "query").__objclass__ is cls))
            super().__init_subclass__()

    class Mine(base, Mixin, tag=1):
        pass

    assert seen == [("Mine", {"tag": 1}, True)]
    core = streambridge._core.core.StreamCore if base is streambridge.Stream else streambridge._core.core.EventCore
    assert Mine.__mro__.index(Mixin) > Mine.__mro__.index(core), "the core's __init_subclass__ is met first"
