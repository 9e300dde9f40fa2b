"""The chaos soak, Python's: eight threads make random calls, every public call of streams,
events, graphs, wrappers and (where the driver runs device code) kernels and modules, and
streambridge.jax's as XLA's handler makes them, on shared objects, with captures in every
mode begun on any thread, ended there or abandoned (one in five), joins through waits on
events recorded in captures, host callbacks that raise, query their stream or close it, the
frameworks' objects for a stream (to_torch, to_cupy, ...: where one is installed, on the
real driver), and a close and remake of some object in one call of ten. Any
error of streambridge's is accepted; the soak fails only on a crash (a destroyed handle
reaching either driver ends the process), a hang (a watchdog ends the process with every
thread's stack), or an error that is none of streambridge's. As streams/chaos_test.go does
for Go.

A command of its own, for the GPU machine or a free-threaded Python:
``python3 python/tests/test_chaos.py --soak SECONDS [SEED]``; STREAMBRIDGE_CHAOS_CALLS, a
regular expression, keeps the calls whose names it finds (all by default)."""

import faulthandler
import gc
import importlib.util
import os
import random
import re
import subprocess
import sys
import threading
import time

import streambridge as sb
from streambridge import _core, _xla

from test_go_function import Array, describe  # a Go function given a stream, and an array for it
from test_protocol import Protocol  # a __cuda_stream__ object

# What a call may raise: streambridge's errors, and the ValueError of a closed object.
TYPED = (sb.CUDAError, sb.ClosedError, sb.CallbackReentryError, sb.DeviceMismatchError, sb.ForkedProcessError)
MODES = ("global", "thread_local", "relaxed")


class World:
    """The objects the threads share: slots a close empties and a remake fills."""

    def __init__(self, rng):
        self.lock = threading.Lock()
        self.streams = [sb.Stream(non_blocking=True) for _ in range(4)]
        self.events = [self.new_event(i) for i in range(4)]
        self.graphs = [None, None]
        # JAX's stream: XLA hands the handler a stream that lives for the call (the handler
        # wraps it vouched for, where the layout cannot be learned): never closed here
        self.xla_stream = sb.Stream(non_blocking=True)
        self.rng = rng
        # a module and its kernel, where the driver runs device code (the software driver
        # and a machine without NVRTC do not: the kernel calls are left out there)
        try:
            self.modules = [self.module() for _ in range(2)]
        except (sb.NoDriverError, sb.CUDAError):
            self.modules = None
        # each framework's first conversion starts it (torch's lazy init): here, before any
        # capture, as a program starts its frameworks before it captures
        self.targets = [name for name, module in (("torch", "torch"), ("cupy", "cupy"), ("cuda_core", "cuda.core"),
                                                  ("numba", "numba.cuda")) if sb.driver() == "cuda" and _installed(module)]
        for name in self.targets:
            getattr(self.streams[0], "to_" + name)()

    @staticmethod
    def new_event(i):
        """Slot i's event: timed in even slots, interprocess in slot 3 (which IPC needs untimed)."""
        return sb.Event(disable_timing=i % 2 == 1, interprocess=i == 3)

    @staticmethod
    def module():
        m = sb.Module('extern "C" __global__ void k(long long x) {}')
        return m, m.get_kernel("k")

    def stream(self, rng):
        return self.streams[rng.randrange(len(self.streams))]

    def event(self, rng):
        return self.events[rng.randrange(len(self.events))]

    def keep(self, rng, g):
        i = rng.randrange(len(self.graphs))
        with self.lock:
            old, self.graphs[i] = self.graphs[i], g
        if old is not None:
            old.close()


