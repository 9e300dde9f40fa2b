"""What no call may do to the process: deadlock from a host callback, hang in a forked
child, act on an object through a key of another kind, take an argument it cannot honour."""

import gc
import os
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time

import pytest

import streambridge
from streambridge import _core, _tables


# The errors these tests provoke inside callbacks are expected, and asserted through
# callback_errors(); pytest would also warn of each as unraisable.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def _run_callback(s, fn, then=None):
    """Runs fn inside a host callback on s (then() right after enqueueing it); returns what
    fn raised (None if nothing)."""
    streambridge.callback_errors()
    s.launch_host_func(lambda _: fn(), None)
    if then is not None:
        then()
    done = threading.Event()
    s.launch_host_func(lambda _: done.set(), None)
    assert done.wait(10), "the callback, or the one after it, never ran: a deadlock"
    errors = streambridge.callback_errors()
    return errors[0] if errors else None


def test_a_callback_that_synchronizes_its_own_stream_gets_an_error_not_a_deadlock():
    s = streambridge.Stream(non_blocking=True)
    err = _run_callback(s, s.synchronize)
    assert isinstance(err, streambridge.CallbackReentryError) and "host callback" in str(err)
    s.synchronize()  # outside a callback it works, and the stream went on


def test_a_callback_that_waits_for_another_streams_callback_gets_an_error():
    # t's callback is queued behind the callback on s, and host callbacks run one at a time:
    # waiting for t inside the callback on s could never return.
    s, t = streambridge.Stream(non_blocking=True), streambridge.Stream(non_blocking=True)
    ran = []

    def queue_behind():
        t.wait_stream(s)
        t.launch_host_func(ran.append, "t")

    err = _run_callback(s, t.synchronize, then=queue_behind)
    assert isinstance(err, streambridge.CallbackReentryError)
    t.synchronize()
    assert ran == ["t"]


@pytest.mark.parametrize("call", ["query", "record", "wait_stream", "launch_host_func", "event_query",
                                  "event_synchronize", "new_stream", "wrap"])
def test_every_call_that_enters_the_driver_is_refused_inside_a_callback(call):
    s, t = streambridge.Stream(non_blocking=True), streambridge.Stream(non_blocking=True)
    e = streambridge.Event()
    calls = {
        "query": t.query, "record": lambda: t.record(e), "wait_stream": lambda: t.wait_stream(s),
        "launch_host_func": lambda: t.launch_host_func(print, None), "event_query": e.query,
        "event_synchronize": e.synchronize, "new_stream": streambridge.Stream,
        "wrap": lambda: streambridge.ExternalStream(t.ptr),
    }
    assert isinstance(_run_callback(s, calls[call]), streambridge.CallbackReentryError)


FREE_THREADED_BUILD = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def test_an_object_released_inside_a_callback_is_closed_later_not_lost():
    s = streambridge.Stream(non_blocking=True)
    held = [streambridge.Stream(non_blocking=True), streambridge.Event()]
    stream_key, handle, event_handle = held[0]._key, held[0].ptr, held[1].ptr
    events, streams = _core.live_events(), _core.live_streams()
    assert _run_callback(s, held.clear) is None, "dropping objects in a callback raises nothing"
    if FREE_THREADED_BUILD:
        # A reference dropped on another thread than the object's own (biased reference
        # counting, PEP 703) is merged, and the object freed, on its own thread: here this
        # one, after the callback, where the close goes through at once.
        def destroyed():
            try:
                streambridge.ExternalStream(handle).close()
            except streambridge.InvalidHandleError:
                return True
            return False

        deadline = time.monotonic() + 10
        while not destroyed() and time.monotonic() < deadline:
            gc.collect()
            time.sleep(0.001)
        with pytest.raises(streambridge.InvalidHandleError):
            streambridge.ExternalStream(handle)
        with pytest.raises(streambridge.InvalidHandleError):
            streambridge.Event.from_handle(event_handle)
        with pytest.raises(streambridge.ClosedError):
            _core.stream_handle(stream_key)
        return
    assert _core.stream_handle(stream_key), "kept for later, not lost"
    assert _core.live_events() == events - 1, "the event is counted closed; its destroy waits"
    assert _core.live_streams() == streams - 1, "the stream too"
    with pytest.raises(streambridge.InvalidHandleError, match="being destroyed"):
        streambridge.ExternalStream(handle)  # not destroyed yet, and refused: its object is gone
    streambridge.Stream().close()  # the next release outside a callback releases them too
    with pytest.raises(streambridge.InvalidHandleError):
        streambridge.ExternalStream(handle)
    with pytest.raises(streambridge.ClosedError):
        _core.stream_handle(stream_key)


