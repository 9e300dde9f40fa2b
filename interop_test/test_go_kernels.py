"""A Go package of one's own (examples/gokernels), exported with gopy next to streambridge:
its Go-launched kernel runs on PyTorch's, CuPy's and cuda.core's streams and data, in order
with their work; a slow producer shows the wait is real; cuda.core buffers reach Go and
kernels through DLPack."""

import numpy
import pytest
from _interop import SPIN, OnlyDLPack, framework

import streambridge
from streambridge.ext import gokernels

saxpy = streambridge.go_function(gokernels.Saxpy)
describe = streambridge.go_function(gokernels.Describe)
N = 1 << 20


@pytest.fixture(scope="module")
def spin():
    m = streambridge.Module(SPIN)
    yield m.get_kernel("spin_then_fill")
    m.close()


def _stream(kind):
    if kind == "torch":
        return framework("torch").cuda.Stream()
    if kind == "cupy":
        return framework("cupy").cuda.Stream(non_blocking=True)
    if kind == "cuda.core":
        return framework("cuda.core").Device(0).create_stream()
    return streambridge.Stream(non_blocking=True)


@pytest.mark.parametrize("stream_kind", ["torch", "cupy", "cuda.core", "streambridge"])
def test_go_saxpy_on_each_frameworks_stream_between_torch_work(stream_kind):
    torch = framework("torch")
    framework("cuda.core").Device(0).set_current()
    stream = _stream(stream_kind)
    ts = torch.cuda.ExternalStream(streambridge.as_stream(stream).ptr)  # torch's view of the same stream
    torch.cuda.synchronize()
    with torch.cuda.stream(ts):
        x = torch.arange(N, dtype=torch.float32, device="cuda")
        y = torch.ones(N, dtype=torch.float32, device="cuda")
        saxpy(stream, 2.0, x, y)  # y = 2x + 1, launched from Go on that stream
        z = y * 10  # torch work after it on the same stream
    ts.synchronize()
    assert torch.equal(z, (2 * torch.arange(N, dtype=torch.float32, device="cuda") + 1) * 10)


@pytest.mark.parametrize("honour", [True, False], ids=["stream in the interface", "no stream (control)"])
def test_go_saxpy_waits_for_a_slow_cupy_producer(spin, honour):
    # CuPy's stream fills x after 300 ms; x's array interface names that stream, so the Go
    # kernel on torch's stream must wait for it. The control hides the stream: no wait.
    cupy, torch = framework("cupy"), framework("torch")
    producer = cupy.cuda.Stream(non_blocking=True)
    consumer = torch.cuda.Stream()
    x = cupy.zeros(N, dtype=cupy.float32)
    y = torch.zeros(N, dtype=torch.float32, device="cuda")
    cupy.cuda.Device().synchronize()
    torch.cuda.synchronize()
    spin(64, 256, (x, numpy.int32(N), numpy.float32(1), numpy.uint64(300_000_000)), stream=producer)
    with producer:  # CuPy names its current stream in the v3 interface
        cai = x.__cuda_array_interface__
    assert cai["version"] >= 3 and cai["stream"] == producer.ptr

    class Produced:
        __cuda_array_interface__ = dict(cai, stream=producer.ptr if honour else None)

    saxpy(consumer, 3.0, Produced(), y)
    consumer.synchronize()
    seen = float(y.max())
    producer.synchronize()
    assert seen == (3.0 if honour else 0.0)


@pytest.mark.parametrize("wrap", [OnlyDLPack, lambda t: t], ids=["DLPack only", "torch's own tensors"])
def test_a_dlpack_producer_orders_its_work_before_the_go_kernel(spin, wrap):
    # Through DLPack, the producer is given the consumer's stream and makes it wait: torch's
    # current stream is the slow producer here. torch's own tensors go the same way: their
    # array interface (version 2) names no stream, so go_function asks DLPack.
    torch = framework("torch")
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.zeros(N, dtype=torch.float32, device="cuda")
    y = torch.zeros(N, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(producer):
        spin(64, 256, (x, numpy.int32(N), numpy.float32(1), numpy.uint64(300_000_000)), stream=producer)
        saxpy(consumer, 5.0, wrap(x), wrap(y))
    consumer.synchronize()
    seen = float(y.max())
    torch.cuda.synchronize()
    assert seen == 5.0


def test_a_jax_array_reaches_a_go_function():
    jnp, cupy = framework("jax.numpy"), framework("cupy")
    x = jnp.arange(N, dtype=jnp.float32) + 1
    y = cupy.ones(N, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    s = streambridge.Stream(non_blocking=True)
    saxpy(s, 2.0, x, y)
    s.synchronize()
    assert numpy.array_equal(y.get(), 2 * (numpy.arange(N, dtype=numpy.float32) + 1) + 1)
    assert "on device 0" in describe(s, x)
    s.close()


def test_a_cuda_core_buffer_reaches_go_and_a_kernel_through_dlpack():
    core, cupy = framework("cuda.core"), framework("cupy")
    dev = core.Device(0)
    dev.set_current()
    s = dev.create_stream()
    n = 1000
    buf = dev.allocate(n * 4, stream=s)
    got = describe(s, buf)  # a buffer is bytes, whichever integer type it names them
    assert f" at {int(buf.handle):#x} on device 0" in got and "elements of |" in got, got

    m = streambridge.Module(r"""extern "C" __global__ void fill(float *out, float v, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = v * i; }""")
    streambridge.launch(m.get_kernel("fill"), 4, 256, (buf, numpy.float32(0.5), numpy.int32(n)), stream=s)
    s.sync()
    view = cupy.from_dlpack(buf).view(cupy.float32)
    assert numpy.array_equal(view.get(), 0.5 * numpy.arange(n, dtype=numpy.float32))
    m.close()
    buf.close(s)
