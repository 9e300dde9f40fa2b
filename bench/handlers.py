"""Which SIGSEGV handler is installed as each framework is imported and initialised, and so
how streambridge's handle checks read memory ("loads" while Go's handler is installed,
"process_vm_readv" otherwise; see internal/cuda/validate.go), and what a wrap costs then.

    python3 bench/handlers.py
"""

import time

import streambridge
from streambridge import _core


def report(stage, handle):
    n = 20000
    start = time.perf_counter()
    for _ in range(n):
        streambridge.ExternalStream(handle)
    per = (time.perf_counter() - start) / n * 1e9
    print(f"{stage:28s} reads: {_core.validation_reads():17s} ExternalStream {per:6.0f} ns")


def main():
    keep = streambridge.Stream()
    report("streambridge only", keep.ptr)
    import torch

    report("+ import torch", keep.ptr)
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    report("+ torch CUDA initialised", keep.ptr)
    import cupy

    cupy.zeros(1)
    report("+ cupy", keep.ptr)
    from cuda.core import Device

    Device(0).set_current()
    report("+ cuda.core", keep.ptr)
    import faulthandler

    faulthandler.enable()
    report("+ faulthandler.enable()", keep.ptr)


if __name__ == "__main__":
    main()
