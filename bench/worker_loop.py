"""One worker thread's record+wait loop on streams and an event it made itself, as a user's
thread runs it, pinned to one CPU, for a sampling profiler that sees native frames
(docs/lifetimes.md, "Where 3.14t's extra time went": perf(1) on the GPU machine):

    python3 bench/worker_loop.py [N] [--cpu 2]
    perf record -F 4999 -o loop.data -- python3 bench/worker_loop.py 3000000
    perf report -i loop.data --no-children --sort dso,sym --stdio

Prints the pairs' mean, the Python version and whether the GIL is on. 20,000 pairs first,
unmeasured, so that the interpreter has specialized the loop.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import streambridge as sb
from streambridge import _core


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=3_000_000, help="the pairs measured")
    ap.add_argument("--cpu", type=int, default=2,
                    help="the CPU the process runs on (not the first: the machine's own work lands there)")
    args = ap.parse_args()
    os.sched_setaffinity(0, [args.cpu])  # before the worker starts: it inherits the mask

    def work() -> None:
        _core.core.enter_device(0)
        a, b = sb.Stream(non_blocking=True), sb.Stream(non_blocking=True)
        e = sb.Event(disable_timing=True)
        for _ in range(20_000):
            a.record(e)
            b.wait_event(e)
        start = time.perf_counter_ns()
        for _ in range(args.n):
            a.record(e)
            b.wait_event(e)
        ns = (time.perf_counter_ns() - start) / args.n
        gil = getattr(sys, "_is_gil_enabled", lambda: True)()
        print(f"{ns:.0f} ns a pair, CPython {sys.version.split()[0]}, GIL {'on' if gil else 'off'}")

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()


if __name__ == "__main__":
    main()
