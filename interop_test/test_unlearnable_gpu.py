"""On a driver whose layout cannot be learned (STREAMBRIDGE_LAYOUT=unlearnable, in a child
process): torch's and CuPy's stream objects, and torch's event objects, are taken on their
word and order work between the frameworks; a bare handle is refused, saying how to take it
anyway."""

import os
import subprocess
import sys

from _interop import framework

CHILD = r"""
import cupy, numpy, torch
import streambridge as sb

ts, cs = torch.cuda.Stream(), cupy.cuda.Stream(non_blocking=True)
try:
    sb.ExternalStream(ts.cuda_stream)
    print("bare: taken")
except sb.CUDAError as e:
    print("bare:", e.name)
a, b = sb.as_stream(ts), sb.as_stream(cs)
x = torch.ones(1 << 20, device="cuda")
kernel = sb.Module(r'extern "C" __global__ void twice(float *x, int n) {'
                   r' int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2; }').get_kernel("twice")
with torch.cuda.stream(ts):
    torch.cuda._sleep(50_000_000)  # a slow producer
    x.add_(1)  # 2
b.wait_stream(a)
kernel((1 << 20) // 256, 256, (x, numpy.int32(1 << 20)), stream=b)  # 4, after torch's work
with cs:
    y = cupy.asarray(x) + 1  # 5
cs.synchronize()
print("values:", float(y.min()), float(y.max()), "devices:", a.device_id, b.device_id)
# torch's event object vouches for its handle: CuPy waits on it through streambridge
te = torch.cuda.Event()
with torch.cuda.stream(ts):
    torch.cuda._sleep(50_000_000)
    x.add_(1)  # 5
te.record(ts)
try:
    sb.Event.from_handle(te.cuda_event)
    print("bare event: taken")
except sb.CUDAError as e:
    print("bare event:", e.name)
ev = sb.as_event(te)
ev.wait(b)
with cs:
    z = cupy.asarray(x) * 2  # 10, after torch's add
cs.synchronize()
print("event values:", float(z.min()), float(z.max()), "device:", ev.device_id, ev.borrowed)
"""


def test_torch_and_cupy_streams_on_an_unlearnable_layout():
    framework("torch"), framework("cupy")
    env = dict(os.environ, STREAMBRIDGE_LAYOUT="unlearnable")
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == ["bare: CUDA_ERROR_NOT_SUPPORTED", "values: 5.0 5.0 devices: 0 0",
                                       "bare event: CUDA_ERROR_NOT_SUPPORTED", "event values: 10.0 10.0 device: 0 True"]