def test_an_event_closed_inside_a_callback_is_destroyed_by_the_next_close_outside():
    s = streambridge.Stream(non_blocking=True)
    e = streambridge.Event(disable_timing=True)
    assert _run_callback(s, e.close) is None
    with pytest.raises(streambridge.ClosedError):
        e.query()
    streambridge.Event().close()  # destroys e's event too: a destroy that failed would raise here
    assert not e._open


def _child(code, env=None, timeout=60):
    """Runs code in a fresh interpreter; returns (returncode, output)."""
    full = dict(os.environ, **(env or {}))
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=timeout, env=full)
    return p.returncode, p.stdout + p.stderr


def test_a_stream_closed_by_freeing_an_earlier_callbacks_argument_is_refused_by_the_next_launch():
    """A launch frees the calls that have run (their arguments' destructors run there); one
    that closes the stream the launch is for is met before the launch's check, which then
    refuses it (ClosedError), where it came after the check and the launch went on with the
    destroyed handle (the software driver's destroyed-handle end, rc 86). The launches run on
    a thread of their own, so that the main thread's pending call does not free the call
    first."""
    code = """
        import threading, streambridge as sb
        s = sb.Stream(non_blocking=True)

        class ClosesTheStream:
            def __del__(self):
                s.close()

        out = []

        def run():
            s.launch_host_func(lambda _: None, ClosesTheStream())  # freed by the next launch
            s.synchronize()  # it has run, and is queued to be freed
            try:
                s.launch_host_func(lambda _: None, None)
                out.append("launched")
            except sb.ClosedError:
                out.append("ClosedError")

        t = threading.Thread(target=run)
        t.start()
        t.join()
        print(out, sb._core.live_streams())
    """
    rc, output = _child(code)
    assert rc == 0, output
    assert "['ClosedError'] 0" in output, output


def test_a_stream_whose_dealloc_waits_for_the_core_lock_is_never_collected_as_cyclic_trash():
    """Without the GIL, a stream's dealloc waits for the core lock (gate.inc), which another
    thread holds (here: a __cuda_stream__ the core calls, looping). subtype_dealloc tracks
    the object again before the core's dealloc; tracked through that wait, a collection took
    it, its last reference gone, for cyclic trash, cleared it and freed it a second time
    (SIGSEGV, or in a diagnostic build the double dealloc seen: the chaos soak with the GIL
    off, every run on an H200). A collection during the wait must not find it. With the GIL
    the dealloc never waits, and the test passes trivially."""
    code = """
        import gc, os, threading, time
        import streambridge as sb

        gc.disable()  # only the collections below


        class HoldsTheCore:
            # Its __cuda_stream__ runs inside the core (Stream.from_external), holding the
            # core lock while it loops, attached, until told to stop.

            def __init__(self, inside, go):
                self.inside, self.go = inside, go

            def __cuda_stream__(self):
                self.inside.set()
                while not self.go.is_set():
                    pass
                return (0, 0)


        for round in range(20):
            inside, go, made = threading.Event(), threading.Event(), threading.Event()
            box = []

            def hold():
                try:
                    sb.Stream.from_external(HoldsTheCore(inside, go))
                except sb.CUDAError:
                    pass

            def make_and_drop():
                box.append(sb.Stream(non_blocking=True))
                made.set()
                inside.wait()
                box.pop()  # the last reference: its dealloc waits for the core lock

            b = threading.Thread(target=make_and_drop)
            b.start()
            made.wait()
            a = threading.Thread(target=hold)
            a.start()
            inside.wait()
            time.sleep(0.05)
            gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds unreachable goes to gc.garbage
            gc.collect()
            gc.set_debug(0)
            if any(isinstance(o, sb.Stream) for o in gc.garbage):
                print(f"round {round}: a stream whose dealloc waited for the core lock was collected as cyclic trash", flush=True)
                os._exit(1)
            go.set()
            a.join()
            b.join()
        print("no stream collected while its dealloc waited", sb._core.live_streams())
    """
    rc, output = _child(code)
    assert rc == 0, output
    assert "no stream collected while its dealloc waited 0" in output, output


@pytest.mark.parametrize("used", [False, True], ids=["imported", "used"])
def test_a_forked_child_gets_a_typed_error_naming_spawn_and_never_hangs(used):
    code = f"""
        import os, sys
        import streambridge
        if {used}:
            s = streambridge.Stream(non_blocking=True)
            s.synchronize()
        pid = os.fork()
        if pid == 0:
            try:
                streambridge.Stream(non_blocking=True).synchronize()
            except streambridge.ForkedProcessError as e:
                os._exit(0 if "spawn" in str(e) else 3)
            os._exit(4)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status))
        if {used}:
            s.synchronize()  # the parent goes on
            print("parent ok")
    """
    rc, out = _child(code)
    assert rc == 0 and "child exit 0" in out, out
    assert not used or "parent ok" in out, out


