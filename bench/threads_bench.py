"""Record+wait from 1, 2, 4, 8 and 16 threads at once, each with two streams and an event of
its own: streambridge's Python threads beside as many C threads in this process, which make
the same calls on the driver API alone (bench/inproc.c's throughput_ns). Only streambridge is
imported, so it runs on every CPython streambridge is built for, the free-threaded one too,
where no peer framework is at hand (python_bench.py has the peers' thread rows, with the GIL).

    python3 bench/threads_bench.py [--n 200000] [--rounds 5] [--threads 1 2 4 8 16] [--pin [CPU ...]]
                                   [--call record-wait|wait-stream|query|launch]

Each row: the median over rounds of ns a pair over all threads (the Python threads' own
clocks, as python_bench.threads_ns reads them; C's from its barrier), the pairs a second that
makes, and Python's throughput over C's (the bar with the GIL off: 0.8 at every count). Rounds
take the two in turn. The first line says the Python and whether its GIL is on.

With --call wait-stream, each thread makes the same pair with one Python call, ``b.wait(a)``
(a's fence recorded on a, then waited for on b: torch's ``b.wait_stream(a)``), beside the
same C threads; the interpreter's part is one list.count a pair.

With --call launch, each thread launches an empty kernel (one thread, no parameters) on a
stream of its own: streambridge's Kernel call, compiled once (streambridge.Module), beside C
threads calling cuLaunchKernel on the same function (bench/inproc.c's launch_throughput_ns);
the interpreter's part is one list.count a launch.

With --call query, each thread queries a stream of its own, over and over: streambridge's
Stream.query (cuStreamQuery with the thread's capture mode relaxed around it, which costs
about 7% of a query), C's threads a bare cuStreamQuery (bench/floor.h's floor_work); the
interpreter's part is one list.count a call.

With --pin, each row's threads run on that many CPUs only, the first of those given (else of
those this process may use, in order), the Python threads and C's alike: the main thread's
CPU mask is set to them before it starts either, and threads inherit it (sched_setaffinity
of the calling thread, as Linux applies it). One thread then runs on one CPU for the row, C's
and Python's the same one, where the scheduler otherwise moves each where it likes, and the
two sides can land on CPUs that differ (a core's sibling busy, another NUMA node).

The last column is the interpreter's own part, measured the same way: the same loop with
``list.count`` on empty lists of each thread's own in place of record and wait (two method
calls of one argument on objects no other thread uses, which do no work): what the
interpreter spends on the loop and the calls, which no extension can take back.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import statistics
import sys
import sysconfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_bench import inprocess_c, threads_ns  # noqa: E402 (the one implementation of each)

COUNTS = (1, 2, 4, 8, 16)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200000, help="pairs a measurement, over all threads")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=list(COUNTS), help="the thread counts, a row each")
    ap.add_argument("--call", choices=("record-wait", "wait-stream", "query", "launch"), default="record-wait",
                    help="what each thread calls: a record and a wait (a pair), the pair as one call "
                    "(b.wait(a)), a query of its stream, or a launch of an empty kernel on it")
    ap.add_argument("--pin", type=int, nargs="*", metavar="CPU",
                    help="run each row's threads on as many CPUs, the first of these (none: of this process's)")
    args = ap.parse_args()
    rows = args.threads
    allowed = sorted(os.sched_getaffinity(0))
    cpus = (args.pin or allowed) if args.pin is not None else None
    if cpus is not None and max(rows) > len(cpus):
        sys.exit(f"threads_bench: --pin has {len(cpus)} CPUs for a row of {max(rows)} threads")

    import streambridge as sb
    from streambridge import _core

    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    built = " (free-threaded build)" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""
    print(f"Python {sys.version.split()[0]}{built}, GIL {'on' if gil else 'off'}, streambridge driver {sb.driver()}"
          + (f", each row on its first CPUs of {cpus}" if cpus is not None else ""))
    floor = inprocess_c()
    if floor is None:
        sys.exit("threads_bench: bench/inproc.c could not be built here, and C's rows are the point")
    _core.core.enter_device(0)  # device 0's primary context, current here: C's threads use it
    ctx = ctypes.c_void_p()
    cuda = ctypes.CDLL("libcuda.so.1")
    if cuda.cuCtxGetCurrent(ctypes.byref(ctx)) != 0 or not ctx.value:
        sys.exit("threads_bench: no current context for C's threads")

    def make():
        return sb.Stream(non_blocking=True), sb.Stream(non_blocking=True), sb.Event(disable_timing=True)

    # Each thread's whole share in one call (python_bench.threads_ns): k pairs (or calls)
    # in a loop of its own, as a user's thread runs them.
    def pair(a, b, e, k):
        for _ in range(k):
            a.record(e)
            b.wait_event(e)

    def lists():
        return [], [], object()

    def idle_pair(a, b, e, k):  # the interpreter's part of pair: the same calls, doing nothing
        for _ in range(k):
            a.count(e)
            b.count(e)

    def wait_stream(a, b, e, k):
        for _ in range(k):
            b.wait(a)

    def query(a, b, e, k):
        for _ in range(k):
            a.query()

    empty = sb.Module('extern "C" __global__ void empty() {}').get_kernel("empty") if args.call == "launch" else None

    def launch(a, b, e, k):
        for _ in range(k):
            empty(1, 1, (), stream=a)

    def idle_one(a, b, e, k):  # the interpreter's part of one call
        for _ in range(k):
            a.count(e)

    call, idle = {"record-wait": (pair, idle_pair), "wait-stream": (wait_stream, idle_one),
                  "query": (query, idle_one), "launch": (launch, idle_one)}[args.call]

    def c_threads(k):
        if args.call == "launch":
            return floor.launch_throughput_ns(ctx.value, empty._fn, k, args.n)
        return floor.throughput_ns(ctx.value, int(args.call == "query"), k, args.n)

    py = {k: [] for k in rows}
    c = {k: [] for k in rows}
    loop = {k: [] for k in rows}
    gc.disable()  # no collection (a stop of every thread, without the GIL) inside a measurement
    for _ in range(args.rounds):
        for k in rows:
            if cpus is not None:
                os.sched_setaffinity(0, cpus[:k])  # this thread's, which the row's threads inherit
            py[k].append(threads_ns(make, call, k, args.n, enter=lambda: _core.core.enter_device(0)))
            ns = c_threads(k)
            if ns < 0:
                sys.exit(f"threads_bench: C's threads failed at {k} threads")
            c[k].append(ns)
            loop[k].append(threads_ns(lists, idle, k, args.n))
            if cpus is not None:
                os.sched_setaffinity(0, allowed)
    unit = {"query": "query", "launch": "launch"}.get(args.call, "pair")
    print(f"| threads | streambridge ns/{unit} | {unit}s/s | C ns/{unit} | C {unit}s/s | streambridge / C "
          f"| the interpreter's part, ns/{unit} |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for k in rows:
        p, q, i = statistics.median(py[k]), statistics.median(c[k]), statistics.median(loop[k])
        print(f"| {k} | {p:.0f} | {1e9 / p / 1e6:.2f} M | {q:.0f} | {1e9 / q / 1e6:.2f} M | {q / p:.2f} | {i:.0f} |")


if __name__ == "__main__":
    main()
