"""Python host callbacks captured into a graph run at every replay with their argument, and
belong to the graph: kept while the graph or any executable made from it can still run
them, whoever began the capture, and released once none can (interop_test/
test_captured_callbacks_gpu.py shows the same on the GPU, with torch.cuda.graph and CuPy)."""

import gc
import threading
import time
import weakref

import pytest

import streambridge as sb

# Exceptions raised in callbacks are checked through callback_errors(); pytest would also
# warn of each as unraisable.
pytestmark = [pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
              pytest.mark.usefixtures("no_callback_errors")]


class Arg:
    """A callback argument whose release can be seen."""






def test_a_captured_callback_runs_at_every_replay_with_its_argument():
    s = sb.Stream(non_blocking=True)
    seen = []
    s.begin_capture()
    s.launch_host_func(seen.append, "launch_host_func")
    s.add_callback(lambda stream, status, arg: seen.append((stream is s, status, arg)), "add_callback")
    graph = s.end_capture()
    s.synchronize()
    assert seen == [], "captured, not run"
    for _ in range(3):
        graph.launch(s)
    s.synchronize()
    assert seen == ["launch_host_func", (True, 0, "add_callback")] * 3
    graph.close()


def test_the_graph_owns_the_callback_and_its_argument(released):
    s = sb.Stream(non_blocking=True)
    arg, calls = Arg(), []
    s.begin_capture()
    s.launch_host_func(lambda a: calls.append(type(a).__name__), arg)
    graph = s.end_capture()
    ref = weakref.ref(arg)
    del arg
    gc.collect()
    assert ref() is not None, "the graph holds it"
    graph.launch(s)
    graph.launch(s)
    s.synchronize()
    assert calls == ["Arg", "Arg"]
    graph.close()
    assert released(ref), "released once the graph is gone"


def test_a_collected_graph_releases_its_callbacks(released):
    s = sb.Stream(non_blocking=True)
    arg = Arg()
    s.begin_capture()
    s.launch_host_func(lambda a: None, arg)
    graph = s.end_capture()
    ref = weakref.ref(arg)
    graph.launch(s)
    s.synchronize()
    del arg, graph
    assert released(ref)


def test_a_graph_closed_with_a_replay_in_flight_still_runs_its_callback(released):
    s = sb.Stream(non_blocking=True)
    arg, calls = Arg(), []
    s.begin_capture()
    s.launch_host_func(lambda a: calls.append("replay"), arg)
    graph = s.end_capture()
    ref = weakref.ref(arg)
    del arg
    gate = threading.Event()
    s.launch_host_func(lambda _: gate.wait(10), None)  # holds the stream before the replay
    graph.launch(s)
    graph.close()
    gc.collect()
    assert ref() is not None, "a launch in flight still needs it"
    gate.set()
    s.synchronize()
    assert calls == ["replay"]
    assert released(ref)


def test_an_exception_in_a_captured_callback_is_reported_at_each_replay():
    s = sb.Stream(non_blocking=True)

    def fails(n):
        raise RuntimeError(f"replay callback {n}")

    s.begin_capture()
    s.launch_host_func(fails, 7)
    graph = s.end_capture()
    graph.launch(s)
    graph.launch(s)
    s.synchronize()
    errors = sb.callback_errors()
    assert [str(e) for e in errors] == ["replay callback 7"] * 2
    graph.close()


def test_a_captured_callback_that_calls_the_library_is_refused_at_each_replay():
    s = sb.Stream(non_blocking=True)
    s.begin_capture()
    s.launch_host_func(lambda _: s.synchronize(), None)  # would deadlock: refused instead
    graph = s.end_capture()
    graph.launch(s)
    s.synchronize()
    [error] = sb.callback_errors()
    assert isinstance(error, sb.CallbackReentryError)
    graph.close()


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_a_capture_begun_by_another_library_keeps_the_callback(mode, released):
    """owner stands for torch's or CuPy's stream, captured by that framework; the callback is
    launched through a wrapper of the same handle, which did not begin the capture."""
    owner = sb.Stream(non_blocking=True)
    borrowed = sb.ExternalStream(owner.ptr)
    seen, arg = [], Arg()
    owner.begin_capture(mode)
    borrowed.launch_host_func(lambda a: seen.append(type(a).__name__), arg)
    graph = owner.end_capture()
    ref = weakref.ref(arg)
    del arg
    borrowed.close()
    graph.launch(owner)
    owner.synchronize()
    assert seen == ["Arg"]
    graph.close()
    assert released(ref)


def test_a_capture_that_fails_releases_its_callbacks(released):
    """The driver destroys the graph of a capture that cannot end (work forked off and never
    joined back), and with it the callback captured there."""
    origin, side = sb.Stream(non_blocking=True), sb.Stream(non_blocking=True)
    fork = sb.Event(disable_timing=True)
    arg = Arg()
    origin.begin_capture("global")
    origin.record(fork)
    side.wait_event(fork)  # side joins the capture
    side.launch_host_func(lambda a: None, arg)  # and is never joined back
    ref = weakref.ref(arg)
    del arg
    with pytest.raises(sb.CUDAError, match="UNJOINED"):
        origin.end_capture()
    assert released(ref)


