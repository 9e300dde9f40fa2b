"""A synchronize's latency: one spin kernel, launched by streambridge on a torch stream, then
waited for by torch's ``synchronize()`` or by streambridge's (``as_stream`` of that stream),
on the main thread and on another thread; the median microseconds from the launch's return
to the synchronize's return over 40 samples, for kernels of about 0, 1 and 5 ms on an H200
(the clock64 cycles are the GPU's). Streambridge's waits are queries under the capture lock,
never the driver's own wait (docs/lifetimes.md); torch's is the driver's.

    python3 bench/sync_latency.py
"""

from __future__ import annotations

import statistics
import threading
import time

import streambridge as sb
import torch

SPIN = r'''extern "C" __global__ void spin(long long n) { long long t0 = clock64(); while (clock64() - t0 < n) {} }'''
KERNELS = ((0, "empty"), (1_980_000, "~1 ms"), (9_900_000, "~5 ms"))


def main() -> None:
    ts = torch.cuda.Stream()
    ss = sb.as_stream(ts)
    spin = sb.Module(SPIN).get_kernel("spin")

    def median_us(cycles, sync, n=40):
        took = []
        for _ in range(n):
            spin(1, 1, (cycles,), stream=ss)
            t0 = time.perf_counter_ns()
            sync()
            took.append((time.perf_counter_ns() - t0) / 1e3)
        return statistics.median(took)

    def rows(where):
        for cycles, label in KERNELS:
            before = median_us(cycles, ts.synchronize)
            ours = median_us(cycles, ss.synchronize)
            theirs = min(before, median_us(cycles, ts.synchronize))  # torch's either side of ours: the better
            print(f"| {where} | {label} | {theirs:.1f} | {ours:.1f} | {ours / theirs:.3f} |", flush=True)

    print("| thread | kernel | torch us | streambridge us | streambridge / torch |")
    print("|---|---|---:|---:|---:|")
    rows("main")
    worker = threading.Thread(target=rows, args=("another",))
    worker.start()
    worker.join()


if __name__ == "__main__":
    main()
