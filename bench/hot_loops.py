"""One of the Python benchmark's hot operations in a loop, alone in its process, for a
sampling profiler (bench/profile.sh runs it under py-spy):

    python3 bench/hot_loops.py record-wait|wait-stream|query|query-borrowed|event-create N
"""

from __future__ import annotations

import sys

import streambridge as sb


def main() -> int:
    what, n = sys.argv[1], int(sys.argv[2])
    a, b = sb.Stream(non_blocking=True), sb.Stream(non_blocking=True)
    e = sb.Event(disable_timing=True)
    if what == "record-wait":
        record, wait = a.record, b.wait_event
        for _ in range(n):
            record(e)
            wait(e)
    elif what == "wait-stream":  # b.wait(a): the same two driver calls from one Python call
        wait = b.wait
        for _ in range(n):
            wait(a)
    elif what == "query":
        query = a.query
        for _ in range(n):
            query()
    elif what == "query-borrowed":  # a's handle borrowed: the identity check and the capture status first
        query = sb.ExternalStream(a.ptr).query
        for _ in range(n):
            query()
    elif what == "event-create":
        event = sb.Event
        for _ in range(n):
            event(disable_timing=True).close()
    else:
        print(f"no loop {what!r}: record-wait, wait-stream, query, query-borrowed or event-create", file=sys.stderr)
        return 2
    a.synchronize()
    b.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
