"""Kernels compiled with NVRTC and launched from Python on PyTorch, CuPy and cuda.core data
and streams; the CUDA Array Interface's stream honoured against a slow producer."""

import time

import numpy
import pytest
from _interop import SPIN, OnlyDLPack, framework, run_child

import streambridge

SOURCE = r"""
template <typename T>
__global__ void axpb(T *out, const T *x, T a, T b, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + b;
}
extern "C" __global__ void store(long long *out, long long a, double b, long long c) {
    out[0] = a;
    reinterpret_cast<double *>(out)[1] = b;
    out[2] = c;
}
""" + SPIN
N = 1 << 20


@pytest.fixture(scope="module")
def module():
    m = streambridge.Module(SOURCE, name_expressions=["axpb<float>", "axpb<double>"], options=["-std=c++17"])
    yield m
    m.close()


def test_a_compile_error_carries_the_log():
    with pytest.raises(streambridge.CompileError) as info:
        streambridge.Module("__global__ void k() { undefined_name; }", name="broken.cu")
    assert "undefined_name" in info.value.log and "broken.cu" in info.value.log


@pytest.mark.parametrize("framework_name", ["torch", "cupy"])
def test_a_go_launched_kernel_on_each_frameworks_arrays_and_stream(module, framework_name):
    kernel = module.get_kernel("axpb<float>")
    if framework_name == "torch":
        torch = framework("torch")
        x = torch.arange(N, dtype=torch.float32, device="cuda")
        out = torch.empty_like(x)
        stream = torch.cuda.Stream()
        torch.cuda.synchronize()
    else:
        cupy = framework("cupy")
        x = cupy.arange(N, dtype=cupy.float32)
        out = cupy.empty_like(x)
        stream = cupy.cuda.Stream(non_blocking=True)
        cupy.cuda.Device().synchronize()
    kernel(((N + 255) // 256,), (256,), (out, x, numpy.float32(2), numpy.float32(1), N), stream=stream)
    stream.synchronize()
    got = out.cpu().numpy() if framework_name == "torch" else out.get()
    assert numpy.array_equal(got, 2 * numpy.arange(N, dtype=numpy.float32) + 1)


def test_double_instantiation_and_dlpack(module):
    torch = framework("torch")
    x = torch.arange(1000, dtype=torch.float64, device="cuda")
    out = torch.zeros_like(x)
    torch.cuda.synchronize()
    streambridge.launch(module.get_kernel("axpb<double>"), 4, 256, (OnlyDLPack(out), OnlyDLPack(x), 0.5, -1.0, 1000))
    torch.cuda.synchronize()
    assert torch.equal(out, 0.5 * x - 1)


def slow_producer(module):
    """torch, two torch streams (producer, consumer), x (zeros) and out (zeros), all idle."""
    torch = framework("torch")
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.zeros(N, device="cuda")
    out = torch.zeros_like(x)
    torch.cuda.synchronize()
    return torch, producer, consumer, x, out


def spin_fill(module, x, stream):
    """On stream: 300 ms of spinning, then x[:] = 1."""
    module.get_kernel("spin_then_fill")(64, 256, (x, numpy.int32(N), numpy.float32(1), numpy.uint64(300_000_000)),
                                        stream=stream)


@pytest.mark.parametrize("honour", [True, False], ids=["stream in the interface", "no stream (control)"])
def test_the_array_interface_stream_is_waited_for(module, honour):
    # x is written by a slow kernel on the producer's stream; its array interface names that
    # stream, so the launch on another stream must wait for it.
    torch, producer, consumer, x, out = slow_producer(module)
    spin_fill(module, x, producer)

    class Produced:
        __cuda_array_interface__ = dict(x.__cuda_array_interface__, version=3,
                                        stream=producer.cuda_stream if honour else None)

    module.get_kernel("axpb<float>")(((N + 255) // 256,), (256,), (out, Produced(), numpy.float32(3), numpy.float32(0), N),
                                     stream=consumer)
    consumer.synchronize()
    seen = float(out.max())
    torch.cuda.synchronize()
    assert seen == (3.0 if honour else 0.0)


@pytest.mark.parametrize("current", [True, False], ids=["producer is torch's current stream",
                                                      "producer not current (control)"])
def test_a_torch_tensors_producer_stream_is_waited_for(module, current):
    # A plain torch tensor: its array interface (version 2) names no stream, so the launch
    # asks DLPack, handing it the launch's stream; torch makes that stream wait for its
    # current stream, the slow producer here. The control launches after leaving the
    # producer's `with`: torch's current stream is then the default one, and nothing waits.
    torch, producer, consumer, x, out = slow_producer(module)
    assert x.__cuda_array_interface__["version"] < 3
    axpb = module.get_kernel("axpb<float>")
    with torch.cuda.stream(producer):
        spin_fill(module, x, producer)
        if current:
            axpb(((N + 255) // 256,), (256,), (out, x, numpy.float32(3), numpy.float32(0), N), stream=consumer)
    if not current:
        axpb(((N + 255) // 256,), (256,), (out, x, numpy.float32(3), numpy.float32(0), N), stream=consumer)
    consumer.synchronize()
    seen = float(out.max())
    torch.cuda.synchronize()
    assert seen == (3.0 if current else 0.0)


def test_a_jax_array_is_read_by_a_kernel_through_dlpack(module):
    # JAX arrays are immutable: one is read here, written into a CuPy array on a
    # streambridge stream, after JAX's own work on it (DLPack's handshake).
    jnp, cupy = framework("jax.numpy"), framework("cupy")
    x = jnp.arange(N, dtype=jnp.float32) * 2  # JAX work on its own stream
    out = cupy.zeros(N, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    s = streambridge.Stream(non_blocking=True)
    module.get_kernel("axpb<float>")(((N + 255) // 256,), (256,), (out, x, numpy.float32(0.5), numpy.float32(1), N),
                                     stream=s)
    s.synchronize()
    assert numpy.array_equal(out.get(), numpy.arange(N, dtype=numpy.float32) + 1)
    s.close()


def test_misuse_is_refused(module):
    torch = framework("torch")
    kernel = module.get_kernel("axpb<float>")
    with pytest.raises(TypeError, match="not a kernel argument"):
        kernel(1, 1, ("text",))
    with pytest.raises(streambridge.CUDAError):
        module.get_kernel("no_such_kernel")
    m = streambridge.Module(SOURCE, name_expressions=["axpb<float>"])
    k = m.get_kernel("axpb<float>")
    m.close()
    x = torch.zeros(4, device="cuda")
    with pytest.raises(streambridge.ClosedError):
        k(1, 4, (x, x, numpy.float32(1), numpy.float32(1), 4))


def test_scalar_launches_on_our_streams_run_in_c_and_agree_with_python(module, monkeypatch):
    # Python ints and floats on a streambridge stream: the C core reads them (core.c,
    # kernel_call) without the Python method, which reads the rest; both pack the arguments
    # alike, and both launch through the core's one launch.
    torch = framework("torch")
    kernel = module.get_kernel("store")
    calls = []
    python_call = streambridge.Kernel._call
    monkeypatch.setattr(streambridge.Kernel, "_call", lambda self, *a, **kw: calls.append(a) or python_call(self, *a, **kw))
    s = streambridge.Stream()
    for args, via_python in [
        ((-5, 2.5, 2**64 - 1), False),
        ((-(2**63), -0.0, 7), False),
        ((numpy.int64(-5), numpy.float64(2.5), numpy.uint64(2**64 - 1)), True),  # NumPy scalars: Python
        ((True, 2.5, 1), True),  # bool: one byte, Python
    ]:
        out = torch.zeros(3, dtype=torch.int64, device="cuda")
        torch.cuda.synchronize()
        calls.clear()
        kernel(1, 1, (out.data_ptr(),) + args, stream=s, shared_mem=0)
        s.synchronize()
        assert bool(calls) == via_python, args
        a, b, c = out.cpu().tolist()
        assert a == int(args[0])
        assert numpy.array([b], dtype=numpy.int64).view(numpy.float64)[0] == float(args[1])
        assert c == (int(args[2]) if int(args[2]) < 2**63 else int(args[2]) - 2**64)
    with pytest.raises(TypeError, match="unexpected keyword"):
        kernel(1, 1, (0, 0, 0.0, 0), strem=s)
    with pytest.raises(ValueError, match="does not fit 64 bits"):
        kernel(1, 1, (out.data_ptr(), 2**64, 0.0, 0), stream=s)
    m = streambridge.Module(SOURCE)
    closed = m.get_kernel("store")
    m.close()
    with pytest.raises(streambridge.ClosedError):
        closed(1, 1, (out.data_ptr(), 1, 1.0, 1), stream=s)
    s.close()
    with pytest.raises(streambridge.ClosedError):
        kernel(1, 1, (out.data_ptr(), 1, 1.0, 1), stream=s)


def test_a_module_closed_while_other_threads_launch_its_kernels():
    """A launch that lets the GIL go (it does while a host callback has not returned, see
    MAY_WAIT) holds its kernel's module: a close on another thread meanwhile marks the module
    closed, the launch in flight still has a loaded function, and the last one out unloads it.
    Each launch runs or raises ClosedError; none reaches the driver with an unloaded function.
    A module's compile and unload synchronize the context (bench/callback_waits.c, part two),
    so each round's callback is launched after the compile and sleeps only through the
    launches and the close (a callback held for the whole test held every compile too: the
    first waited out its 60 s, and the rounds after it ran with no callback pending)."""
    import threading

    source = 'extern "C" __global__ void nothing(long long x) {}'
    held = streambridge.Stream(non_blocking=True)
    counts = {"ran": 0, "closed": 0}
    try:
        for _ in range(20):
            m = streambridge.Module(source)
            k = m.get_kernel("nothing")
            pending = threading.Event()
            held.launch_host_func(lambda _: time.sleep(0.2), None)  # launches let the GIL go till it returns
            held.launch_host_func(lambda _: pending.set(), None)
            stop = threading.Event()
            errors = []

            def launch():
                s = streambridge.Stream(non_blocking=True)
                try:
                    while not stop.is_set():
                        try:
                            k((1,), (1,), (7,), stream=s)
                            counts["ran"] += 1
                        except streambridge.ClosedError:
                            counts["closed"] += 1
                            return
                    s.synchronize()
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(e)

            threads = [threading.Thread(target=launch) for _ in range(4)]
            for t in threads:
                t.start()
            time.sleep(0.02)
            assert not pending.is_set(), "the round's callbacks are still pending as the module closes"
            m.close()  # with launches in flight it marks the module closed; the last one out unloads it
            time.sleep(0.02)  # launches after the close meet it closed
            stop.set()
            for t in threads:
                t.join()
            assert errors == []
            with pytest.raises(streambridge.ClosedError):
                k((1,), (1,), (7,))
    finally:
        held.synchronize()
    assert counts["ran"] > 0 and counts["closed"] > 0, counts


def test_a_module_closed_while_a_python_callback_runs():
    """cuModuleUnload synchronizes the context, so it waits for a host callback that has not
    returned (H200: bench/callback_waits.c), and a callback running Python gives the GIL up
    and waits to take it back: a close that kept the GIL through the unload would wait for
    ever. In a child, so that a hang fails the test."""
    code = r"""
import sys, time
import streambridge
sys.setswitchinterval(1e-5)
ran = []
def busy(i):
    t = time.perf_counter()
    while time.perf_counter() - t < 0.05:
        pass
    ran.append(i)
s = streambridge.Stream(non_blocking=True)
for i in range(10):
    m = streambridge.Module('extern "C" __global__ void k() {}')
    s.launch_host_func(busy, i)
    time.sleep(0.01)  # the callback takes the GIL
    m.close()
s.synchronize()
print(ran)
"""
    rc, out, err = run_child(code, timeout=120)
    assert (rc, out.strip()) == (0, str(list(range(10)))), err[-2000:]


@pytest.mark.parametrize("capturer", ["streambridge", "torch", "cupy"])
def test_a_graph_keeps_the_module_its_kernel_runs(capturer):
    """A launch captured into a graph, whoever captures, keeps its kernel's module: the
    module, closed during the capture, is unloaded once the graph is gone, and the graph,
    instantiated after the close, runs the kernel at each launch. The real driver crashed
    (SIGSEGV, H200, driver 580) instantiating a graph whose kernel node names an unloaded
    module's function. In a child, so that a crash fails the test."""
    code = r"""
import gc, sys
import cupy, streambridge
capturer = sys.argv[1]
m = streambridge.Module('extern "C" __global__ void k(int *p, int a) { p[threadIdx.x] = threadIdx.x + a; }')
k = m.get_kernel("k")
out = cupy.zeros(32, dtype=cupy.int32)
def capture_closing(stream):
    k((1,), (32,), (out.data.ptr, 5), stream=stream)
    m.close()
    gc.collect()
if capturer == "streambridge":
    s = streambridge.Stream(non_blocking=True)
    s.begin_capture("relaxed")
    capture_closing(s)
    g = s.end_capture()
    replay = lambda: g.launch(s)
elif capturer == "torch":
    import torch
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        capture_closing(torch.cuda.current_stream())
    replay = g.replay
else:
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        capture_closing(s)
        g = s.end_capture()
    replay = lambda: g.launch(s)
for _ in range(3):
    out.fill(0)
    cupy.cuda.Device().synchronize()
    replay()
    cupy.cuda.Device().synchronize()
    print(out[:4].tolist(), flush=True)
try:
    k((1,), (32,), (out.data.ptr, 5))
except streambridge.ClosedError:
    print("closed", flush=True)
"""
    rc, out, err = run_child(code, capturer, timeout=120)
    assert (rc, out.split("\n")) == (0, ["[5, 6, 7, 8]"] * 3 + ["closed", ""]), err[-2000:]
