"""Does destroying an event whose last record is still pending block the caller?

CUDA's documentation says cuEventDestroy returns at once and frees the event when its
work completes. This measures it with CuPy's events and with streambridge's, behind a
kernel that spins for 300 ms. (streambridge keeps WaitStream's fence events for reuse
instead of destroying them; see streams.Context.putFence.)

    python3 bench/event_destroy.py
"""

import time

import cupy
import torch

import streambridge

SLOW_S = 0.3


def slow(stream):
    with torch.cuda.stream(stream):
        torch.cuda._sleep(int(SLOW_S * 2e9))


def timed(label, destroy, stream):
    start = time.perf_counter()
    destroy()
    took = time.perf_counter() - start
    print(f"{label:58s} {took * 1e3:8.2f} ms   (stream still busy: {not stream.query()})")
    torch.cuda.synchronize()


def main():
    s = torch.cuda.Stream()
    torch.cuda.synchronize()

    slow(s)
    e = cupy.cuda.Event(disable_timing=True)
    e.record(cupy.cuda.ExternalStream(s.cuda_stream))
    timed("cupy: del a pending event (cudaEventDestroy)", lambda: e.__del__(), s)

    slow(s)
    w = streambridge.as_stream(s)
    ev = w.record(streambridge.Event(disable_timing=True))
    timed("streambridge: Event.close() of a pending event", ev.close, s)

    slow(s)
    consumer = streambridge.Stream(non_blocking=True)
    w = streambridge.as_stream(s)
    consumer.wait_stream(w)
    timed("streambridge: close a wrapper after wait_stream (fence kept)", w.close, s)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
