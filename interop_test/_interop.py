"""Helpers for the cross-framework tests."""

import importlib
import os
import subprocess
import sys

import pytest

REQUIRE_GPU = os.environ.get("STREAMBRIDGE_REQUIRE_GPU") == "1"


def framework(name):
    """The framework module; a missing one fails on a GPU machine that must have them."""
    if REQUIRE_GPU:
        return importlib.import_module(name)
    return pytest.importorskip(name)


def run_child(code, *args, timeout=180):
    """Runs Python code in a child process: (exit status, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


# A kernel that spins for ns nanoseconds of GPU time, then fills out[:n] with value: a slow
# producer, so that a missing wait shows as unfilled data.
SPIN = r"""
extern "C" __global__ void spin_then_fill(float *out, int n, float value, unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = value;
}
"""


class OnlyDLPack:
    """A producer that speaks DLPack and not the CUDA Array Interface."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()
