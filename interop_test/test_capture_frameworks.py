"""One graph capturing PyTorch work, a kernel launched through streambridge (compiled with
NVRTC by the Go core) and CuPy work on one stream, replayed with correct results."""

import gc

import numpy
import pytest
from _interop import framework

import streambridge

SOURCE = r"""
extern "C" __global__ void axpb(float *out, const float *x, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + b;
}
"""
N = 1 << 16


def test_torch_go_kernel_and_cupy_in_one_graph():
    torch, cupy = framework("torch"), framework("cupy")
    kernel = streambridge.Module(SOURCE).get_kernel("axpb")
    x = torch.zeros(N, device="cuda")
    y, w = torch.empty_like(x), torch.empty_like(x)
    z = cupy.empty(N, dtype=cupy.float32)
    ts = torch.cuda.Stream()
    s = streambridge.as_stream(ts)
    cs = s.to_cupy()
    torch.cuda.synchronize()
    with cs:  # compile CuPy's kernel before the capture
        cupy.multiply(cupy.asarray(w), 3, out=z)
    cs.synchronize()

    s.begin_capture("relaxed")
    with torch.cuda.stream(ts):
        torch.mul(x, 2, out=y)  # torch: y = 2x
    kernel((N + 255) // 256, 256, (w, y, numpy.float32(0.5), numpy.float32(1), numpy.int32(N)), stream=s)  # w = y/2 + 1
    with cs:
        cupy.multiply(cupy.asarray(w), 3, out=z)  # CuPy: z = 3w
    graph = s.end_capture()

    for step in range(10):
        x.fill_(float(step))  # on torch's default stream
        torch.cuda.synchronize()
        graph.launch(s)
        s.synchronize()
        expect = 3 * (0.5 * (2 * step) + 1)
        assert float(z.min()) == expect and float(z.max()) == expect, step
    for _ in range(1000):
        graph.launch(s)
    s.synchronize()
    assert float(z.max()) == 3 * (0.5 * 18 + 1)
    graph.close()


def capture_beside(torch, step, nap):
    """torch.cuda.graph (global mode, its default) of y = 2x + 1 in five parts, each napping
    nap seconds, while another thread calls step() over and over; the graph then replays
    right. Returns how many steps ran during each part."""
    import threading
    import time

    x = torch.arange(N, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    torch.cuda.synchronize()
    started, done, steps, failed, during = threading.Event(), threading.Event(), [], [], []

    def bystander():
        started.set()
        try:
            while not done.is_set():
                step()
                steps.append(None)
        except Exception as exc:  # reported below
            failed.append(exc)

    g = torch.cuda.CUDAGraph()
    t = threading.Thread(target=bystander)
    with torch.cuda.stream(torch.cuda.Stream()):
        torch.mul(x, 2, out=y)  # warm up outside the capture
        torch.cuda.synchronize()
        t.start()
        started.wait()
        with torch.cuda.graph(g):
            for _ in range(5):
                torch.mul(x, 2, out=y)
                torch.add(y, 1, out=y)
                before = len(steps)
                time.sleep(nap)  # the bystander runs meanwhile
                during.append(len(steps) - before)
        done.set()
    t.join()
    assert not failed, failed
    y.zero_()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2 + 1)
    return during


def test_a_torch_capture_survives_another_threads_queries():
    """torch captures in global mode (torch.cuda.graph's default), which makes the driver
    refuse another thread's query or synchronize and invalidate the capture: torch then
    fails with "operation failed due to a previous error during capture". Ours run
    relaxed, so a thread that queries and synchronizes streambridge streams and events
    meanwhile leaves torch's capture alone, and the graph replays right."""
    torch = framework("torch")
    other = streambridge.Stream(non_blocking=True)
    e = streambridge.Event(disable_timing=True)
    other.record(e)
    answers = []

    def step():
        answers.extend([other.query(), other.done, e.query()])
        other.synchronize()
        e.synchronize()

    during = capture_beside(torch, step, 0.02)
    assert all(during), f"the bystander's answers during each part of the capture: {during}"
    assert all(answers), "every query answered: all work was done"


def test_a_torch_capture_survives_another_threads_module_compiles_and_closes():
    """cuModuleUnload from a thread in global mode, while another thread captures in global
    mode, is refused and invalidates that capture (H200, driver 580: bench/capture_modes.c).
    A module's close runs relaxed, so a thread that compiles and closes modules meanwhile
    leaves torch's capture alone, and the graph replays right."""

    def step():
        streambridge.Module('extern "C" __global__ void k() {}').close()

    during = capture_beside(framework("torch"), step, 0.2)
    assert all(during), f"modules closed during each part of the capture: {during}"


def test_a_query_of_the_stream_torch_captures_on_is_refused_and_the_capture_goes_on():
    """A query of the stream torch.cuda.graph captures on, borrowed through as_stream, would
    be refused by the driver and invalidate torch's capture (as torch's own query does):
    streambridge asks first and raises CaptureError, and torch's graph replays right. The
    legacy stream is left alone by a capture on torch's non-blocking stream."""
    torch = framework("torch")
    x = torch.arange(N, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    g = torch.cuda.CUDAGraph()
    refused = []
    with torch.cuda.stream(torch.cuda.Stream()):
        torch.mul(x, 2, out=y)  # warm up outside the capture
        torch.cuda.synchronize()
        with torch.cuda.graph(g):  # global mode
            torch.mul(x, 2, out=y)
            borrowed = streambridge.as_stream(torch.cuda.current_stream())
            for call in (borrowed.query, lambda: borrowed.done, borrowed.synchronize):
                try:
                    call()
                except streambridge.CaptureError as exc:
                    refused.append(str(exc))
            assert borrowed.is_capturing()
            torch.add(y, 1, out=y)
    assert len(refused) == 3, refused
    y.zero_()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2 + 1)


def test_a_query_of_a_cupy_stream_capturing_is_refused_and_the_capture_goes_on():
    """The same for CuPy's capture (Stream.begin_capture, relaxed by default in CuPy)."""
    cupy = framework("cupy")
    x = cupy.arange(N, dtype=cupy.float32)
    y = cupy.empty_like(x)
    cs = cupy.cuda.Stream(non_blocking=True)
    with cs:
        cupy.multiply(x, 2, out=y)  # compile outside the capture
    cs.synchronize()
    borrowed = streambridge.as_stream(cs)
    cs.begin_capture()
    with cs:
        cupy.multiply(x, 2, out=y)
    for call in (borrowed.query, lambda: borrowed.done):
        try:
            call()
            raise AssertionError("a query of a capturing CuPy stream answered")
        except streambridge.CaptureError:
            pass
    with cs:
        cupy.add(y, 1, out=y)
    graph = cs.end_capture()
    y.fill(0)
    graph.launch(cs)
    cs.synchronize()
    assert bool((y == x * 2 + 1).all())
    assert borrowed.query() is True


def _garbage_module():
    """A Module only a collection frees (it sits in a reference cycle)."""
    cycle = [streambridge.Module('extern "C" __global__ void k() {}')]
    cycle.append(cycle)


@pytest.mark.parametrize("capturer", ["global", "thread_local", "relaxed", "cupy"])
def test_a_collection_inside_a_capture_that_unloads_a_module_leaves_the_capture_whole(capturer):
    """A collection runs on whichever thread allocates, the capturing one too: a Module it
    finalizes there unloads (cuModuleUnload synchronizes the context, which a capture in the
    thread's own global or thread-local mode refuses and is invalidated by). The unload runs
    relaxed, so each capture, streambridge's in each mode and CuPy's (relaxed), goes on and
    replays."""
    cupy = framework("cupy")
    kernel = streambridge.Module(SOURCE).get_kernel("axpb")
    x = cupy.arange(N, dtype=cupy.float32)
    y = cupy.empty_like(x)
    if capturer == "cupy":
        cs = cupy.cuda.Stream(non_blocking=True)
        s, begin, end, on = streambridge.as_stream(cs), cs.begin_capture, cs.end_capture, cs
    else:
        s = streambridge.Stream(non_blocking=True)
        begin, end, on = (lambda: s.begin_capture(capturer)), s.end_capture, s

    def axpb(out, a, b, src):  # raw pointers: no producer's stream to wait for in the capture
        kernel((N + 255) // 256, 256, (out.data.ptr, src.data.ptr, numpy.float32(a), numpy.float32(b), numpy.int32(N)),
               stream=s)

    cupy.cuda.Device().synchronize()
    gc.collect()
    gc.disable()  # the collection below is the one that frees the module
    try:
        _garbage_module()
        begin()
        axpb(y, 2, 1, x)
        assert gc.collect() >= 2  # the module and its cycle
        axpb(y, 1, 1, y)
        graph = end()
    finally:
        gc.enable()
    y.fill(0)
    cupy.cuda.Device().synchronize()
    graph.launch(on)
    s.synchronize()
    assert bool((y == 2 * x + 2).all())
