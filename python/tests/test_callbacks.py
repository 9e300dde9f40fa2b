"""Host callbacks into Python: order, arguments, exceptions, many in a row, no deadlock."""

import gc
import os
import subprocess
import sys
import threading
import time
import weakref

import pytest

import streambridge


def test_callbacks_run_in_stream_order_with_their_arguments():
    s = streambridge.Stream(non_blocking=True)
    seen = []
    for i in range(3):
        s.launch_host_func(seen.append, i)
    s.add_callback(lambda stream, status, arg: seen.append((stream, status, arg)), "last")
    s.synchronize()
    assert seen == [0, 1, 2, (s, 0, "last")]  # add_callback: CuPy's (stream, status, arg)


def test_the_default_stream_takes_callbacks_too():
    s = streambridge.Stream(null=True)
    done = []
    s.launch_host_func(done.append, "null")
    s.synchronize()
    assert done == ["null"]


def test_arg_is_kept_alive_until_the_call_and_released_after(released):
    class Arg:
        pass

    s = streambridge.Stream(non_blocking=True)
    gate = threading.Event()
    s.launch_host_func(lambda _: gate.wait(5), None)  # holds the stream until released
    arg = Arg()
    ref = weakref.ref(arg)
    got = []
    s.launch_host_func(lambda a: got.append(type(a).__name__), arg)
    del arg
    gc.collect()
    assert ref() is not None, "the pending call keeps its argument"
    gate.set()
    s.synchronize()
    assert got == ["Arg"]
    assert released(ref), "released once the call ran (on the main thread, soon after)"


def test_an_exception_is_reported_and_kept_and_the_stream_goes_on(monkeypatch):
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    streambridge.callback_errors()  # start empty

    def boom(arg):
        raise ValueError(f"boom {arg}")

    s = streambridge.Stream(non_blocking=True)
    after = []
    s.launch_host_func(boom, 1)
    s.launch_host_func(after.append, "still runs")
    s.synchronize()
    errors = streambridge.callback_errors()
    assert [str(e) for e in errors] == ["boom 1"] and isinstance(errors[0], ValueError)
    assert errors[0].__traceback__ is not None
    assert [str(e) for e in reported] == ["boom 1"]
    assert after == ["still runs"]
    assert streambridge.callback_errors() == [], "collected once"


def test_errors_nobody_reads_are_bounded_the_oldest_dropped_and_counted(monkeypatch):
    monkeypatch.setattr(sys, "unraisablehook", lambda u: None)
    streambridge.callback_errors()  # start empty
    dropped_before = streambridge.callback_errors_dropped()
    kept = streambridge.CALLBACK_ERRORS_KEPT
    extra = 250

    def boom(n):
        raise ValueError(n)

    s = streambridge.Stream(non_blocking=True)
    for n in range(kept + extra):
        s.launch_host_func(boom, n)
    s.synchronize()
    errors = streambridge.callback_errors()
    assert len(errors) == kept
    assert [e.args[0] for e in errors] == list(range(extra, kept + extra)), "the newest kept, oldest first"
    assert streambridge.callback_errors_dropped() - dropped_before == extra
    assert streambridge.callback_errors() == []


def test_100000_callbacks_in_a_row():
    s = streambridge.Stream(non_blocking=True)
    count = [0]

    def add(n):
        count[0] += n

    for _ in range(100_000):
        s.launch_host_func(add, 1)
    s.synchronize()
    assert count[0] == 100_000


def _thread_states():
    """How many Python thread states the interpreter has (its C API, through ctypes)."""
    import ctypes

    api = ctypes.pythonapi
    api.PyInterpreterState_Get.restype = ctypes.c_void_p
    api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
    api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
    api.PyThreadState_Next.restype = ctypes.c_void_p
    api.PyThreadState_Next.argtypes = [ctypes.c_void_p]
    n, t = 0, api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Get())
    while t:
        n, t = n + 1, api.PyThreadState_Next(t)
    return n


