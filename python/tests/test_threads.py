"""Threads: a close() on one thread racing a call on another never lets a destroyed handle
reach the driver. The real driver crashes on one (SIGSEGV); the software driver ends the
process too (exit 86, naming the call), so these fail on either driver if a close slips
under a call.

The soak is also a command of its own, for the GPU machine:
``python3 python/tests/test_threads.py --soak SECONDS``."""

import gc
import json
import os
import random
import subprocess
import sys
import threading
import time

import pytest

import streambridge as sb

from _unlearnable import UNLEARNABLE
from test_go_function import Array, describe  # a Go function given a stream, and an array for it

CLOSED_OR_OK = (sb.ClosedError,)


def _objects(device=0):
    """One round's objects on device: a stream and an event that get closed, the stream,
    event and graph the calls use with them."""
    s, other = sb.Stream(non_blocking=True, device=device), sb.Stream(non_blocking=True, device=device)
    e, end = sb.Event(device=device), sb.Event(device=device)
    s.record(e)
    other.record(end)
    other.begin_capture()
    other.record()  # an event record node: no host callback, which the blocked one would hold up
    g = other.end_capture()
    other.synchronize()
    ipc = sb.Event(interprocess=True, disable_timing=True, device=device)
    return {"s": s, "other": other, "e": e, "end": end, "g": g, "ipc": ipc}


class _Destroyed(sb.ClosedError):
    """A wrap's check refused a handle its owner's close destroyed: what ends the wrap's
    calls in a race, as ClosedError ends the others'."""


def _wrap(wrap, origin):
    """A wrapper of origin's handle, queried and closed. Once origin is closed the handle
    is a destroyed one, which the check or the query refuses, or the driver has given it to
    a stream made since (the soak's remakes), which may be capturing: any error of the
    driver's then; none while origin is open."""
    handle = origin.ptr
    try:
        w = wrap(handle)
        try:
            w.query()
        finally:
            w.close()
    except sb.CUDAError as e:
        if origin._open:
            raise
        raise _Destroyed(str(e)) from e


def _elapsed(start, end):
    """start's time to end's; not ready while either is recorded again on a busy stream."""
    try:
        return start.elapsed_time(end)
    except sb.CUDAError as e:
        if e.name != "CUDA_ERROR_NOT_READY":
            raise


def _within(s):
    """A ``with`` block on s, and a call on the current stream inside it."""
    with s:
        sb.current_stream().query()


# Every call that has a stream's or an event's handle, and which object the round closes.
CALLS = [
    ("s", "query", lambda o: o["s"].query()),
    ("s", "synchronize", lambda o: o["s"].synchronize()),
    ("s", "record", lambda o: o["s"].record(o["e"])),
    ("s", "wait_event", lambda o: o["s"].wait_event(o["e"])),
    ("s", "wait_stream", lambda o: o["other"].wait_stream(o["s"])),
    ("s", "wait_stream (waiter)", lambda o: o["s"].wait_stream(o["other"])),
    ("s", "launch_host_func", lambda o: o["s"].launch_host_func(lambda _: None, None)),
    ("s", "is_capturing", lambda o: o["s"].is_capturing()),
    ("s", "graph launch", lambda o: o["g"].launch(o["s"])),
    ("s", "priority", lambda o: o["s"].priority),
    ("s", "is_non_blocking", lambda o: o["s"].is_non_blocking),
    ("s", "id", lambda o: o["s"].id),
    ("s", "a Go function", lambda o: describe(o["s"], Array())),
    ("s", "record_event", lambda o: o["s"].record_event()),
    ("s", "Stream.wait", lambda o: o["s"].wait(o["e"])),
    ("s", "Stream.wait (stream)", lambda o: o["other"].wait(o["s"])),
    ("s", "add_callback", lambda o: o["s"].add_callback(lambda s, status, arg: None, None)),
    ("s", "hand_over", lambda o: sb.hand_over(bytearray(8), o["s"])),
    ("s", "graph upload", lambda o: o["g"].upload(o["s"])),
    ("s", "__cuda_stream__", lambda o: o["s"].__cuda_stream__()),
    ("s", "as_stream", lambda o: sb.as_stream(o["s"]).query()),
    ("s", "ExternalStream", lambda o: _wrap(sb.ExternalStream, o["s"])),
    ("s", "with", lambda o: _within(o["s"])),
    ("e", "Event.query", lambda o: o["e"].query()),
    ("e", "Event.synchronize", lambda o: o["e"].synchronize()),
    ("e", "Event.record", lambda o: o["e"].record(o["other"])),
    ("e", "wait_event (event)", lambda o: o["other"].wait_event(o["e"])),
    ("e", "Event.wait", lambda o: o["e"].wait(o["other"])),
    ("e", "elapsed_time", lambda o: _elapsed(o["e"], o["end"])),
    ("e", "elapsed_time (end)", lambda o: _elapsed(o["end"], o["e"])),
    ("e", "Event.from_handle", lambda o: _wrap(sb.Event.from_handle, o["e"])),
    ("e", "as_event", lambda o: sb.as_event(o["e"]).query()),
    ("ipc", "ipc_handle", lambda o: o["ipc"].ipc_handle()),
    ("g", "graph launch (graph)", lambda o: o["g"].launch(o["other"])),
]


