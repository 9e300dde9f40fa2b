"""One process per GPU with torch.distributed (NCCL): an all-reduce on torch's stream, then a
kernel the Go core compiled and CuPy's work on a stream of streambridge, ordered after the
all-reduce by streambridge alone.

    torchrun --standalone --nproc_per_node=2 examples/distributed.py   # the wheel installed

Each rank sets its device (torch.cuda.set_device), which streambridge then takes as the
default device, as torch and CuPy do. On each rank:

1. torch's current stream first sleeps (a slow producer: a missing wait shows as wrong
   data), then x = rank + 1 everywhere, then all_reduce(x): x = 1 + 2 + ... + world on every
   rank, NCCL's work ordered before torch's current stream, as torch does.
2. A stream of streambridge waits for torch's current stream (one record and one wait).
3. On it, y = a*x + b, a kernel compiled by NVRTC through the Go core, reading the NCCL-fed
   tensor (DLPack gives the launch its pointer; it refuses a tensor of another device).
4. On it, through CuPy: the elements of y that differ from a*(1 + 2 + ... + world) + b,
   counted.

Each rank prints one line; its exit status is not 0 if any element is wrong or the stream
was not on the rank's device. ``interop_test/test_distributed.py`` runs it on two GPUs.
"""

from __future__ import annotations

import os
import sys

N = 1 << 22
A, B = 3.0, 1.0
SLOW_CYCLES = 100_000_000  # about 50 ms of a GPU's clock before x is written

AXPB = r"""
extern "C" __global__ void axpb(float *y, const float *x, float a, float b, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""


def main() -> int:
    import cupy
    import numpy
    import torch
    import torch.distributed as dist

    import streambridge as sb

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)  # streambridge's default device from here on, as torch's
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    try:
        kernel = sb.Module(AXPB).get_kernel("axpb")  # on the current device: this rank's GPU
        x = torch.empty(N, device="cuda")
        y = torch.empty_like(x)
        torch.cuda.synchronize()

        torch.cuda._sleep(SLOW_CYCLES)  # on torch's current stream, before x is written
        x.fill_(float(rank + 1))
        dist.all_reduce(x)  # NCCL's stream, then torch's current stream waits for it

        s = sb.Stream(non_blocking=True)  # this rank's device, from torch.cuda.set_device
        s.wait_stream(sb.as_stream(torch.cuda.current_stream()))  # after the all-reduce
        kernel((N + 255) // 256, 256, (y, x, numpy.float32(A), numpy.float32(B), N), stream=s)
        with s.to_cupy():
            want = A * (world * (world + 1) / 2) + B
            wrong = int(cupy.count_nonzero(cupy.asarray(y) != cupy.float32(want)))
        s.synchronize()

        print(f"rank {rank} of {world}: device {s.device_id} (torch's {torch.cuda.current_device()}), "
              f"all_reduce then a Go-compiled kernel then CuPy on streambridge stream {s.ptr:#x}: "
              f"{N - wrong} of {N} elements equal {want:g}", flush=True)
        dist.barrier()
        return 0 if wrong == 0 and s.device_id == local else 1
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