def test_many_captured_callbacks_are_all_released(released):
    s = sb.Stream(non_blocking=True)
    args = [Arg() for _ in range(200)]
    refs = [weakref.ref(a) for a in args]
    s.begin_capture()
    for a in args:
        s.launch_host_func(lambda a: None, a)
    graph = s.end_capture()
    del args, a
    for _ in range(5):
        graph.launch(s)
    s.synchronize()
    graph.close()
    assert all(released(r) for r in refs)


def test_a_graph_releases_its_callbacks_where_cuda_may_be_called():
    """The driver's thread that destroys a graph's user objects may not call CUDA, and
    releasing an argument can (a torch tensor's deleter does: torch aborted the process on
    the refusal, on an H100). The release happens on the interpreter's main thread instead."""
    s = sb.Stream(non_blocking=True)
    where = []

    class CallsCUDAWhenReleased:
        def __del__(self):
            where.append((threading.current_thread() is threading.main_thread(), s.query()))

    s.begin_capture()
    s.launch_host_func(lambda a: None, CallsCUDAWhenReleased())
    graph = s.end_capture()
    graph.launch(s)
    s.synchronize()
    graph.close()
    deadline = time.monotonic() + 10
    while not where and time.monotonic() < deadline:
        time.sleep(0.005)
    assert where == [(True, True)]


@pytest.mark.parametrize("mode", ["relaxed", "thread_local", "global"])
@pytest.mark.parametrize("how", ["closed", "collected"])
def test_a_stream_that_dies_mid_capture_releases_its_callbacks(released, mode, how):
    """The capture's graph holds the callbacks captured so far; a stream closed or
    collected in the middle of a capture ends it and destroys that graph, so they and their
    arguments are released (they were kept for the life of the process)."""
    s = sb.Stream(non_blocking=True)
    arg = Arg()
    s.begin_capture(mode)
    s.launch_host_func(lambda a: None, arg)
    ref = weakref.ref(arg)
    del arg
    if how == "closed":
        s.close()
    else:
        del s
    assert released(ref)


@pytest.mark.parametrize("mode", ["relaxed", "thread_local", "global"])
def test_a_stream_joined_to_a_capture_and_closed_leaves_that_capture_alone(mode):
    """A stream that only joined another's capture (it waited on an event recorded in it)
    and is closed, its work joined back, leaves the capture to end as ever: its close ends
    only a capture begun on it, where an end asked of a joined stream would invalidate the
    other's (the GPU's answer, bench/capture_lifetimes.c, cases 3 and 7)."""
    origin, joined = sb.Stream(non_blocking=True), sb.Stream(non_blocking=True)
    ran = []
    origin.begin_capture(mode)
    joined.wait_event(origin.record())
    joined.launch_host_func(ran.append, "the joined stream's work")
    origin.wait_event(joined.record())
    joined.close()
    assert origin.is_capturing()
    graph = origin.end_capture()
    graph.launch(origin)
    origin.synchronize()
    assert ran == ["the joined stream's work"]
    graph.close()
    origin.close()


def test_a_capture_lost_with_its_stream_ends_apart_from_callbacks_launched_on_a_stream_joined_to_it():
    """One thread begins a capture on a stream, joins a second stream to it and closes the
    first, which ends the capture lost with it and destroys its graph; another thread
    launches callbacks on the joined stream meanwhile, each captured into that graph while
    the join lasts. The end and the launches run one at a time: the end once counted only
    the lock's owner, and a launch went on beside it into the graph the end destroyed (the
    software driver's destroyed-handle end, one run of the chaos soak in thirty with the
    GIL off). Every error is streambridge's; the callbacks captured are freed with the
    graph, none runs (no graph is ever launched)."""
    joined = sb.Stream(non_blocking=True)
    ran, deadline, stop = [], time.monotonic() + 2, threading.Event()
    errors = (sb.CUDAError, sb.ClosedError)

    def launches():
        while not stop.is_set():
            try:
                joined.launch_host_func(ran.append, "a launch on the joined stream")
            except errors:
                pass

    t = threading.Thread(target=launches)
    t.start()
    try:
        while time.monotonic() < deadline:
            origin = sb.Stream(non_blocking=True)
            try:
                origin.begin_capture("relaxed")
                joined.wait_event(origin.record())
            except errors:
                pass
            origin.close()
    finally:
        stop.set()
        t.join()
    joined.synchronize()
    joined.close()
    assert all(r == "a launch on the joined stream" for r in ran)


def test_a_capturing_stream_closed_inside_a_callback_is_released_in_one_step_by_the_next_close():
    """A stream closed inside a host callback while it captures waits for the next close
    outside one, on any thread: its release, the capture lost with it ended, its Go key
    released, the stream destroyed, is one step, whichever thread takes it. As three steps
    queued apart, one thread's end of the capture let the GIL go and another's next steps
    destroyed the stream under it (the software driver's destroyed-handle end, the chaos soak
    with the GIL off). Four threads close at once after each callback's close."""
    from streambridge import _core

    streams = _core.live_streams()
    deadline = time.monotonic() + 2
    side = sb.Stream(non_blocking=True)
    while time.monotonic() < deadline:
        capturing = sb.Stream(non_blocking=True)
        capturing.begin_capture("relaxed")
        capturing.launch_host_func(lambda _: None, None)  # captured: the graph the end destroys keeps it
        side.launch_host_func(lambda _: capturing.close(), None)
        side.synchronize()
        start = threading.Barrier(4)

        def close_one():
            start.wait()
            sb.Stream().close()

        threads = [threading.Thread(target=close_one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    side.close()
    assert _core.live_streams() == streams
