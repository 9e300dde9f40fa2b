"""Creates and closes streams and events from Python many times; prints process RSS and
the Go handle table's size as it goes, to show both stay flat. Then the same for a Go
function of one's own that returns only an error (examples/gokernels), whose result gopy
would leak without scripts/gopy-fixups.py.

    python3 bench/memory.py [--count 1000000]
"""

import argparse
import gc
import os
import sys
import time

import streambridge
from streambridge import _core


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class _Nothing:
    def close(self):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1_000_000)
    args = ap.parse_args()
    print(f"driver {streambridge.driver()}, {args.count} streams and {args.count} events, created and closed")
    step = max(args.count // 10, 1)
    keep = streambridge.Stream()

    def refused_go_call():  # gokernels.Saxpy returns only an error: here, that "x" is not an array
        try:
            streambridge.ext.gokernels.Saxpy(keep.ptr, 1.0, "x", "y")
        except RuntimeError:
            pass
        return _Nothing()

    for what, make in (("streams", lambda: streambridge.Stream(non_blocking=True)),
                       ("events", lambda: streambridge.Event(disable_timing=True)),
                       ("wrapped (borrowed) streams", lambda: streambridge.ExternalStream(keep.ptr)),
                       ("refused calls of an error-only Go function (gokernels.Saxpy)", refused_go_call)):
        base_live = _core.live_keys()
        start = time.perf_counter()
        samples = []
        for i in range(1, args.count + 1):
            make().close()
            if i % step == 0:
                gc.collect()
                samples.append((i, rss_mib(), _core.live_keys() - base_live))
        per = (time.perf_counter() - start) / args.count * 1e6
        print(f"\n{what}: {per:.2f} us per create+close")
        for i, rss, live in samples:
            print(f"  after {i:>8}: RSS {rss:7.1f} MiB, live handles {live}")
        growth = samples[-1][1] - samples[0][1]
        print(f"  RSS from first to last sample: {growth:+.1f} MiB; table back to {samples[-1][2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
