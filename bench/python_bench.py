"""streambridge beside PyTorch, CuPy and cuda.core, in one process, on one device.

    python3 bench/python_bench.py [--rounds 7] [--n 20000]

Operations (each framework's own spelling):
  wrap                borrow an existing stream handle (streambridge validates it first)
  wrap event          borrow another library's CUevent (torch's); no peer can, so the peers'
                      rows are their stream wraps: the bar is a wrap of a stream
  record+wait         record an event on stream A, make stream B wait for it
  query               ask whether a stream's work has completed
  event record        record an event on a stream
  empty kernel launch launch a kernel with no arguments
  stream create+close make a non-blocking stream and destroy it (torch pools its streams: not a peer here)
  event create+close  make an event (timing off) and destroy it
  launch + synchronize
                      an empty kernel launched by streambridge on one stream, then that
                      stream's synchronize in each library's spelling (the same work for all:
                      what differs is the wait; streambridge's polls on the main thread, so
                      that Ctrl-C ends it)
  record+wait from N Python threads
                      1, 2, 4 and 8 threads at once, each with two streams and an event of
                      its own, ns a pair over all of them (what a data loader or a serving
                      process does; issue 29: keep the lead under threads)
And, outside the table, each library's synchronize after a 5 ms kernel (median of 40), and
the latency of a host callback into Python, streambridge's, CuPy's and a C host function's
(bench/inproc.c, in this process) taking turns sample by sample (median of 2000 each), each
sample launched on an idle stream (after a synchronize): colder than driver_bench.c's
HostFuncLatency loop, which launches again as soon as the last has run, so the ratio over C
in this process is the like-for-like one.
  hand_over per array argument
                      streambridge.hand_over of one array, over an empty launch (the reference
                      row): launch(..., hand_over=True) pays it per array argument
Every stream is non-blocking, as torch and cuda.core make theirs by default.
Rounds interleave the frameworks; each number is the median over rounds of the mean
ns per operation. Ratios are streambridge over the fastest peer, by medians, and in
brackets by each one's best round and by round: the median of each round's ratio, the two
timed a few milliseconds apart (both less exposed to a noisy machine). Where an operation
has a C floor, its loop runs inside this process too (bench/inproc.c, compiled here with
nvcc or cc), on the same streams and event, as a row of the operation measured right after
streambridge's in every round, where the driver is in the same state; it is no peer. A
profile of streambridge's layers (the C core, gopy's generated layer + cgo crossing + Go)
follows.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time


def per_op(fn, n):
    """ns an operation of fn(n), which does n of them; or what fn answers where it times
    itself (a number: ns an operation, its setup left out)."""
    gc.disable()
    try:
        t = time.perf_counter_ns()
        own = fn(n)
        return own if own is not None else (time.perf_counter_ns() - t) / n
    finally:
        gc.enable()


def by_round(ours, theirs):
    """The median over rounds of each round's ratio, ours over theirs: within a round the two
    are timed a few milliseconds apart, so a host that changes speed between rounds (bench/
    RESULTS.md: one H100 host ran at two speeds) moves both."""
    return statistics.median(a / b for a, b in zip(ours, theirs, strict=True))


def callback_sampler(launch, sync):
    """One sample of a host callback into Python, for callback_latency: ns from the launch
    on an idle stream to the callback's first line, then the stream's synchronize, so that
    the next sample starts on an idle stream with the driver's callback thread done (without
    it, a sample taken right after another library's also waited for the end of that one)."""
    import threading

    ran = threading.Event()
    got = []

    def cb(t0):
        got.append(time.perf_counter_ns() - t0)
        ran.set()

    def one():
        ran.clear()
        launch(cb, time.perf_counter_ns())
        ran.wait()
        sync()
        return got.pop()

    return one