def _close_all(o):
    for v in o.values():
        v.close()


@pytest.fixture
def host_callback_waiting():
    """A host callback blocked on a stream of its own: while one waits for the GIL, the
    core lets the GIL go around every enqueue too, which is where a close can meet it."""
    s = sb.Stream(non_blocking=True)
    gate = threading.Event()
    s.launch_host_func(lambda _: gate.wait(30), None)
    yield
    gate.set()
    s.synchronize()
    s.close()


def _race(call, close, threads=3, ends=CLOSED_OR_OK):
    """call() on `threads` threads started together, each until it raises one of ends
    (ClosedError), while this thread runs close() at a random moment: the other errors they
    raised, and whether any of them did not return."""
    errors = []
    start = threading.Barrier(threads + 1)

    def use():
        start.wait()
        try:
            while True:
                call()
        except ends:
            pass
        except BaseException as e:  # reported by the caller, on the test's thread
            errors.append(e)

    workers = [threading.Thread(target=use) for _ in range(threads)]
    for t in workers:
        t.start()
    start.wait()
    time.sleep(random.random() * 0.002)
    close()
    for t in workers:
        t.join(30)
    return errors, any(t.is_alive() for t in workers)


# The wraps of a bare handle, which only a learned layout proves (conftest.py)
WRAPS = {"ExternalStream", "Event.from_handle"}


@pytest.mark.parametrize("closes,name,call", [pytest.param(*c, id=c[1], marks=[pytest.mark.learned_layout] * (c[1] in WRAPS))
                                              for c in CALLS])
def test_close_racing_a_call_on_other_threads(closes, name, call, host_callback_waiting):
    for _ in range(10):
        o = _objects()
        errors, hung = _race(lambda: call(o), o[closes].close)
        assert not hung, f"{name}: a call did not return after close"
        assert errors == []
        o["other"].synchronize()
        _close_all(o)


def _live(core):
    """The streams and events the core made and holds, once the garbage of earlier tests is
    collected: an object of theirs in a reference cycle (an exception's traceback keeps its
    frame's locals) is released whenever the collector runs, which may be in the middle of
    a test that counts (CI, 3.13t with PYTHON_GIL=1: 7 streams before, 6 after)."""
    gc.collect()
    return core.live_streams(), core.live_events()


@pytest.mark.parametrize("first_holder", ["a caller", "the closer", "a thread gone"])
@pytest.mark.parametrize("closed_first", ["stream", "event"])
def test_frequent_calls_racing_a_close_release_each_object_once(closed_first, first_holder):
    """Record, wait, the queries, an event's synchronize and wait_stream hold their objects
    without the core lock where there is no GIL (python/native/holds.inc): a close among them
    leaves the release to the last call out, exactly once. A second release would reach the
    software driver with a destroyed handle (exit 86); none would leave the count of live
    objects above where it began. Without the GIL the thread that holds an object first
    counts its holds apart, with plain stores ("A thread's own holds"): that thread is one of
    the callers, the closing thread itself, or one that has ended, so that every other
    caller's holds go in the shared word."""
    from streambridge import _core

    before = _live(_core)
    for _ in range(20):
        s, waiter = sb.Stream(non_blocking=True), sb.Stream(non_blocking=True)
        e = sb.Event(disable_timing=True)
        if first_holder == "the closer":
            s.query(), e.query(), waiter.query()
        elif first_holder == "a thread gone":
            t = threading.Thread(target=lambda: (s.query(), e.query(), waiter.query()))
            t.start()
            t.join()

        def calls():
            s.record(e)
            waiter.wait_event(e)
            e.record(s)
            e.wait(waiter)
            s.wait(e)
            s.query()
            e.query()
            e.synchronize()
            waiter.wait(s)
            s.wait(waiter)

        first, second = (s, e) if closed_first == "stream" else (e, s)
        errors, hung = _race(calls, lambda: (first.close(), second.close()), threads=4)
        assert not hung, "a record or a wait did not return after close"
        assert errors == []
        waiter.synchronize()
        waiter.close()
    assert _live(_core) == before, "streams, events the core made and still holds"