def test_a_fork_pool_reports_the_error_and_does_not_hang():
    code = """
        import multiprocessing as mp
        import streambridge

        def work(_):
            try:
                streambridge.Stream(non_blocking=True).query()
            except streambridge.ForkedProcessError:
                return "refused"
            return "ran"

        if __name__ == "__main__":
            streambridge.Stream(non_blocking=True).synchronize()
            with mp.get_context("fork").Pool(2) as pool:
                print(pool.map(work, range(4), chunksize=1))
    """
    rc, out = _child(code)
    assert rc == 0 and "['refused', 'refused', 'refused', 'refused']" in out, out


def test_a_graph_cannot_be_made_from_a_key():
    s = streambridge.Stream(non_blocking=True)
    with pytest.raises(TypeError, match="end_capture"):
        streambridge.Graph(s._key, 0)
    s.query()  # untouched


def test_a_key_of_another_kind_is_a_type_error_and_closes_nothing():
    s = streambridge.Stream(non_blocking=True)
    e = streambridge.Event()
    with pytest.raises(TypeError, match="is a stream, not a graph"):
        _core.release(s._key, _tables.OBJECT_GRAPH)
    with pytest.raises(TypeError, match="is a stream, not a graph"):
        _core.graph_launch(s._key, s._key)
    with pytest.raises(TypeError, match="is a stream, not a module"):
        _core.module_function(s._key, "f")
    s.record(e)
    s.synchronize()
    assert e.query() and s.query(), "both still open"


def test_an_events_handle_cannot_be_forged():
    e = streambridge.Event()
    for field, value in (("_eptr", 1), ("_open", True), ("_device", 3)):
        with pytest.raises(AttributeError):
            setattr(e, field, value)
    with pytest.raises(TypeError, match="already made"):
        e.__init__()


_KEPT = {}  # what a borrowed stream in a parametrized case borrows


@pytest.mark.parametrize("make", [
    lambda: streambridge.Stream(non_blocking=True),
    lambda: streambridge.Stream(null=True),
    lambda: streambridge.ExternalStream(_KEPT.setdefault("owner", streambridge.Stream()).ptr),
    lambda: streambridge.ExternalStream(stream_ptr=0, device=0),
])
def test_a_streams_handle_cannot_be_forged(make):
    s = make()
    fields = ("_ptr", "_ctx", "_id", "_device", "_open", "_owned", "_k", "_fence")
    for field in fields:
        with pytest.raises(AttributeError):
            setattr(s, field, 0xDEAD0)
    assert s.query() is True, "still the stream it was"
    with pytest.raises(TypeError, match="already made"):
        s._fill(0xDEAD0, -1, False)  # the initializers' one fill refuses a stream made
    if type(s) is streambridge.Stream:
        with pytest.raises(TypeError, match="already made"):
            s.__init__()


@pytest.mark.parametrize("make, error, match", [
    (lambda: streambridge.Event(options="garbage"), TypeError, "options must be"),
    (lambda: streambridge.Event(options={"timing": True}), TypeError, "unknown event options"),
    (lambda: streambridge.Event(device=2**64), ValueError, "device"),
    (lambda: streambridge.Stream(device=2**64), ValueError, "device"),
    (lambda: streambridge.Stream(device="cuda:99999999999"), ValueError, "device"),
    (lambda: streambridge.ExternalStream(0, 2**64), ValueError, "device"),
    (lambda: streambridge.Stream(priority=2**40), ValueError, "priority"),
    (lambda: streambridge.Stream(priority=1.5), TypeError, "priority"),
    (lambda: streambridge.ExternalStream(2**64), ValueError, "out of range"),
    (lambda: streambridge.ExternalStream(-1), ValueError, "out of range"),
    (lambda: streambridge.ExternalStream("7"), TypeError, "must be an int"),
])
def test_every_argument_is_checked_with_its_name(make, error, match):
    with pytest.raises(error, match=match):
        make()


@pytest.mark.parametrize("version", [0.0, False, "0", None, 1])
def test_a_cuda_stream_version_other_than_the_int_0_is_refused(version):
    class Proto:
        def __cuda_stream__(self):
            return (version, 0)

    with pytest.raises(ValueError, match="version"):
        streambridge.Stream.from_external(Proto())
    with pytest.raises(ValueError, match="version"):
        streambridge.as_stream(Proto())


