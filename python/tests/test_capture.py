"""Graph capture from Python: begin/end, replay, and calls a capture forbids refused
before they can invalidate it."""

import pytest

import streambridge
from streambridge import _core


def test_capture_replay():
    s = streambridge.Stream(non_blocking=True)
    other = streambridge.Stream(non_blocking=True)
    e = streambridge.Event(disable_timing=True)
    assert s.is_capturing() is False
    s.begin_capture()
    assert s.is_capturing() is True
    s.record(e)
    other.wait_event(e)  # joins other into the capture: it ends with s's
    other.record(e)
    s.wait_event(e)
    graph = s.end_capture()
    assert s.is_capturing() is False
    graph.upload(s)
    for _ in range(3):
        graph.launch(s)
    done = s.record()
    s.synchronize()
    assert done.query() is True
    with pytest.raises(streambridge.CUDAError) as info:
        e.query()  # recorded only inside the capture, which is over
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE"  # the real driver's answer
    graph.close()
    graph.close()


def test_an_event_captured_into_a_graph_says_why_the_driver_refuses_it():
    """Once the capture that took an event's last record is over, the driver answers its
    query, its synchronize and a stream's wait on it CUDA_ERROR_INVALID_VALUE (H100, H200:
    bench/capture_lifetimes.c, cases 21 and 22): the error says why (the record's lock section
    asked the driver whether it went into a capture), and a record outside a capture makes it
    an event as any again."""
    s, other = streambridge.Stream(non_blocking=True), streambridge.Stream(non_blocking=True)
    e = streambridge.Event(disable_timing=True)
    s.begin_capture()
    s.record(e)
    graph = s.end_capture()
    for call in (e.query, e.synchronize, lambda: other.wait_event(e), lambda: e.wait(other)):
        with pytest.raises(streambridge.CUDAError, match="last record was captured into a graph") as info:
            call()
        assert info.value.name == "CUDA_ERROR_INVALID_VALUE"
    s.record(e)
    e.synchronize()
    assert e.query() is True
    other.wait_event(e)
    other.synchronize()
    graph.close()


def test_forbidden_calls_are_refused_and_the_capture_survives():
    s = streambridge.Stream(non_blocking=True)
    s.begin_capture("global")
    with pytest.raises(streambridge.CaptureError, match="invalidate the capture"):
        s.synchronize()
    assert s.is_capturing() is True
    graph = s.end_capture()  # still valid
    graph.launch(s)
    s.synchronize()


@pytest.mark.parametrize("mode", ["eager", 3, True, 1.0])
def test_bad_capture_modes(mode):
    with pytest.raises(ValueError, match="capture mode"):
        streambridge.Stream().begin_capture(mode)


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_a_stream_capturing_elsewhere_can_be_wrapped_and_used(mode):
    """A stream another library is capturing (torch.cuda.graph, say) is wrapped and used
    without breaking the capture: a borrowed stream's identity is read, not asked of the
    driver, whose cuStreamGetId fails on a capturing stream and invalidates the capture."""
    owner = streambridge.Stream(non_blocking=True)  # stands for the other library's stream
    owner.begin_capture(mode)
    try:
        borrowed = streambridge.ExternalStream(owner.ptr)
    except streambridge.CUDAError:  # refused (a layout not learned): no capture is left going
        owner.end_capture().close()
        raise
    e = streambridge.Event(disable_timing=True)
    borrowed.record(e)
    borrowed.wait_event(e)
    assert borrowed.is_capturing() is True
    assert borrowed.__cuda_stream__() == (0, owner.ptr)
    graph = owner.end_capture()  # still valid
    graph.launch(owner)
    owner.synchronize()
    borrowed.close()
    owner.close()


def test_a_graph_launched_into_a_capture_is_a_capture_error():
    """The driver refuses a graph launched into a capture, in every mode, and invalidates
    the capture: it is refused first (CaptureError), and the capture goes on."""
    s, t = streambridge.Stream(non_blocking=True), streambridge.Stream(non_blocking=True)
    s.begin_capture()
    s.launch_host_func(lambda _: None, None)
    g = s.end_capture()
    for mode in ("global", "thread_local", "relaxed"):
        t.begin_capture(mode)
        with pytest.raises(streambridge.CaptureError):
            g.launch(t)
        assert t.is_capturing()
        t.record()
        t.end_capture().close()
    g.launch(t)
    t.synchronize()
    g.close()


def test_a_query_of_a_capturing_stream_is_a_capture_error():
    """The driver refuses a query of a capturing stream and invalidates the capture: while
    a capture begun through streambridge may be going on, it is refused first
    (CaptureError), `done` too, and the capture goes on; other streams answer."""
    s, other = streambridge.Stream(non_blocking=True), streambridge.Stream(non_blocking=True)
    for mode in ("global", "thread_local", "relaxed"):
        s.begin_capture(mode)
        s.launch_host_func(lambda _: None, None)
        with pytest.raises(streambridge.CaptureError):
            s.query()
        with pytest.raises(streambridge.CaptureError):
            s.done
        assert s.is_capturing()
        assert other.query() in (True, False), "another stream answers, in every mode"
        s.end_capture().close()
        assert s.query() in (True, False), "after the capture"
    s.synchronize()