def test_a_callback_thread_keeps_its_python_state_between_callbacks():
    # The driver runs host functions on a thread of its own. Its Python thread state is made
    # at its first callback and kept, not made and freed around each one (several
    # microseconds of every callback): what a callback leaves in a threading.local the next
    # one on that thread finds, and more callbacks make no more thread states.
    s = streambridge.Stream(non_blocking=True)
    local = threading.local()
    seen = []

    def note(i):
        seen.append((threading.get_ident(), getattr(local, "last", None)))
        local.last = i

    last = {}  # each thread's last callback

    def run(count):
        del seen[:]
        for i in range(count):
            s.launch_host_func(note, i)
        s.synchronize()
        for i, (ident, found) in enumerate(seen):
            assert found == last.get(ident), f"callback {i} on thread {ident} found its thread's last callback's mark"
            last[ident] = i
        return {ident for ident, _ in seen}

    threads = run(50)
    assert len(threads) < 50, "the callbacks ran on as many threads as there were callbacks"
    states = _thread_states()
    new = run(200) - threads
    assert _thread_states() <= states + len(new), "each callback made a thread state that stayed"


def test_no_deadlock_with_threads_that_synchronize():
    # The callbacks need the GIL on the driver's thread while Python threads wait in
    # synchronize (which releases it) or keep calling the package (which holds it briefly).
    s = streambridge.Stream(non_blocking=True)
    ran = []

    def busy(i):
        total = sum(range(20000))  # holds the GIL for a while
        ran.append((i, total > 0))

    for i in range(50):
        s.launch_host_func(busy, i)
    errors = []

    def waiter():
        try:
            s.synchronize()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def poller():
        deadline = time.monotonic() + 10
        while not s.query() and time.monotonic() < deadline:
            pass

    threads = [threading.Thread(target=waiter) for _ in range(3)] + [threading.Thread(target=poller)]
    for t in threads:
        t.start()
    s.synchronize()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads), "a thread is stuck"
    assert errors == [] and [i for i, _ in ran] == list(range(50))


def test_bad_callbacks_are_refused_and_nothing_leaks():
    s = streambridge.Stream(non_blocking=True)
    with pytest.raises(TypeError, match="callable"):
        s.launch_host_func("not callable", None)

    class Arg:
        pass

    arg = Arg()
    ref = weakref.ref(arg)
    s.close()
    with pytest.raises(streambridge.ClosedError):
        s.launch_host_func(print, arg)
    del arg
    gc.collect()
    assert ref() is None, "a refused call holds nothing"


def test_enqueues_behind_a_waiting_callback_do_not_hold_the_gil_it_needs():
    # Behind a Python callback that waits for the GIL, a stream has room for 1,021 records of
    # an event with timing (bench/queue_depth.c, sim.TimedRecordsPerStream): the next one
    # waits for the callback, and would never return holding the GIL. The core releases the
    # GIL for enqueues while such a callback is waiting. In a child process, so that a hang
    # fails the test instead of stopping the suite. A long switch interval keeps the GIL with
    # the thread that makes the records unless they let it go, so that the test finds a core
    # that keeps it on a CPU too, where the software driver's records are slower.
    code = """
import sys
import streambridge
sys.setswitchinterval(1.0)
s, t = streambridge.Stream(non_blocking=True), streambridge.Stream(non_blocking=True)
e = streambridge.Event()
ran = []
s.launch_host_func(ran.append, "callback")
for _ in range(50000):
    s.record(e)
    t.wait_event(e)
    t.wait_stream(s)
s.synchronize()
t.synchronize()
print(ran)
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "['callback']", p.stdout + p.stderr


def test_enqueues_beside_a_callback_running_python_do_not_hold_the_gil_it_needs():
    # A callback that runs Python gives the GIL up at every switch interval and waits to take
    # it back: until it returns, a record that waited for room on its stream (an event with
    # timing: 1,021 at most behind the callback) while holding the GIL would never return.
    # (On an H200 this program hung 3 of 3 runs when a callback stopped counting once it
    # first took the GIL.) In a child process, so that a hang fails the test instead of
    # stopping the suite.
    code = """
import sys, time
import streambridge
sys.setswitchinterval(1e-5)
ran = []
def busy(i):
    t = time.perf_counter()
    while time.perf_counter() - t < 0.05:
        pass
    ran.append(i)
s, e = streambridge.Stream(non_blocking=True), streambridge.Event()
for i in range(20):
    s.launch_host_func(busy, i)
    for _ in range(5000):
        s.record(e)
        s.wait_event(e)
s.synchronize()
print(ran)
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == str(list(range(20))), p.stdout + p.stderr