def test_records_and_waits_on_wrappers_racing_their_origins_close_release_each_origin_once():
    """The same through wrappers of the core's own handles (ExternalStream of a Stream's ptr,
    Event.from_handle of an Event's): a record or a wait holds the origin too, so the
    origins' closes on the test's thread leave their destroys to the last wrapper call out.
    The wrappers' calls then raise InvalidHandleError (their origin is gone)."""
    from streambridge import _core

    before = _live(_core)
    for _ in range(20):
        origin_stream, origin_event, waiter = sb.Stream(non_blocking=True), sb.Event(), sb.Stream(non_blocking=True)
        s, e = sb.ExternalStream(origin_stream.ptr), sb.Event.from_handle(origin_event.ptr)

        def calls():
            s.record(e)
            waiter.wait_event(e)
            e.wait(s)
            s.query()
            e.query()
            waiter.wait(s)

        errors, hung = _race(calls, lambda: (origin_stream.close(), origin_event.close()), threads=4,
                             ends=(sb.ClosedError, sb.InvalidHandleError))
        assert not hung, "a record or a wait on a wrapper did not return after its origin's close"
        assert errors == []
        waiter.synchronize()
        for o in (s, e, waiter):
            o.close()
    assert _live(_core) == before, "streams, events the core made and still holds"


def test_close_during_synchronize_returns_at_once_and_destroys_after():
    s = sb.Stream(non_blocking=True)
    gate = threading.Event()
    s.launch_host_func(lambda _: gate.wait(30), None)
    synced = []
    t = threading.Thread(target=lambda: synced.append(s.synchronize()))
    t.start()
    time.sleep(0.05)  # the synchronize is in the driver, the stream held
    s.close()  # returns at once: it does not wait for the synchronize
    with pytest.raises(sb.ClosedError):
        s.query()
    gate.set()
    t.join(10)
    assert synced == [None]
    with pytest.raises(sb.ClosedError):
        s.synchronize()


def test_a_callback_closes_the_stream_whose_synchronize_waits_for_it():
    s = sb.Stream(non_blocking=True)
    gate = threading.Event()  # the callback closes s once synchronize() waits for it
    s.launch_host_func(lambda _: (gate.wait(30), s.close()), None)  # deferred, never a deadlock
    threading.Timer(0.05, gate.set).start()
    s.synchronize()
    sb.Stream().close()  # the deferred close is done by the next close outside a callback
    with pytest.raises(sb.ClosedError):
        s.query()


def test_event_closed_while_another_thread_synchronizes_on_it():
    s = sb.Stream(non_blocking=True)
    gate = threading.Event()
    s.launch_host_func(lambda _: gate.wait(30), None)
    e = s.record()
    done = []
    t = threading.Thread(target=lambda: done.append(e.synchronize()))
    t.start()
    time.sleep(0.05)
    e.close()
    with pytest.raises(sb.ClosedError):
        e.query()
    gate.set()
    t.join(10)
    assert done == [None]
    s.synchronize()
    s.close()


def soak(seconds, threads=8, seed=0):
    """Eight threads doing random calls on shared objects, spread over every device (up to
    four), closing and remaking them now and then; returns (calls, refused as closed,
    devices). Any other error is raised."""
    calls = [c for c in CALLS if not (UNLEARNABLE and c[1] in WRAPS)]  # refused as unprovable there, as designed
    devices = min(sb.device_count(), 4)
    slots = [_objects(i % devices) for i in range(4)]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    counts = [0, 0]
    errors = []

    def work(n):
        rng = random.Random(seed * 100 + n)
        while time.monotonic() < deadline and not errors:
            i = rng.randrange(len(slots))
            o = slots[i]
            closes, _, call = rng.choice(calls)
            try:
                if rng.randrange(200) == 0:
                    o[closes].close()
                    with lock:
                        slots[i] = _objects(i % devices)
                else:
                    call(o)
                counts[0] += 1
            except CLOSED_OR_OK:
                counts[1] += 1
            except BaseException as e:
                errors.append(e)

    ts = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    for o in slots:
        o["other"].synchronize()
    return counts[0], counts[1], devices