def _installed(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # its parent package is missing
        return False


def _callback(rng, s):
    kind = rng.randrange(6)
    if kind == 0:
        def raises(_):
            raise ValueError("a callback of the chaos soak raises")
        return raises
    if kind == 1:
        return lambda _: s.query()  # CallbackReentryError, reported
    if kind == 2:
        return lambda _: s.close()  # taken; the destroy runs later
    return lambda _: None


def _calls(w):
    def begin(rng, mine):
        s = w.stream(rng)
        s.begin_capture(rng.choice(MODES))
        mine.append(s)

    def end(rng, mine):
        s = w.stream(rng)
        if mine and rng.randrange(4):
            s = mine.pop(rng.randrange(len(mine)))
            if rng.randrange(5) == 0:
                return  # abandoned: the stream's close ends it
        w.keep(rng, s.end_capture())

    def graph_launch(rng, mine):
        g = w.graphs[rng.randrange(len(w.graphs))]
        if g is not None:
            rng.choice((g.launch, g.upload))(w.stream(rng))

    def wrap(rng, mine):
        s = w.stream(rng)
        x = sb.ExternalStream(s.ptr)
        try:
            x.query()
            x.launch_host_func(lambda _: None, None)
        finally:
            x.close()

    def wrap_event(rng, mine):
        e = w.event(rng)
        x = sb.Event.from_handle(e.ptr)
        try:
            x.query()
            w.stream(rng).wait_event(x)
        finally:
            x.close()

    def remake_stream(rng, mine):
        i = rng.randrange(len(w.streams))
        with w.lock:
            old, w.streams[i] = w.streams[i], sb.Stream(non_blocking=bool(rng.randrange(2)))
        old.close()

    def remake_event(rng, mine):
        i = rng.randrange(len(w.events))
        with w.lock:
            old, w.events[i] = w.events[i], w.new_event(i)
        old.close()

    # streambridge.jax's calls as XLA's handler makes them (_xla.run: python/native/xla.inc
    # hands it JAX's stream), on the shared objects' tokens; one token per kind of callback,
    # as a compiled function holds its own (each placement keeps one for the process)
    callback_tokens = [_xla.callback_token(_callback(random.Random(k), w.streams[0]), None) for k in range(12)]

    def xla_run(rng, mine):
        op = rng.choice((_xla.RECORD, _xla.WAIT, _xla.CALLBACK))
        if op == _xla.CALLBACK:
            token = rng.choice(callback_tokens)
        elif op == _xla.WAIT and rng.randrange(2):
            token = _xla.token(w.stream(rng), "stream")
        else:
            token = _xla.token(w.event(rng), "event")
        _xla.run(op, token, w.xla_stream.ptr)

    def launch(rng, mine):
        _, k = w.modules[rng.randrange(len(w.modules))]
        k((1,), (1,), (7,), stream=w.stream(rng))

    def remake_module(rng, mine):
        if rng.randrange(10):
            return  # a compile takes milliseconds and synchronizes the context: one pick in ten
        i = rng.randrange(len(w.modules))
        made = w.module()
        with w.lock:
            old, w.modules[i] = w.modules[i], made
        old[0].close()

    def within(rng, mine):
        s = w.stream(rng)
        if rng.randrange(2):
            with s:
                sb.current_stream().query()
        else:
            s.use()
            sb.current_stream().query()

    def as_stream(rng, mine):
        version, handle = w.stream(rng).__cuda_stream__()
        s = sb.as_stream(Protocol(handle, version))  # a framework's object: wrapped, proven first
        try:
            s.query()
        finally:
            s.close()

    def convert(rng, mine):  # a framework's object for a stream, dropped at once: a close meanwhile waits for it
        if w.targets:
            getattr(w.stream(rng), "to_" + rng.choice(w.targets))()

    def ipc(rng, mine):
        opened = sb.Event.from_ipc_handle(0, w.event(rng).ipc_handle())  # the real driver refuses this process's
        try:
            w.stream(rng).wait_event(opened)
        finally:
            opened.close()

    def close_graph(rng, mine):
        g = w.graphs[rng.randrange(len(w.graphs))]
        if g is not None:
            g.close()

    calls = [
        ("query", lambda rng, mine: w.stream(rng).query()),
        ("synchronize", lambda rng, mine: w.stream(rng).synchronize()),
        ("record", lambda rng, mine: w.stream(rng).record(w.event(rng))),
        ("wait_event", lambda rng, mine: w.stream(rng).wait_event(w.event(rng))),
        ("wait_stream", lambda rng, mine: w.stream(rng).wait_stream(w.stream(rng))),
        ("launch_host_func", lambda rng, mine: (lambda s: s.launch_host_func(_callback(rng, s), None))(w.stream(rng))),
        ("is_capturing", lambda rng, mine: w.stream(rng).is_capturing()),
        ("a stream's questions to Go", lambda rng, mine: (lambda s: (s.priority, s.is_non_blocking, s.id))(w.stream(rng))),
        ("a Go function", lambda rng, mine: describe(w.stream(rng), Array())),
        ("record_event", lambda rng, mine: w.stream(rng).record_event().close()),
        ("Stream.wait", lambda rng, mine: w.stream(rng).wait(rng.choice((w.event, w.stream))(rng))),
        ("add_callback", lambda rng, mine: w.stream(rng).add_callback(lambda s, status, arg: None, None)),
        ("hand_over", lambda rng, mine: sb.hand_over(bytearray(8), w.stream(rng))),
        ("with and use()", within),
        ("as_stream", as_stream),
        ("conversions", convert),
        ("Event.query", lambda rng, mine: w.event(rng).query()),
        ("Event.record", lambda rng, mine: w.event(rng).record(w.stream(rng))),
        ("Event.wait", lambda rng, mine: w.event(rng).wait(w.stream(rng))),
        ("elapsed_time", lambda rng, mine: w.event(rng).elapsed_time(w.event(rng))),
        ("IPC", ipc),
        ("Event.synchronize", lambda rng, mine: w.event(rng).synchronize()),
        ("begin_capture", begin),
        ("end_capture", end),
        ("Graph.launch and Graph.upload", graph_launch),
        ("ExternalStream", wrap),
        ("Event.from_handle", wrap_event),
        ("streambridge.jax's calls", xla_run),
    ]
    closes = [("Stream.close", remake_stream), ("Event.close", remake_event), ("Graph.close", close_graph)]
    if w.modules is not None:
        calls.append(("Kernel launch", launch))
        closes.append(("Module.close", remake_module))
    only = re.compile(os.environ.get("STREAMBRIDGE_CHAOS_CALLS", ""))
    calls = [f for name, f in calls if only.search(name)]
    closes = [f for name, f in closes if only.search(name)]
    return calls, closes


def soak(seconds, seed, threads=8):
    """Runs the soak; returns the number of calls and of typed errors, whether kernels
    were launched (modules compiled, launched and closed) in it, and the frameworks converted to. A hang ends the
    process (status 1) with every thread's stack; an untyped error ends the soak with it;
    streams or events the core made and did not destroy once all is closed fail it."""
    streams_before, events_before = _core.live_streams(), _core.live_events()
    sys.unraisablehook = lambda unraisable: None  # the soak's callbacks raise by design: callback_errors() keeps them
    w = World(random.Random(seed))
    calls, closes = _calls(w)
    deadline = time.monotonic() + seconds
    made, refused, untyped = [0], [0], []
    count = threading.Lock()

    def work(n):
        rng, mine = random.Random(seed * 1000 + n), []
        while time.monotonic() < deadline and not untyped:
            call = rng.choice(closes) if closes and rng.randrange(10) == 0 else rng.choice(calls)
            try:
                call(rng, mine)
            except TYPED:
                with count:
                    refused[0] += 1
            except Exception as e:  # an error that is none of streambridge's
                untyped.append(e)
            with count:
                made[0] += 1

    workers = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=max(0.0, deadline - time.monotonic()) + 30)
        if t.is_alive():
            print(f"hang: a thread was still in a call 30 s after the deadline (seed {seed})", file=sys.stderr)
            # every thread's stack from faulthandler's own thread, which ends the process: a
            # dump from here stops the world first on a free-threaded CPython, and waits for
            # the hung thread too
            faulthandler.dump_traceback_later(0.01, exit=True)
            time.sleep(60)
            os._exit(3)
    if untyped:
        raise untyped[0]
    for s in [*w.streams, w.xla_stream]:
        try:
            s.end_capture().close()
        except TYPED:
            pass
        s.close()
    for e in w.events:
        e.close()
    for g in w.graphs:
        if g is not None:
            g.close()
    for m, _ in w.modules or ():
        m.close()
    sb.callback_errors()
    kernels, targets = w.modules is not None, w.targets
    w = None
    gc.collect()
    s = sb.Stream()
    s.close()  # a close outside a callback gives back what closes inside callbacks deferred
    left = (_core.live_streams() - streams_before, _core.live_events() - events_before)
    if left != (0, 0):
        alive = [f"{o!r} busy={o._busy} closing={o._closing} held by {sorted({type(r).__name__ for r in gc.get_referrers(o)})}"
                 for o in gc.get_objects() if isinstance(o, sb.Stream) and o._owned and (o._open or o._busy or o._closing)]
        raise AssertionError(f"left alive after the soak: {left[0]} streams, {left[1]} events the core made (seed {seed}); "
                             f"streams made here and not released: {alive}")
    return made[0], refused[0], kernels, targets