def test_enqueues_behind_a_callback_that_collects_do_not_hold_up_its_collection():
    # A callback that collects (gc.collect) needs every thread stopped: with the GIL, the GIL;
    # without it, each thread detached from the interpreter (its stop-the-world). Behind it
    # the stream has room for 1,021 records of an event with timing (sim.TimedRecordsPerStream):
    # a record that then waited for room attached would never return, nor the callback. Each
    # record and wait is made in MAY_WAIT (holds.inc), counted as kept attached in its stripe
    # of the capture lock (op_lock_kept) until it asks whether a callback waits. In a child
    # process, so that a hang fails the test instead of stopping the suite.
    code = """
import gc, time
import streambridge
s, t = streambridge.Stream(non_blocking=True), streambridge.Stream(non_blocking=True)
e = streambridge.Event()
ran = []
for i in range(3):  # the records fill the stream while the callback sleeps, then it collects
    s.launch_host_func(lambda i: (time.sleep(0.2), gc.collect(), ran.append(i)), i)
    for _ in range(3000):
        s.record(e)
        t.wait_event(e)
s.synchronize()
t.synchronize()
print(ran)
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "[0, 1, 2]", p.stdout + p.stderr


# A child's setup: beside_a_compile(check) runs check() while another thread's compile
# (cuModuleLoadData) waits for a Python host callback, which waits for the GIL: on a GPU a
# create in the check then waits as long (half a second), unless the check lets the GIL go.
BESIDE_A_COMPILE = r"""
import threading, time
import streambridge as sb
slow = sb.Stream(non_blocking=True)
def beside_a_compile(check):
    started = threading.Event()
    slow.launch_host_func(lambda _: (started.set(), time.sleep(0.5)), None)
    slow.launch_host_func(lambda _: None, None)
    started.wait()
    compile = threading.Thread(target=lambda: sb.Module('extern "C" __global__ void k(long long x) {}'))
    compile.start()
    time.sleep(0.1)
    made = check()
    compile.join()
    slow.synchronize()
    return made
"""

FIRST_CHECKS_BESIDE_A_COMPILE = BESIDE_A_COMPILE + r"""
theirs_stream = sb.Stream(non_blocking=True)
theirs_event = sb.Event(disable_timing=True)  # the only event of its context: its check makes a sentinel
wrapped = beside_a_compile(lambda: sb.ExternalStream(theirs_stream.ptr))  # the first stream check: the layout learned
borrowed = beside_a_compile(lambda: sb.Event.from_handle(theirs_event.ptr))  # the first event check: learned, and a sentinel
borrowed.record(wrapped)
wrapped.synchronize()
print(borrowed.query(), wrapped.query())
"""


@pytest.mark.learned_layout
def test_the_first_checks_beside_a_compile_waiting_for_a_python_callback():
    # A handle check is made holding the GIL (without one, the core lock). The first stream
    # and event checks learn the driver's layout, making streams and events, and an event
    # alone in its context gets a sentinel made beside it: creates, which wait while another
    # thread's cuModuleLoadData waits for a host callback, which waits for the GIL. They are
    # made with the GIL let go (internal/cuda, aroundWait); held, the program hangs on a GPU
    # (the free-threaded chaos soak hung so on an H200, a wrap holding the core lock in the
    # sentinel's cuEventCreate). The software driver's compile waits for nothing: there the
    # program runs its checks as well. In a child process: the first checks are the process's,
    # and a hang fails the test instead of stopping the suite.
    p = subprocess.run([sys.executable, "-c", FIRST_CHECKS_BESIDE_A_COMPILE], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "True True", p.stdout + p.stderr


CLOSED_DURING_THE_FIRST_CHECK = BESIDE_A_COMPILE + r"""
s = sb.Stream(non_blocking=True)  # owned: its first Go call wraps it, the process's first stream check
def begin_while_another_thread_closes():
    closer = threading.Thread(target=lambda: (time.sleep(0.15), s.close()))  # while the check waits
    closer.start()
    try:
        s.begin_capture()  # the key made, the check's learning behind the compile, the GIL let go
        return "begun"
    except sb.ClosedError:
        return "closed"
    finally:
        closer.join()
outcome = beside_a_compile(begin_while_another_thread_closes)
try:
    s.query()
    print(outcome, "open")
except sb.ClosedError:
    print(outcome, "closed")