def _capture_as_another_library(stream, mode):
    """Begins a capture on stream as another library (torch.cuda.graph, say) would: through
    the driver, not through streambridge's begin_capture, which counts its own captures."""
    stream._use(_core.stream_begin_capture, {"global": 0, "thread_local": 1, "relaxed": 2}[mode])


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_a_borrowed_streams_query_while_another_library_captures_is_a_capture_error(mode):
    """A borrowed stream may be captured by the library it came from, which streambridge
    does not see begin: its query always asks first, and while the stream captures it is
    refused (CaptureError) rather than invalidate that library's capture; the capture goes
    on, and the borrowed stream answers again after it."""
    owner = streambridge.Stream(non_blocking=True)  # stands for the other library's stream
    borrowed = streambridge.ExternalStream(owner.ptr)
    assert borrowed.query() is True
    _capture_as_another_library(owner, mode)
    with pytest.raises(streambridge.CaptureError, match="capturing"):
        borrowed.query()
    with pytest.raises(streambridge.CaptureError):
        borrowed.done
    assert owner.is_capturing(), "the capture goes on"
    owner.end_capture().close()
    assert borrowed.query() is True, "after the capture"
    borrowed.close()
    owner.close()


@pytest.mark.parametrize("handle", [0, 1])
@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_the_legacy_stream_is_refused_while_a_blocking_stream_captures(mode, handle):
    """The legacy stream synchronizes with every blocking stream: while one captures, the
    driver refuses any use of the legacy stream, in every mode, and invalidates that
    capture. Each use is refused first (CaptureError, naming the legacy stream), and the
    capture goes on; a non-blocking stream, and the legacy stream after the capture, work."""
    blocking, other = streambridge.Stream(), streambridge.Stream(non_blocking=True)
    e = streambridge.Event(disable_timing=True)
    other.record(e)
    legacy = streambridge.ExternalStream(handle)
    blocking.begin_capture(mode)
    blocking.launch_host_func(lambda _: None, None)
    uses = {
        "query": legacy.query,
        "done": lambda: legacy.done,
        "synchronize": legacy.synchronize,
        "record": lambda: legacy.record(e),
        "wait_event": lambda: legacy.wait_event(e),
        "wait": lambda: legacy.wait(other),
        "launch_host_func": lambda: legacy.launch_host_func(lambda _: None, None),
        "is_capturing": legacy.is_capturing,
    }
    for name, use in uses.items():
        with pytest.raises(streambridge.CaptureError, match="legacy default stream"):
            use()
        assert blocking.is_capturing(), f"{name} of the legacy stream ended the capture"
    other.synchronize()
    assert other.query() is True, "a non-blocking stream answers"
    blocking.end_capture().close()  # a capture the driver invalidated raises here
    legacy.record(e)
    legacy.synchronize()
    assert e.query()


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_another_threads_queries_leave_a_capture_alone(mode):
    """A query or synchronize of an unrelated stream or event, from another thread, while
    this one captures: in its own capture mode (global unless set) the driver refuses it
    and invalidates a global capture, as it does torch's; ours run relaxed, so the capture
    goes on in every mode, and each call answers."""
    import threading

    s, other = streambridge.Stream(non_blocking=True), streambridge.Stream(non_blocking=True)
    e = streambridge.Event(disable_timing=True)
    other.record(e)
    calls = {
        "Stream.query": other.query,
        "Stream.done": lambda: other.done,
        "Stream.synchronize": other.synchronize,
        "Event.query": e.query,
        "Event.synchronize": e.synchronize,
    }
    for name, call in calls.items():
        s.begin_capture(mode)
        s.launch_host_func(lambda _: None, None)
        failed = []

        def bystander():
            try:
                call()
            except Exception as exc:  # reported below, with the call's name
                failed.append(exc)

        t = threading.Thread(target=bystander)
        t.start()
        t.join()
        try:
            assert not failed, f"{name} from another thread during a {mode} capture: {failed}"
            assert s.is_capturing(), f"{name} from another thread ended a {mode} capture"
        finally:
            s.end_capture().close()  # a capture the driver invalidated raises here


def test_a_query_of_an_event_recorded_in_a_capture_is_a_capture_error():
    """An event recorded into a capture has no work to wait for while the capture goes on:
    the driver refuses its query and synchronize in every mode and invalidates the capture,
    so they are refused first (CaptureError), and the capture goes on. Recorded again
    outside a capture, it answers."""
    other = streambridge.Stream(non_blocking=True)
    e = streambridge.Event(disable_timing=True)
    for mode in ("global", "thread_local", "relaxed"):
        s = streambridge.Stream(non_blocking=True)
        s.begin_capture(mode)
        s.launch_host_func(lambda _: None, None)
        s.record(e)
        with pytest.raises(streambridge.CaptureError, match="captured into a graph"):
            e.query()
        with pytest.raises(streambridge.CaptureError, match="captured into a graph"):
            e.synchronize()
        s.end_capture().close()  # a capture the driver invalidated raises here
        other.record(e)
        e.synchronize()
        assert e.query()


def test_another_librarys_event_recorded_in_a_capture_is_the_drivers_capture_error():
    """Of an event another library recorded into its capture, nothing tells streambridge it
    was captured: its query reaches the driver, which refuses it in every mode (and
    invalidates that capture). The refusal is a CaptureError all the same, with the driver's
    code, as every capture misuse is; one refused first has code 0."""
    theirs = streambridge.Event(disable_timing=True)  # stands for another library's event
    borrowed = streambridge.Event.from_handle(theirs.handle)
    s = streambridge.Stream(non_blocking=True)
    s.begin_capture("relaxed")
    s.record(theirs)
    with pytest.raises(streambridge.CaptureError) as info:
        borrowed.query()
    assert (info.value.code, info.value.name) == (907, "CUDA_ERROR_CAPTURED_EVENT")
    assert isinstance(info.value, streambridge.CUDAError)
    with pytest.raises(streambridge.CaptureError) as first:
        theirs.query()  # the core knows this one was captured: refused before the driver
    assert first.value.code == 0
    with pytest.raises(streambridge.CaptureError):  # the driver invalidated the capture
        s.end_capture()