def test_soak_in_a_child_process():
    """The soak, in a child: a destroyed handle reaching the driver ends that process, and
    this test says how (exit 86 on the software driver, SIGSEGV on a GPU)."""
    r = subprocess.run([sys.executable, __file__, "--soak", os.environ.get("STREAMBRIDGE_SOAK_SECONDS", "2")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-4000:]}"
    assert f"8 threads, {min(sb.device_count(), 4)} devices" in r.stdout


def test_end_capture_from_another_thread_is_a_capture_error():
    """CUDA wants a global or thread-local capture ended on the thread that began it: from
    another it is refused (CaptureError), and the capture goes on for its own thread."""
    for mode in ("global", "thread_local"):
        s = sb.Stream(non_blocking=True)
        s.begin_capture(mode)
        s.record()
        got = []

        def end_elsewhere():
            try:
                s.end_capture()
            except Exception as e:  # noqa: BLE001 - the test reads what it is
                got.append(e)

        t = threading.Thread(target=end_elsewhere)
        t.start()
        t.join()
        assert len(got) == 1 and isinstance(got[0], sb.CaptureError), (mode, got)
        assert "thread" in str(got[0])
        assert s.is_capturing()
        g = s.end_capture()
        g.launch(s)
        s.synchronize()
        g.close()
        s.close()


def test_per_thread_stream_is_each_calling_threads():
    """A per-thread default stream object means, on each Python thread, that thread's
    (as CuPy's and torch's do): the calls that go through Go (synchronize, priority, the
    stream's id) work from every thread, and no two threads' ids are the same."""
    from streambridge import _core
    s = sb.Stream(ptds=True)
    ids, errors = {}, []

    def use(i):
        try:
            s.launch_host_func(lambda _: None, None)
            s.synchronize()
            assert s.priority == 0
            ids[i] = _core.stream_id(s._key)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=use, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(ids.values())) == 4, ids
    s.close()


def _captures_beside(call, capture, refusals=(sb.CaptureError,), threads=2, seconds=1.0):
    """`capture()` over and over for `seconds` (each a capture begun and ended by this
    thread), while `threads` others each run `call()` until then, each until it raises
    something other than `refusals`: the captures made, the calls that returned and those
    refused, and what else they raised."""
    stop, errors, answers = threading.Event(), [], [0, 0]

    def caller():
        while not stop.is_set():
            try:
                call()
                answers[0] += 1
            except refusals:
                answers[1] += 1
            except Exception as e:  # noqa: BLE001 - reported to the caller
                errors.append(e)
                return

    workers = [threading.Thread(target=caller) for _ in range(threads)]
    for t in workers:
        t.start()
    captures, deadline = 0, time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            capture()
            captures += 1
    finally:
        stop.set()
        for t in workers:
            t.join()
    return captures, answers, errors


def test_captures_racing_callbacks():
    """One thread begins and ends captures on a stream, replays and closes their graphs,
    while two others launch host callbacks on it: each callback is captured and kept for
    the replays, or runs once; none is lost or run freed (this crashed both drivers when a
    capture ended between a launch's look at the capture and its launch)."""
    s = sb.Stream(non_blocking=True)
    ran = [0]

    def count(_):
        ran[0] += 1

    def capture():
        s.begin_capture("relaxed")
        time.sleep(0.0002)
        g = s.end_capture()
        g.launch(s)
        g.launch(s)
        g.close()

    captures, (launched, refused), errors = _captures_beside(lambda: s.launch_host_func(count, None), capture)
    s.synchronize()
    assert errors == [] and refused == 0
    assert sb.callback_errors() == []
    assert captures > 0 and launched > 0 and ran[0] > 0
    s.close()