"""


def test_a_stream_closed_while_its_first_check_waits_is_not_used_after():
    # A stream's first call through Go (a capture's begin) makes its key, whose check may let
    # the GIL go (a layout learned behind a compile that waits for a Python callback: see the
    # test above); a close on another thread meanwhile must leave the destroy to that call,
    # which then asks the driver about the stream's capture. Held only from after the key,
    # the stream was destroyed first: the GIL chaos soak crashed in cuStreamGetCaptureInfo
    # (an H200, 1 run in 5 of a two-second seed). On the GPU, run alone, the close falls
    # inside the check's wait ("closed": 18 of 19 runs on an H200, with and without the GIL;
    # the wheel before the fix crashed in 2 of 6); where the compile ends before the callback
    # (ten at once on one machine), or on the software driver, whose compile waits for
    # nothing, the close may come after the begin ("begun"). In a child process: the check
    # is the process's first.
    p = subprocess.run([sys.executable, "-c", CLOSED_DURING_THE_FIRST_CHECK], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and p.stdout.split() in (["closed", "closed"], ["begun", "closed"]), p.stdout + p.stderr


EXIT_WITH_CALLBACKS_QUEUED = r"""
import time
import streambridge as sb
s = sb.Stream(non_blocking=True)
s.launch_host_func(lambda _: time.sleep(0.2), None)  # the rest queue behind it
seen = []
for i in range(20000):
    s.launch_host_func(seen.append, i)
print("queued", flush=True)
"""


def test_the_interpreter_exits_cleanly_with_host_callbacks_still_queued():
    # The driver's thread must not take the GIL of a finalizing interpreter (a thread that
    # does is terminated): the callbacks still queued at exit are dropped.
    p = subprocess.run([sys.executable, "-c", EXIT_WITH_CALLBACKS_QUEUED], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ))
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    assert p.stdout == "queued\n" and "Fatal" not in p.stderr


def test_a_callbacks_argument_is_released_where_cuda_may_be_called(released):
    """The driver's host-function thread may not call CUDA, and releasing an argument can (a
    torch tensor's deleter, a cuda.core Buffer's free): arguments are released on the
    interpreter's main thread, soon after their call ran."""
    s = streambridge.Stream(non_blocking=True)
    where = []

    class CallsCUDAWhenReleased:
        def __del__(self):
            try:  # the stream may or may not be done by then: what counts is that CUDA answers
                answer = type(s.query()).__name__
            except Exception as e:  # noqa: BLE001 - recorded for the assert below
                answer = repr(e)
            where.append((threading.current_thread() is threading.main_thread(), answer))

    arg = CallsCUDAWhenReleased()
    ref = weakref.ref(arg)
    s.launch_host_func(lambda a: None, arg)
    del arg
    s.synchronize()
    assert released(ref)
    assert where == [(True, "bool")]


EXIT_WITH_A_CALLBACK_RUNNING = r"""
import os, sys, threading, time
import streambridge
from streambridge import _core

s = streambridge.Stream(non_blocking=True)
running = threading.Event()
s.launch_host_func(lambda _: (running.set(), threading.Event().wait()), None)  # never returns
running.wait()
if sys.argv[1] == "fork":
    pid = os.fork()
    if pid == 0:  # the child: the parent's driver thread, in its callback, is not here
        t = time.monotonic()
        left = _core.core.at_exit()
        print(f"child: at_exit left {left} running, after {time.monotonic() - t:.3f} s", flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
t = time.monotonic()
left = _core.core.at_exit()
print(f"exit: at_exit left {left} running, after {time.monotonic() - t:.3f} s", flush=True)
"""


@pytest.mark.parametrize("how", ["exit", "fork"])
def test_exit_with_a_callback_that_never_returns(how):
    """At exit the interpreter waits for a Python host callback already running, up to 5 s
    by the clock, then leaves it to its thread and exits cleanly. A fork child has no such
    callback (the driver's threads are not copied): it waits for none."""
    p = subprocess.run([sys.executable, "-c", EXIT_WITH_A_CALLBACK_RUNNING, how], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ))
    print(p.stdout)  # the times, for the record (pytest -s)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    lines = [line.rsplit(",", 1)[0] for line in p.stdout.splitlines()]
    want = ["exit: at_exit left 1 running"]
    assert lines == (["child: at_exit left 0 running"] + want if how == "fork" else want)