@pytest.mark.parametrize("env, match", [
    ({"STREAMBRIDGE_DRIVER": "gpu"}, "STREAMBRIDGE_DRIVER"),
    ({"STREAMBRIDGE_DRIVER": "sim", "STREAMBRIDGE_SIM_DEVICES": "-1"}, "STREAMBRIDGE_SIM_DEVICES"),
    ({"STREAMBRIDGE_DRIVER": "sim", "STREAMBRIDGE_SIM_DEVICES": "abc"}, "STREAMBRIDGE_SIM_DEVICES"),
    ({"STREAMBRIDGE_DRIVER": "sim", "STREAMBRIDGE_SIM_DEVICES": "100000000"}, "STREAMBRIDGE_SIM_DEVICES"),
])
def test_a_bad_setting_is_a_value_error_naming_it(env, match):
    rc, out = _child("""
        import streambridge
        try:
            streambridge.Stream()
        except ValueError as e:
            print("refused:", e)
    """, env, timeout=30)
    assert rc == 0 and "refused:" in out and match in out, out


def test_errors_from_go_arrive_typed_with_code_and_name(foreign_stream, stated_elsewhere):
    handle, _ = foreign_stream
    with pytest.raises(streambridge.InvalidHandleError) as info:
        streambridge.ExternalStream(handle + 8)  # not a stream: refused in Go, before the driver
    assert info.value.code == 400 and info.value.name == "CUDA_ERROR_INVALID_HANDLE"
    other, error, match = stated_elsewhere
    with pytest.raises(error, match=match):
        streambridge.ExternalStream(handle, other)


def test_a_borrowed_stream_is_refused_after_its_address_is_reused(driver_name):
    # Identity, not address: the stream behind a borrowed handle is destroyed and a new
    # stream takes its address (the software driver reuses it at once, as an allocator
    # does; on the real driver streams are made until one lands there). Every use of the
    # old wrapper is refused, before the driver sees the handle.
    owner = streambridge.Stream(non_blocking=True)
    handle = owner.ptr
    old = streambridge.ExternalStream(handle)
    via_go = streambridge.ExternalStream(handle)
    via_go.priority  # this one has a Go stream already
    e, t = streambridge.Event(disable_timing=True), streambridge.Stream(non_blocking=True)
    old.record(e)
    owner.close()  # destroyed behind the wrappers' backs
    kept = []
    for _ in range(1000):
        kept.append(streambridge.Stream(non_blocking=True))
        if kept[-1].ptr == handle:
            break
    reused = kept[-1].ptr == handle
    assert reused or driver_name != "sim", "the software driver reuses a freed address at once"
    calls = {
        "query": old.query, "record": lambda: old.record(e), "wait_event": lambda: old.wait_event(e),
        "wait_stream": lambda: old.wait_stream(t), "waited on": lambda: t.wait_stream(old),
        "event record": lambda: e.record(old), "event wait": lambda: e.wait(old),
        "launch_host_func": lambda: old.launch_host_func(print, None),
        "add_callback": lambda: old.add_callback(print, None), "synchronize": old.synchronize,
        "priority": lambda: old.priority, "begin_capture": old.begin_capture, "is_capturing": old.is_capturing,
        "__cuda_stream__": old.__cuda_stream__, "from_external": lambda: streambridge.Stream.from_external(old),
        "to_torch": old.to_torch, "to_cupy": old.to_cupy, "to_cuda_core": old.to_cuda_core,
        "Go stream: synchronize": via_go.synchronize, "Go stream: query": via_go.query,
    }
    for name, call in calls.items():
        with pytest.raises(streambridge.InvalidHandleError, match="was destroyed"):
            call()
            pytest.fail(f"{name} used a destroyed stream (address reused: {reused})")
    kept[-1].query()  # the new stream at that address is untouched


def test_a_handle_wrapped_while_its_stream_is_dropped_on_another_thread_is_refused_or_tied_never_revived():
    """One thread drops streams it made, each capturing (its dealloc closes it, and the close
    ends the capture, letting the GIL go), while another wraps their handles by number and
    queries the wrapper. A wrap finds the stream alive and holds it, or gone and is refused
    or proven by identity; it never takes a reference to a stream whose last one is gone (the
    registry kept its address, and a wrap during its dealloc revived it, then outlived the
    free). Any streambridge error is accepted; the test fails on a crash, a hang or another
    error, or a stream left alive."""
    streams = _core.live_streams()
    handles, stop = [], threading.Event()
    errors = (streambridge.CUDAError, streambridge.ClosedError)

    def wraps():
        while not stop.is_set():
            if not handles:
                continue
            try:
                x = streambridge.ExternalStream(handles[-1])
                x.query()
                x.close()
            except errors:
                pass

    t = threading.Thread(target=wraps)
    t.start()
    try:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            s = streambridge.Stream(non_blocking=True)
            s.begin_capture("relaxed")
            handles.append(s.ptr)
            del s  # no close: the dealloc's
    finally:
        stop.set()
        t.join()
    # A reference dropped on another thread than the stream's own (a wrapper's, to its
    # origin) is merged, and the stream freed, on its own thread, later, where the GIL is
    # off (biased reference counting, PEP 703).
    deadline = time.monotonic() + 10
    while _core.live_streams() != streams and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.001)
    assert _core.live_streams() == streams