def test_chaos_soak_in_a_child_process():
    """The soak, in a child: a destroyed handle reaching the driver ends that process, and
    the test reports it rather than dying with it."""
    seed = int(os.environ.get("STREAMBRIDGE_CHAOS_SEED", str(int(time.time()))))
    seconds = os.environ.get("STREAMBRIDGE_CHAOS_SECONDS", "2")
    r = subprocess.run([sys.executable, __file__, "--soak", seconds, str(seed)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"seed {seed}: exit {r.returncode}\n{r.stdout}\n{r.stderr[-6000:]}"
    assert "chaos soak:" in r.stdout, r.stdout


if __name__ == "__main__":
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--soak":
        faulthandler.enable()  # a crash prints every thread's Python stack
        seed = int(sys.argv[3]) if len(sys.argv) == 4 else int(time.time())
        made, refused, kernels, targets = soak(float(sys.argv[2]), seed)
        print(f"chaos soak: {made} calls, {refused} refused with streambridge's errors, 8 threads, seed {seed}, "
              f"driver {sb.driver()}, kernels {'launched' if kernels else 'left out (no device code here)'}, "
              f"conversions to {', '.join(targets) or 'none (no framework here)'}")
    else:
        sys.exit("usage: test_chaos.py --soak SECONDS [SEED]")
