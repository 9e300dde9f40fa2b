"""One of the Python benchmark's hot operations in a loop, alone in its process, for a
sampling profiler (bench/profile.sh runs each of them under py-spy; perf(1) on the GPU
machine, docs/lifetimes.md, "Where 3.14t's extra time went"):

    python3 bench/hot_loops.py LOOP N [--worker] [--cpu CPU]
    python3 bench/hot_loops.py --list

--worker runs the loop on a worker thread that makes its own objects, as a user's thread
does, after 20,000 rounds unmeasured (the interpreter has specialized it then), and prints
its mean; --cpu pins the process to one CPU first (the worker inherits the mask).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import Callable

import streambridge as sb
from streambridge import _core


def record_wait(a: sb.Stream, b: sb.Stream, e: sb.Event, n: int) -> None:
    record, wait = a.record, b.wait_event
    for _ in range(n):
        record(e)
        wait(e)


def wait_stream(a: sb.Stream, b: sb.Stream, e: sb.Event, n: int) -> None:
    """b.wait(a): the same two driver calls as record_wait's, from one Python call."""
    wait = b.wait
    for _ in range(n):
        wait(a)


def query(a: sb.Stream, b: sb.Stream, e: sb.Event, n: int) -> None:
    q = a.query
    for _ in range(n):
        q()


def query_borrowed(a: sb.Stream, b: sb.Stream, e: sb.Event, n: int) -> None:
    """a's handle borrowed: each query proves its identity and asks its capture status first."""
    q = sb.ExternalStream(a.ptr).query
    for _ in range(n):
        q()


def event_create(a: sb.Stream, b: sb.Stream, e: sb.Event, n: int) -> None:
    event = sb.Event
    for _ in range(n):
        event(disable_timing=True).close()


LOOPS: dict[str, Callable[[sb.Stream, sb.Stream, sb.Event, int], None]] = {
    "record-wait": record_wait,
    "wait-stream": wait_stream,
    "query": query,
    "query-borrowed": query_borrowed,
    "event-create": event_create,
}


def main() -> int:
    if sys.argv[1:] == ["--list"]:
        print(" ".join(LOOPS))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("loop")
    ap.add_argument("n", type=int)
    ap.add_argument("--worker", action="store_true", help="on a worker thread, warmed up first, its mean printed")
    ap.add_argument("--cpu", type=int, help="the one CPU the process runs on")
    args = ap.parse_args()
    if args.loop not in LOOPS:
        print(f"no loop {args.loop!r}: {', '.join(LOOPS)}", file=sys.stderr)
        return 2
    if args.cpu is not None:
        os.sched_setaffinity(0, [args.cpu])
    loop = LOOPS[args.loop]

    def run() -> None:
        a, b = sb.Stream(non_blocking=True), sb.Stream(non_blocking=True)
        e = sb.Event(disable_timing=True)
        if args.worker:
            loop(a, b, e, 20_000)
        start = time.perf_counter_ns()
        loop(a, b, e, args.n)
        ns = (time.perf_counter_ns() - start) / args.n
        a.synchronize()
        b.synchronize()
        if args.worker:
            gil = getattr(sys, "_is_gil_enabled", lambda: True)()
            print(f"{args.loop}: {ns:.0f} ns a round, CPython {sys.version.split()[0]}, GIL {'on' if gil else 'off'}")

    if not args.worker:
        run()
        return 0
    failed: list[BaseException] = []

    def work() -> None:
        try:
            _core.core.enter_device(0)  # device 0's context current, as a worker's streams are made there
            run()
        except BaseException as err:  # the worker's error is the process's exit status
            failed.append(err)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    if failed:
        raise failed[0]
    return 0


if __name__ == "__main__":
    sys.exit(main())
