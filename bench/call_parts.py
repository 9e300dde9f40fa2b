"""Where one thread's record+wait goes, call by call, beside C's pair in the same process: in
each round, C's pair (bench/inproc.c's throughput_ns, one C thread), then, on a Python thread
that makes its own streams and event, loops of two calls each: a record and a wait, two
records, two waits, two queries, two calls of a C method of ours that does nothing
(``__sizeof__``) and two of ``list.count`` on empty lists (the interpreter alone). Each loop's
time a pair is divided by C's pair of its round; the medians over rounds are printed. The
process runs on one CPU (the first this process may use, or --cpu), C's thread and Python's
alike, so that both meet the same CPU (threads_bench.py's --pin, for one thread).

    python3 bench/call_parts.py [--rounds 7] [--n 300000] [--cpu N]

Run it with each CPython at hand (a free-threaded build and the GIL build of the same source:
make gpu-build-ft GIL_TWIN=1) to see where one build's pair loses to the other's
(docs/lifetimes.md, "The rows with each thread's loop its own")."""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import statistics
import sys
import threading
import time

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=300000, help="pairs a loop")
    ap.add_argument("--cpu", type=int, help="the CPU to run on (else the first this process may use)")
    args = ap.parse_args()
    os.sched_setaffinity(0, [args.cpu if args.cpu is not None else min(os.sched_getaffinity(0))])

    import streambridge as sb
    from streambridge import _core

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
        for loop in LOOPS:
            t = time.perf_counter_ns()
            loop(*objects, args.n)
            out[loop.__name__] = (time.perf_counter_ns() - t) / args.n
        objects[0].synchronize()
        objects[1].synchronize()

    c_pairs, over = [], {loop.__name__: [] for loop in LOOPS}
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
