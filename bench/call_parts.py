"""Where one thread's record+wait goes, call by call, beside C's pair in the same process: in
each round, C's pair (bench/inproc.c's throughput_ns, one C thread), then, on a Python thread
that makes its own streams and event, loops of two calls each: a record and a wait, two
records, two waits, two queries, two calls of a C method of ours that does nothing
(``__sizeof__``) and two of ``list.count`` on empty lists (the interpreter alone); and the
record and wait loop twice more: on streams of a subclass that answers the core's methods
with its base's descriptors, as every class did before each got its own (python/native/
objects.inc, "Subclasses": the interpreter's generic call at each), and on
bench/bare_ext.c's objects, given the same handles: an extension that makes the two driver
calls and nothing else, the ceiling of any Python extension's pair (built here with cc and
this Python's headers; where it cannot be, it is said why and left out), calling the
functions libcuda exports by those names, then the ones the package's core calls (the
driver's cuGetProcAddress's), then by name again with 1 and with 4 atomic adds before each
driver call and as many subtracts after (the core's read-modify-writes: 1 in the GIL build,
the capture lock's; 4 without the GIL, with the two holds and the kept-attached count).
Each loop's time a pair is divided by C's pair of its round; the medians over rounds are
printed. The process runs on one CPU (the first this process may use, or --cpu), C's
thread and Python's alike, so that both meet the same CPU (threads_bench.py's --pin, for one
thread).

    python3 bench/call_parts.py [--rounds 7] [--n 300000] [--cpu N]

Run it with each CPython at hand (a free-threaded build and the GIL build of the same source:
make gpu-build-ft GIL_TWIN=1) to see where one build's pair loses to the other's
(docs/lifetimes.md, "The rows with each thread's loop its own" and "The ceiling of any
extension")."""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import statistics
import sys
import threading
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_bench import inprocess_c  # noqa: E402 (the one build of bench/inproc.c)


def record_wait(a, b, e, l1, l2, o, n):
    for _ in range(n):
        a.record(e)
        b.wait_event(e)


def records(a, b, e, l1, l2, o, n):
    for _ in range(n):
        a.record(e)
        a.record(e)


def waits(a, b, e, l1, l2, o, n):
    for _ in range(n):
        b.wait_event(e)
        b.wait_event(e)


def queries(a, b, e, l1, l2, o, n):
    for _ in range(n):
        a.query()
        b.query()


def sizeofs(a, b, e, l1, l2, o, n):
    for _ in range(n):
        a.__sizeof__()
        b.__sizeof__()


def counts(a, b, e, l1, l2, o, n):
    for _ in range(n):
        l1.count(o)
        l2.count(o)


LOOPS = (record_wait, records, waits, queries, sizeofs, counts)
BARE = "bare record_wait"  # record_wait on bare_ext's objects
BARE_CORE = "bare, the core's entries"  # the same, through the core's function pointers
BARE_RMW = {1: "bare, 1 atomic a call", 4: "bare, 4 atomics a call"}  # bare_ext.atomics(k)
INHERITED = "record_wait, inherited"  # record_wait on streams of inheriting(sb.Stream)


def inheriting(cls):
    """A subclass of cls whose instances the core's methods reach through cls's descriptors."""
    sub = type("Inheriting" + cls.__name__, (cls,), {})
    for name, value in list(vars(sub).items()):
        if isinstance(value, types.MethodDescriptorType):
            delattr(sub, name)
    return sub


def bare_extension():
    """bench/bare_ext.c built for this Python and imported, or the reason it could not be."""
    import importlib.util
    import subprocess
    import sysconfig
    import tempfile

    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bare_ext.c")
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        return f"no Python.h in {include}"
    lib = os.path.join(tempfile.mkdtemp(), "bare_ext" + sysconfig.get_config_var("EXT_SUFFIX"))
    done = subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I" + include, src, "-o", lib],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return f"cc failed: {done.stderr.strip()[-300:]}"
    spec = importlib.util.spec_from_file_location("bare_ext", lib)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as e:  # no libcuda.so.1
        return str(e)
    return module


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=300000, help="pairs a loop")
    ap.add_argument("--cpu", type=int, help="the CPU to run on (else the first this process may use)")
    args = ap.parse_args()
    os.sched_setaffinity(0, [args.cpu if args.cpu is not None else min(os.sched_getaffinity(0))])

    import streambridge as sb
    from streambridge import _core

    bare = bare_extension()
    if isinstance(bare, str):
        print(f"call_parts: {BARE} not measured: {bare}")
    floor = inprocess_c()
    if floor is None:
        sys.exit("call_parts: bench/inproc.c could not be built here, and C's pair is the unit")
    _core.core.enter_device(0)  # device 0's primary context, current here: C's thread uses it
    ctx = ctypes.c_void_p()
    if ctypes.CDLL("libcuda.so.1").cuCtxGetCurrent(ctypes.byref(ctx)) != 0 or not ctx.value:
        sys.exit("call_parts: no current context for C's thread")

    def python_loops(out):
        _core.core.enter_device(0)
        objects = (sb.Stream(non_blocking=True), sb.Stream(non_blocking=True), sb.Event(disable_timing=True),
                   [], [], object())
        a, b, e = objects[:3]
        old = inheriting(sb.Stream)
        old_a, old_b = old(non_blocking=True), old(non_blocking=True)
        runs = [(loop.__name__, loop, objects, None) for loop in LOOPS]  # (column, loop, its objects, bare's setting)
        runs.append((INHERITED, record_wait, (old_a, old_b) + objects[2:], None))
        if not isinstance(bare, str):
            on = (bare.Stream(a.handle), bare.Stream(b.handle), bare.Event(e.handle)) + objects[3:]
            entries = [_core._native.pyshim_Entry(name) for name in ("cuEventRecord", "cuStreamWaitEvent")]
            runs += [(BARE, record_wait, on, None), (BARE_CORE, record_wait, on, lambda: bare.use(*entries))]
            runs += [(name, record_wait, on, lambda k=k: bare.atomics(k)) for k, name in BARE_RMW.items()]
        for name, loop, on, setting in runs:
            if setting is not None:
                setting()
            t = time.perf_counter_ns()
            loop(*on, args.n)
            out[name] = (time.perf_counter_ns() - t) / args.n
            if setting is not None:  # back to bare's defaults: the exported functions, no atomics
                bare.use()
                bare.atomics(0)
        for stream in (a, b, old_a, old_b):
            stream.synchronize()

    c_pairs, over = [], {name: [] for name in [loop.__name__ for loop in LOOPS] + [INHERITED]
                         + ([] if isinstance(bare, str) else [BARE, BARE_CORE, *BARE_RMW.values()])}
    gc.disable()  # no collection inside a loop
    for _ in range(args.rounds):
        c = floor.throughput_ns(ctx.value, 0, 1, args.n)
        out: dict[str, float] = {}
        worker = threading.Thread(target=python_loops, args=(out,))
        worker.start()
        worker.join()
        c_pairs.append(c)
        for name, ns in out.items():
            over[name].append(ns / c)
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"Python {sys.version.split()[0]}, GIL {'on' if gil else 'off'}: C's pair {statistics.median(c_pairs):.0f} ns "
          f"(median of {args.rounds} rounds); each loop's pair over C's pair of its round, medians:")
    print("| " + " | ".join(over) + " |")
    print("|" + "---:|" * len(over))
    print("| " + " | ".join(f"{statistics.median(v):.2f}" for v in over.values()) + " |")


if __name__ == "__main__":
    main()