def callback_latency(samplers, n=2000):
    """Median ns of n samples of each of samplers (a name: a function that takes one sample,
    callback_sampler's or C's). The samples take turns, one of each in every step, so that
    the host's drift lands on all of them alike (measured one after the other, streambridge's
    and CuPy's gave 0.92 and 1.08 of each other in two runs)."""
    stamps = {name: [] for name in samplers}
    for step in range(100 + n):  # the first 100: warm the driver's thread and the GIL hand-over
        for name, one in samplers.items():
            ns = one()
            if ns < 0:
                raise RuntimeError(f"{name}: the driver failed")
            if step >= 100:
                stamps[name].append(ns)
    return {name: statistics.median(kept) for name, kept in stamps.items()}


# A kernel that runs for ns nanoseconds of the GPU's global timer.
SPIN = r"""
extern "C" __global__ void spin(long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < (unsigned long long)ns);
}
"""


def long_waits(launch, syncs, n=40):
    """Median ns from launch() to the return of each of syncs (a name: a synchronize) after
    it, the libraries taking turns, one sample of each in every step (one after the other,
    the host's drift over a library's 40 landed on that one alone)."""
    stamps = {name: [] for name in syncs}
    for step in range(1 + n):  # the first: warm
        for name, sync in syncs.items():
            t = time.perf_counter_ns()
            launch()
            sync()
            if step:
                stamps[name].append(time.perf_counter_ns() - t)
    return {name: statistics.median(kept) for name, kept in stamps.items()}


