"""The end-to-end pipeline: PyTorch produces, a kernel the Go core compiled with NVRTC
transforms, CuPy consumes, each on its own stream, ordered only by streambridge.

    python3 examples/pipeline.py        # with the streambridge wheel installed

On a GPU machine with torch and CuPy: torch fills x on stream 1 (behind a deliberately
slow kernel, so a missing wait would show); stream 2 waits for stream 1 and runs
y = a*x + b, compiled from CUDA C++ by NVRTC through the Go core; CuPy's stream 3 waits for
stream 2 and computes z = sqrt(y); host callbacks on each stream record the order they ran
in. The result is checked against NumPy on the CPU, and each stage's GPU time is printed.

Without a GPU (or without torch and CuPy) it says so and runs what the software driver can:
the same three streams, ordered the same way, with host callbacks standing in for the
kernels. No kernel runs there, and it does not pretend one did.
"""

from __future__ import annotations

import os
import sys
import threading
import time

N = 1 << 22
A, B = 3.0, 1.0
SLOW_NS = 50_000_000  # the producer's head start: 50 ms

TRANSFORM = r"""
extern "C" __global__ void axpb(float *y, const float *x, float a, float b, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""


def gpu_available() -> str:
    """Empty if the GPU pipeline can run, else why not."""
    import importlib.util

    missing = [name for name, module in (("torch", "torch"), ("CuPy", "cupy")) if importlib.util.find_spec(module) is None]
    if missing:
        return f"torch and CuPy are needed for the GPU pipeline; this Python has no {' and no '.join(missing)}"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device"
    import streambridge

    try:
        if streambridge.driver() != "cuda":
            return f"streambridge runs on the {streambridge.driver()} driver"
    except streambridge.NoDriverError as e:
        return str(e)
    return ""


def on_gpu() -> None:
    import cupy
    import numpy
    import torch

    import streambridge as sb

    order, lock = [], threading.Lock()

    def mark(name):
        with lock:
            order.append(name)

    kernel = sb.Module(TRANSFORM).get_kernel("axpb")
    produce_s, consume_s = torch.cuda.Stream(), cupy.cuda.Stream(non_blocking=True)
    transform_s = sb.Stream(non_blocking=True)
    x = torch.empty(N, device="cuda")
    y = torch.empty_like(x)
    ev = [sb.Event() for _ in range(6)]
    with consume_s:  # CuPy compiles its kernel on first use: do that before the clock starts
        cupy.sqrt(cupy.ones(1, dtype=cupy.float32))
    consume_s.synchronize()
    torch.cuda.synchronize()

    p = sb.as_stream(produce_s)
    c = sb.as_stream(consume_s)
    t0 = time.perf_counter()
    # 1. torch produces x on its stream, after a slow start.
    p.record(ev[0])
    with torch.cuda.stream(produce_s):
        torch.cuda._sleep(int(SLOW_NS * 2))  # ~SLOW_NS at the H200's ~2 GHz
        x.copy_(torch.linspace(0, 1, N, device="cuda"))
    p.record(ev[1])
    p.launch_host_func(mark, "produced")
    # 2. the NVRTC kernel transforms it on a streambridge stream, ordered after torch's.
    transform_s.wait_stream(p)
    transform_s.record(ev[2])
    kernel((N + 255) // 256, 256, (y, x, numpy.float32(A), numpy.float32(B), N), stream=transform_s)
    transform_s.record(ev[3])
    transform_s.launch_host_func(mark, "transformed")
    # 3. CuPy consumes it on its stream, ordered after the transform.
    c.wait_stream(transform_s)
    c.record(ev[4])
    with consume_s:
        z = cupy.sqrt(cupy.asarray(y))
    c.record(ev[5])
    c.launch_host_func(mark, "consumed")
    enqueued = time.perf_counter() - t0
    consumer_waiting = not consume_s.done
    consume_s.synchronize()
    total = time.perf_counter() - t0

    ref = numpy.sqrt(A * numpy.linspace(0, 1, N, dtype=numpy.float32) + B)
    got = cupy.asnumpy(z)
    ok = numpy.allclose(got, ref, rtol=1e-6)
    print(f"driver {sb.driver()}, {torch.cuda.get_device_name()}; {N} elements")
    print(f"  1. torch produce (with {SLOW_NS / 1e6:.0f} ms head start): {ev[0].elapsed_time(ev[1]):8.3f} ms")
    print(f"  2. NVRTC kernel transform (streambridge):       {ev[2].elapsed_time(ev[3]):8.3f} ms")
    print(f"  3. CuPy consume:                                {ev[4].elapsed_time(ev[5]):8.3f} ms")
    print(f"  enqueued in {enqueued * 1e3:.3f} ms; consumer still waiting then: {consumer_waiting}; "
          f"all done in {total * 1e3:.1f} ms")
    print(f"  order seen by host callbacks: {order}")
    print(f"  checked {N} results against NumPy on the CPU: {'all equal' if ok else 'MISMATCH'}")
    if not ok or order != ["produced", "transformed", "consumed"] or not consumer_waiting:
        sys.exit(1)


def on_software_driver() -> None:
    import streambridge as sb

    print(f"running the ordering on the {sb.driver()} driver: host callbacks stand in for the kernels")
    order = []
    produce, transform, consume = (sb.Stream(non_blocking=True) for _ in range(3))
    produce.launch_host_func(lambda _: (time.sleep(SLOW_NS / 1e9), order.append("produced")), None)
    transform.wait_stream(produce)
    transform.launch_host_func(order.append, "transformed")
    consume.wait_stream(transform)
    consume.launch_host_func(order.append, "consumed")
    waiting = not consume.query()
    consume.synchronize()
    print(f"  consumer still waiting after enqueue: {waiting}; order seen by host callbacks: {order}")
    if order != ["produced", "transformed", "consumed"] or not waiting:
        sys.exit(1)


def main() -> None:
    if os.environ.get("STREAMBRIDGE_DRIVER") == "sim":
        on_software_driver()
        return
    why = gpu_available()
    if why:  # start again on the software driver: Go reads the environment the process began with
        print(f"no GPU pipeline here: {why}", flush=True)
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "STREAMBRIDGE_DRIVER": "sim"})
    on_gpu()


if __name__ == "__main__":
    main()