@pytest.mark.parametrize("call", ["query", "synchronize"])
def test_queries_racing_captures_never_invalidate_them(call):
    """Two threads query (or synchronize, which polls queries) a stream while this one
    begins and ends captures on it: each either answers (no capture) or is refused
    (CaptureError), and never reaches the driver on the capturing stream, where the driver
    refuses it and invalidates the capture. A begin through streambridge is counted in Go
    (the capture lock whole) before the core counts it: a query that meets the lock whole
    asks the stream's capture first (stream_query_held)."""
    s = sb.Stream(non_blocking=True)

    def capture():
        s.begin_capture("relaxed")
        s.end_capture().close()  # an invalidated capture raises CaptureError here

    captures, (answered, refused), errors = _captures_beside(getattr(s, call), capture)
    assert errors == []
    assert captures > 0 and answered > 0, (captures, answered, refused)
    s.close()


@pytest.mark.parametrize("call", ["query", "synchronize"])
def test_event_queries_racing_captures_never_invalidate_them(call):
    """Two threads query (or synchronize) an event while this one records it on a stream,
    then begins a capture there that records it again, and ends it: each query answers or is
    refused (CaptureError), and never reaches the driver while the event's last record is in
    a capture that goes on, where the driver refuses it and invalidates the capture. A record
    made under the capture lock whole says whether it went into a capture, asked of the
    driver in its lock section, and a query that meets a record not yet noted asks again
    (event_query_held). Between a capture's end and the next record, the driver answers
    the event's query CUDA_ERROR_INVALID_VALUE (a CUDAError, counted as refused)."""
    s, e = sb.Stream(non_blocking=True), sb.Event(disable_timing=True)

    def capture():
        e.record(s)
        s.begin_capture("relaxed")
        e.record(s)
        s.end_capture().close()  # an invalidated capture raises CaptureError here

    captures, (answered, refused), errors = _captures_beside(getattr(e, call), capture, refusals=(sb.CUDAError,))
    assert errors == []
    assert captures > 0 and answered > 0, (captures, answered, refused)
    s.synchronize()
    e.close()
    s.close()


# A child's program: this thread puts a host callback of 0.2 ms and a record of an event on a
# stream, then begins and ends a capture on it that records the event, and closes its graph,
# over and over, while two threads synchronize the stream and the event; every call returns
# or raises a CUDAError. Prints the counts.
SYNCHRONIZES_RACING_CAPTURES = """
import json, sys, threading, time
import streambridge as sb
s, e = sb.Stream(non_blocking=True), sb.Event(disable_timing=True)
stop, pending, untyped, waits = threading.Event(), threading.Event(), [], [0, 0]
def ran(_):
    time.sleep(0.0002)
    pending.clear()
def waiter(i, wait):
    while not stop.is_set():
        try:
            wait()
        except sb.CUDAError:
            pass
        except BaseException as x:
            untyped.append(repr(x))
            return
        waits[i] += 1
threads = [threading.Thread(target=waiter, args=(i, w)) for i, w in enumerate((s.synchronize, e.synchronize))]
for t in threads:
    t.start()
captures, deadline = 0, time.monotonic() + float(sys.argv[1])
while time.monotonic() < deadline:
    try:
        if not pending.is_set():  # work for the waits to wait for as the capture begins, one at a time
            pending.set()
            s.launch_host_func(ran, None)
        s.record(e)
        s.begin_capture("relaxed")
        s.record(e)
        s.end_capture().close()
        captures += 1
    except sb.CUDAError:
        try:
            s.end_capture().close()
        except sb.CUDAError:
            pass
stop.set()
for t in threads:
    t.join(60)
s.synchronize()
print(json.dumps({"captures": captures, "waits": waits, "untyped": untyped, "hung": any(t.is_alive() for t in threads)}))
"""


def test_synchronizes_racing_captures():
    """A capture's begin and end, and its record of an event, on one thread while two others
    synchronize the stream and the event: the real driver's own synchronize crashed there
    (SIGSEGV, an H200, driver 580: bench/capture_races.c, cases 38 to 48, the waiting thread
    relaxed or not), and the software driver ends the process there too. Every wait is now
    queries under the capture lock. In a child process, so that a crash fails this test."""
    p = subprocess.run([sys.executable, "-c", SYNCHRONIZES_RACING_CAPTURES, "1.0"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    seen = json.loads(p.stdout)
    assert seen["untyped"] == [] and not seen["hung"], seen
    assert seen["captures"] > 0 and min(seen["waits"]) > 0, seen

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--soak":
        calls, refused, devices = soak(float(sys.argv[2]))
        print(f"soak: {calls} calls, {refused} refused as closed, 8 threads, {devices} devices, driver {sb.driver()}")
    else:
        sys.exit("usage: test_threads.py --soak SECONDS")