def threads_ns(make, pairs, threads, n, enter=None):
    """ns a record+wait pair with ``threads`` Python threads at it at once, n pairs in all
    (wall time over all of them, their setup left out): each thread runs ``enter()`` first
    where given, makes its own objects (``make()``), and they start together; then each runs
    its share in one call, ``pairs(*objects, k)``: k pairs, each one record and one wait, in
    a loop of its own (the loop a user's thread runs: the C threads beside it loop in C; a
    Python call a pair from here, ``pair(*objects)``, added 40 to 50 ns a pair that no user
    loop pays, on an H200). The workers read the clock themselves, from the first one's
    start to the last one's end: a clock read by the main thread after the start waited for
    the GIL while workers whose calls keep it ran (streambridge's rows read 10 to 94 ns a
    pair that way, on an H200). Each makes its objects itself, as a worker makes its streams,
    and calls its own copy of ``pairs``: on a free-threaded CPython 3.13, threads calling one
    function object (through one closure cell) at once spent 2,032 ns a pair of two calls
    that do nothing at 16 threads, a copy each 20 ns (H200, threads_bench.py's last column;
    docs/lifetimes.md, "Record and wait take no shared lock")."""
    import threading
    import types

    start = threading.Barrier(threads)
    starts, ends = [], []

    def work(k):
        if enter is not None:
            enter()
        o = make()
        own = types.FunctionType(pairs.__code__, pairs.__globals__, pairs.__name__, pairs.__defaults__,
                                 pairs.__closure__)
        start.wait()
        starts.append(time.perf_counter_ns())
        own(*o, k)
        ends.append(time.perf_counter_ns())

    ts = [threading.Thread(target=work, args=(n // threads,)) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return (max(ends) - min(starts)) / (n // threads * threads)


# The C types of bench/inproc.c's definitions, as ctypes spells them.
C_TYPES = {"double": "c_double", "long": "c_long", "int": "c_int",
           "CUstream": "c_void_p", "CUevent": "c_void_p", "CUcontext": "c_void_p", "CUfunction": "c_void_p"}


def inproc_signatures(source: str) -> dict:
    """bench/inproc.c's functions, read from their definitions there (Go's inprocessC in
    streams/bench_test.go declares them too, and TestInprocessCSignatures holds it to them),
    as ctypes takes them: name: (restype, argtypes)."""
    import ctypes
    import re

    out = {}
    for m in re.finditer(r"(?m)^(\w+) (\w+)\(([^)]*)\) \{", source):
        args = [" ".join(arg.split()[:-1]) for arg in m[3].split(",")]
        out[m[2]] = (getattr(ctypes, C_TYPES[m[1]]), [getattr(ctypes, C_TYPES[t]) for t in args])
    return out


def inprocess_c():
    """bench/inproc.c compiled here and loaded (ctypes), or None, said why: the C floor's
    loops run inside this process, on its streams, in the driver state the others meet."""
    import ctypes
    import os
    import shutil
    import subprocess
    import tempfile

    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inproc.c")
    lib = os.path.join(tempfile.mkdtemp(), "inproc.so")
    if shutil.which("nvcc"):
        cmd = ["nvcc", "-O2", "-shared", "-Xcompiler", "-fPIC", src, "-lcuda", "-o", lib]
    else:
        cmd = ["cc", "-O2", "-shared", "-fPIC", "-I/usr/local/cuda/include", src,
               "-L/usr/local/cuda/lib64/stubs", "-lcuda", "-o", lib]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"C in this process: not measured ({' '.join(cmd[:1])} failed: {done.stderr.strip()[-300:]})")
        return None
    c = ctypes.CDLL(lib)
    with open(src) as f:
        for name, (restype, argtypes) in inproc_signatures(f.read()).items():
            fn = getattr(c, name)
            fn.restype, fn.argtypes = restype, argtypes
    return c


THREAD_COUNTS = (1, 2, 4, 8)
IN_C = "C in this process"  # the rows of bench/inproc.c's loops: the floor, not a peer
CALLBACK = "host callback into Python, enqueue to run (median of 2000, idle stream)"  # its section


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=20000)
    args = ap.parse_args()

    import warnings
    warnings.simplefilter("ignore", DeprecationWarning)
    import cupy
    import numpy
    import torch
    from cuda.core import Device, EventOptions, Stream

    import streambridge as sb
    from streambridge import _core

    dev = Device(0)
    dev.set_current()
    torch.cuda.init()
    # Streams of one kind for every library: non-blocking, as torch's pool and cuda.core make
    # them by default (a blocking stream also orders with the legacy default stream).
    ts_a, ts_b = torch.cuda.Stream(), torch.cuda.Stream()
    cs_a, cs_b = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    ks_a, ks_b = dev.create_stream(), dev.create_stream()
    ss_a, ss_b = sb.Stream(non_blocking=True), sb.Stream(non_blocking=True)
    te = torch.cuda.Event()
    ce = cupy.cuda.Event(disable_timing=True)
    ke = ks_a.record(options=EventOptions(timing_enabled=False))
    se = sb.Event(disable_timing=True)
    te = torch.cuda.Event(enable_timing=False)
    handle = ts_a.cuda_stream  # the same foreign handle for every wrapper
    foreign = torch.cuda.Event(enable_timing=False)
    foreign.record(ts_a)  # torch makes its CUevent at the first record
    event_handle = foreign.cuda_event
    sb_foreign = sb.as_event(foreign)

    def loop(body):
        def run(n):
            for _ in range(n):
                body()
        return run

    def sb_wrap():  # made and dropped, as the peers' wrappers are
        sb.ExternalStream(handle)

    def sb_wrap_close():
        sb.ExternalStream(handle).close()

    def sb_rw():
        ss_a.record(se)
        ss_b.wait_event(se)

    sb_borrowed, sb_borrowed_b = sb.ExternalStream(ts_a.cuda_stream), sb.ExternalStream(ts_b.cuda_stream)
    # A stream another thread made (CuPy's, made there: torch's come from a pool the first
    # thread made): the driver's object lies in that thread's malloc arena, outside the brk
    # heap, which the C core's loads reach through the arena's first heap (proof.inc, "Other
    # threads' heaps"; the proof counts printed after the profile say which check ran).
    import threading
    made = []
    maker = threading.Thread(target=lambda: made.append(cupy.cuda.Stream(non_blocking=True)))
    maker.start()
    maker.join()
    cs_other = made[0]
    sb_other = sb.ExternalStream(cs_other.ptr)

    def sb_borrowed_rw():  # torch's two streams, borrowed: each use checks the identity first
        sb_borrowed.record(se)
        sb_borrowed_b.wait_event(se)

    def sb_foreign_rw():  # torch's event, borrowed: each use checks its identity first
        ss_a.record(sb_foreign)
        ss_b.wait_event(sb_foreign)

    def t_rw():
        te.record(ts_a)
        ts_b.wait_event(te)

    def c_rw():
        ce.record(cs_a)
        cs_b.wait_event(ce)

    def k_rw():
        ks_a.record(ke)
        ks_b.wait(ke)

    ops = {
        "wrap": {
            "streambridge": loop(sb_wrap),
            "streambridge, closed explicitly": loop(sb_wrap_close),
            "streambridge.from_external": loop(lambda: sb.Stream.from_external(ks_a)),
            "torch": loop(lambda: torch.cuda.ExternalStream(handle)),
            "cupy": loop(lambda: cupy.cuda.ExternalStream(handle)),
            "cupy.from_external": loop(lambda: cupy.cuda.Stream.from_external(ks_a)),
            "cuda.core": loop(lambda: type(ks_a).from_handle(handle)),
        },
        "wrap event": {
            "streambridge Event.from_handle": loop(lambda: sb.Event.from_handle(event_handle)),
            "streambridge as_event(torch event)": loop(lambda: sb.as_event(foreign)),
            "streambridge ExternalStream (our stream wrap)": loop(sb_wrap),
            "torch ExternalStream (no peer wraps an event)": loop(lambda: torch.cuda.ExternalStream(handle)),
            "cupy ExternalStream (no peer wraps an event)": loop(lambda: cupy.cuda.ExternalStream(handle)),
            "cuda.core Stream.from_handle (no peer wraps an event)": loop(lambda: type(ks_a).from_handle(handle)),
        },
        "record+wait": {
            "streambridge": loop(sb_rw),
            "streambridge, a borrowed torch event (identity checked)": loop(sb_foreign_rw),
            "streambridge.wait_stream": loop(lambda: ss_b.wait_stream(ss_a)),
            "streambridge b.wait(a) (cuda.core's one-call spelling)": loop(lambda: ss_b.wait(ss_a)),
            "streambridge, borrowed streams (identity checked)": loop(sb_borrowed_rw),
            "torch": loop(t_rw),
            "cupy": loop(c_rw),
            "cuda.core": loop(k_rw),
        },
        "query": {
            "streambridge": loop(ss_a.query),
            "streambridge event query": loop(se.query),
            "streambridge, a borrowed stream (identity checked)": loop(sb_borrowed.query),
            "streambridge, a borrowed stream another thread made (identity checked)": loop(sb_other.query),
            "torch": loop(ts_a.query),
            "cupy": loop(lambda: cs_a.done),
            "cuda.core Event.is_done (it has no stream query)": loop(lambda: ke.is_done),
        },
        "event record": {
            "streambridge": loop(lambda: se.record(ss_a)),
            "torch": loop(lambda: te.record(ts_a)),
            "cupy": loop(lambda: ce.record(cs_a)),
            "cuda.core": loop(lambda: ks_a.record(ke)),
        },
    }
    empty_src = 'extern "C" __global__ void empty() {}'
    sb_empty = sb.Module(empty_src).get_kernel("empty")
    cp_empty = cupy.RawKernel(empty_src, "empty")
    launches = {
        "streambridge": loop(lambda: sb_empty(1, 1, (), stream=ss_a)),
        "cupy.RawKernel": loop(lambda: cp_empty((1,), (1,), (), stream=cs_a)),
    }
    try:
        from cuda.core import LaunchConfig, Program, launch as core_launch

        core_empty = Program(empty_src, code_type="c++").compile("cubin").get_kernel("empty")
        cfg = LaunchConfig(grid=1, block=1)
        launches["cuda.core.launch"] = loop(lambda: core_launch(ks_a, cfg, core_empty))
    except Exception as e:  # noqa: BLE001 - reported, the rest still runs
        print(f"cuda.core launch not measured: {e}")
    with cs_a:
        cp_empty((1,), (1,), ())
    ops["empty kernel launch"] = launches
    # hand_over's cost per array argument, against the launch it would follow: launch and Go
    # functions do it only with hand_over=True, for it costs more than a small fraction of one.
    ss_h = sb.Stream(non_blocking=True)
    t_arg, c_arg = torch.zeros(4, device="cuda"), cupy.zeros(4, dtype=cupy.float32)
    ops["hand_over per array argument"] = {
        "streambridge hand_over(torch tensor)": loop(lambda: sb.hand_over(t_arg, ss_h)),
        "streambridge hand_over(CuPy array)": loop(lambda: sb.hand_over(c_arg, ss_h)),
        "reference: an empty launch (streambridge)": loop(lambda: sb_empty(1, 1, (), stream=ss_a)),
    }
    ops["stream create+close"] = {
        "streambridge": loop(lambda: sb.Stream(non_blocking=True).close()),
        "cupy": loop(lambda: cupy.cuda.Stream(non_blocking=True)),  # destroyed when dropped
        "cuda.core": loop(lambda: dev.create_stream().close()),
    }
    no_timing = EventOptions(timing_enabled=False)
    ops["event create+close"] = {
        "streambridge": loop(lambda: sb.Event(disable_timing=True).close()),
        "cupy": loop(lambda: cupy.cuda.Event(disable_timing=True)),  # destroyed when dropped
        "cuda.core": loop(lambda: dev.create_event(no_timing).close()),
    }
    # The same work for every library, then each one's synchronize of that stream.
    cp_sync, t_sync = cupy.cuda.ExternalStream(ss_a.ptr), torch.cuda.ExternalStream(ss_a.ptr)
    k_sync = Stream.from_handle(ss_a.ptr)

    def after_launch(sync):
        def body():
            sb_empty(1, 1, (), stream=ss_a)
            sync()
        return loop(body)

    ops["launch + synchronize"] = {
        "streambridge": after_launch(ss_a.synchronize),
        "cupy": after_launch(cp_sync.synchronize),
        "torch": after_launch(t_sync.synchronize),
        "cuda.core": after_launch(k_sync.sync),
    }
    # Record+wait from several Python threads at once, each on streams and an event of its
    # own: what a data loader or a serving process does. The GIL is shared; the driver's own
    # lock too.
    def rw_pair(record, wait):  # threads_ns's pairs: k of them, each framework's spelling
        def pairs(a, b, e, k):
            for _ in range(k):
                record(a, e)
                wait(b, e)
        return pairs

    per_thread = {
        "streambridge": (lambda: (sb.Stream(non_blocking=True), sb.Stream(non_blocking=True),
                                  sb.Event(disable_timing=True)),
                         rw_pair(lambda a, e: a.record(e), lambda b, e: b.wait_event(e))),
        "torch": (lambda: (torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Event()),
                  rw_pair(lambda a, e: e.record(a), lambda b, e: b.wait_event(e))),
        "cupy": (lambda: (cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True),
                          cupy.cuda.Event(disable_timing=True)),
                 rw_pair(lambda a, e: e.record(a), lambda b, e: b.wait_event(e))),
        "cuda.core": (lambda: (lambda a: (a, dev.create_stream(), a.record(options=EventOptions(timing_enabled=False))))(
                          dev.create_stream()),
                      rw_pair(lambda a, e: a.record(e), lambda b, e: b.wait(e))),
    }

    def in_threads(threads, make, pairs):
        def run(n):  # each thread makes device 0 current first, as cuda.core asks of a thread
            return threads_ns(make, pairs, threads, max(n, threads), enter=dev.set_current)
        return run

    for threads in THREAD_COUNTS:
        ops[f"record+wait from {threads} Python threads, each with its own streams (ns a pair, all together)"] = {
            name: in_threads(threads, make, pairs) for name, (make, pairs) in per_thread.items()}

    bars = {"stream create+close": 1.0, "event create+close": 1.0,
            "hand_over per array argument": "0.25 to be on by default"}

    # Where streambridge's time goes: a query and a wrap, layer by layer.

    own_borrowed, own_borrowed_b = sb.ExternalStream(ss_a.ptr), sb.ExternalStream(ss_b.ptr)

    def own_borrowed_rw():  # our own two streams, borrowed: the checks without torch's streams
        own_borrowed.record(se)
        own_borrowed_b.wait_event(se)

    class Bare(sb._stream._BaseStream):
        """ExternalStream's shape (a Python subclass of the C core), made by the core's own
        constructor with no check: what a wrap costs beside the check."""

    profile = {
        "s.query() (the C core: gate, open check, driver)": loop(ss_a.query),
        "_native.core.gate() (the gate alone, a C call)": loop(_core.gate),
        "_sbnative.pyshim_LiveStreams() (generated C + cgo + a Go read lock)": loop(_core.live_keys),
        "empty Python lambda (the loop itself)": loop(lambda: None),
        "wrap: pyshim_ValidationReads (a crossing and the rt_sigaction, no reads)": loop(_core.validation_reads),
        "wrap: a bare instance shaped as ExternalStream + teardown (no check)": loop(Bare),
        "wrap event: core.wrap_event alone (the C check and instance, no Python)": loop(
            lambda: _core.core.wrap_event(sb.Event, event_handle, None, None, False)),
        "create: Event.__new__ alone (the Python instance, no driver)": loop(lambda: sb.Event.__new__(sb.Event)),
        "create: Stream.__new__ alone (the Python instance, no driver)": loop(lambda: sb.Stream.__new__(sb.Stream)),
        "record+wait: a.record(e) alone (one call, the driver's record)": loop(lambda: ss_a.record(se)),
        "record+wait: b.wait_event(e) alone (one call, the driver's wait)": loop(lambda: ss_b.wait_event(se)),
        "record+wait: a bound method call that does nothing (ss_a.__sizeof__)": loop(ss_a.__sizeof__),
        "borrowed: the two identity checks of a record+wait alone (_verify() of each torch stream)": loop(
            lambda: (sb_borrowed._verify(), sb_borrowed_b._verify())),
        "borrowed: record+wait on our own two streams, borrowed (the checks without torch's streams)": loop(
            own_borrowed_rw),
    }
    # The same calls from C, in this process, on the same objects (bench/inproc.c): each one
    # a row of its operation, measured in every round right after the streambridge spelling
    # it is the floor of, for what a call costs the driver drifts with what the process ran
    # before, within a round too. (operation, streambridge's spelling, C's row, its loop.)
    floor = inprocess_c()
    floors = [] if floor is None else [
        ("record+wait", "streambridge", f"{IN_C}: record+wait on the same streams and event",
         lambda n: floor.record_wait_ns(ss_a.ptr, ss_b.ptr, se.ptr, n)),
        ("record+wait", "streambridge, borrowed streams (identity checked)",
         f"{IN_C}: record+wait on torch's two streams, as the borrowed spelling",
         lambda n: floor.record_wait_ns(ts_a.cuda_stream, ts_b.cuda_stream, se.ptr, n)),
        ("query", "streambridge", f"{IN_C}: query of the same stream", lambda n: floor.query_ns(ss_a.ptr, n)),
        ("query", "streambridge event query", f"{IN_C}: event query of the same event",
         lambda n: floor.event_query_ns(se.ptr, n)),
        ("event create+close", "streambridge", f"{IN_C}: event create+destroy (timing off)",
         floor.event_create_destroy_ns)]
    for op, after, row, run in floors:
        def timed(n, run=run, row=row):
            ns = run(n)
            if ns < 0:
                raise RuntimeError(f"{row}: the driver failed")
            return ns
        items = list(ops[op].items())
        at = [name for name, _ in items].index(after) + 1
        ops[op] = dict(items[:at] + [(row, timed)] + items[at:])

    results = {}
    for _ in range(args.rounds):
        for op, impls in list(ops.items()) + [("profile", profile)]:
            for name, fn in impls.items():
                fn(args.n // 10)  # warm
                torch.cuda.synchronize()
                results.setdefault((op, name), []).append(per_op(fn, args.n))
                torch.cuda.synchronize()  # the next measurement starts with idle streams
    torch.cuda.synchronize()

    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, cupy {cupy.__version__}, "
          f"streambridge driver {sb.driver()}, {args.rounds} rounds x {args.n}")
    for op, impls in ops.items():
        med = {name: statistics.median(results[(op, name)]) for name in impls}
        peers = {k: v for k, v in med.items() if not k.startswith(("streambridge", IN_C))}
        best_name = min(peers, key=peers.get)
        print(f"\n{op}:")
        for name, ns in sorted(med.items(), key=lambda kv: kv[1]):
            print(f"  {name:48s} {ns:8.0f} ns")
        low = {name: min(results[(op, name)]) for name in impls}  # each one's best round, against noise
        low_peer = min((k for k in low if not k.startswith(("streambridge", IN_C))), key=low.get)
        for name in (k for k in impls if k.startswith("streambridge")):
            print(f"  ratio {name} / fastest peer ({best_name}): {med[name] / peers[best_name]:.2f} "
                  f"(best rounds: {low[name] / low[low_peer]:.2f}; "
                  f"by round: {by_round(results[(op, name)], results[(op, best_name)]):.2f})  [bar {bars.get(op, 1.2)}]")
    print(f"\n{CALLBACK}:")
    samplers = {"streambridge launch_host_func": callback_sampler(ss_a.launch_host_func, ss_a.synchronize),
                "cupy launch_host_func": callback_sampler(cs_a.launch_host_func, cs_a.synchronize)}
    c_callback = f"{IN_C}: a C host function on the same stream"
    if floor is not None:
        samplers[c_callback] = lambda: floor.host_func_latency_once_ns(ss_a.ptr)
    lat = callback_latency(samplers)
    for name, ns in sorted(lat.items(), key=lambda kv: kv[1]):
        print(f"  {name:48s} {ns:8.0f} ns")
    print(f"  ratio streambridge / cupy: {lat['streambridge launch_host_func'] / lat['cupy launch_host_func']:.2f}  [bar 1.2]")
    spin = sb.Module(SPIN).get_kernel("spin")
    print("\nlaunch of a 5 ms kernel to the return of synchronize (median of 40; the same kernel and stream):")
    waits = long_waits(lambda: spin(1, 1, (numpy.int64(5_000_000),), stream=ss_a),
                       {"streambridge": ss_a.synchronize, "cupy": cp_sync.synchronize,
                        "torch": t_sync.synchronize, "cuda.core": k_sync.sync})
    for name, ns in sorted(waits.items(), key=lambda kv: kv[1]):
        print(f"  {name:48s} {ns:8.0f} ns")
    fastest = min((k for k in waits if k != "streambridge"), key=waits.get)
    print(f"  ratio streambridge / fastest peer ({fastest}): {waits['streambridge'] / waits[fastest]:.3f}  [bar 1.01]")
    print("\nprofile (streambridge query and wrap, layer by layer):")
    for name in profile:
        print(f"  {name:70s} {statistics.median(results[('profile', name)]):8.0f} ns")
    print(f"  (handle checks read memory by {_core.validation_reads()})")
    print(f"  (stream and event proofs so far, by loads here and by the Go check: {_core.core.proofs()})")
    if floors:
        print("\nstreambridge over C in this process (the same objects, the same driver state, the same rounds):")
        for op, name, row, _ in floors:
            ours, c = statistics.median(results[(op, name)]), statistics.median(results[(op, row)])
            best = min(results[(op, name)]) / min(results[(op, row)])
            print(f"  {op} ({name}): {ours:.0f} ns against C's {c:.0f} ns: {ours / c:.2f} "
                  f"(best rounds: {best:.2f}; by round: {by_round(results[(op, name)], results[(op, row)]):.2f})"
                  f"  [bar 1.5]")
        ours, c = lat["streambridge launch_host_func"], lat[c_callback]  # medians of samples taking turns
        print(f"  {CALLBACK} (streambridge): {ours:.0f} ns against C's {c:.0f} ns: {ours / c:.2f}  [bar 1.5]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
