"""One of the Python benchmark's hot operations in a loop, alone in its process, for a
sampling profiler (bench/profile.sh runs each of them under py-spy):

    python3 bench/hot_loops.py LOOP N
    python3 bench/hot_loops.py --list
"""

from __future__ import annotations

import sys
from typing import Callable

import streambridge as sb


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
    what, n = sys.argv[1], int(sys.argv[2])
    if what not in LOOPS:
        print(f"no loop {what!r}: {', '.join(LOOPS)}", file=sys.stderr)
        return 2
    a, b = sb.Stream(non_blocking=True), sb.Stream(non_blocking=True)
    e = sb.Event(disable_timing=True)
    LOOPS[what](a, b, e, n)
    a.synchronize()
    b.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
