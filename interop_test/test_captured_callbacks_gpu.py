"""Python host callbacks captured into graphs on the GPU: whichever framework begins the
capture (torch.cuda.graph, CuPy's begin_capture, cuda.core's GraphBuilder, streambridge) and
owns the graph, a callback launched through streambridge on the capturing stream runs at
every replay, after the graph's work before it, with its argument, and is released once
that framework destroys the graph (CuPy's own launch_host_func breaks on replay,
cupy/cupy#9274; cuda.core 1.2's streams have no callbacks, NVIDIA/cuda-python#2058)."""

import gc
import weakref

import numpy
import pytest
from _interop import framework, run_child

import streambridge as sb

pytestmark = pytest.mark.usefixtures("no_callback_errors")
REPLAYS = 3


class Arg:
    """A callback argument whose release can be seen."""






def test_torch_cuda_graph(released):
    torch = framework("torch")
    x = torch.zeros(4, device="cuda")
    seen_on_host = torch.zeros(4, pin_memory=True)
    seen, arg = [], Arg()
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):  # torch begins the capture, on a stream of its own
        x.add_(1)
        seen_on_host.copy_(x, non_blocking=True)
        capturing = sb.as_stream(torch.cuda.current_stream())
        capturing.launch_host_func(lambda a: seen.append((type(a).__name__, float(seen_on_host[0]))), arg)
    ref = weakref.ref(arg)
    del arg, capturing
    assert seen == [], "captured, not run"
    for _ in range(REPLAYS):
        g.replay()
    torch.cuda.synchronize()
    assert seen == [("Arg", 1.0), ("Arg", 2.0), ("Arg", 3.0)], "each replay, after the work before it"
    gc.collect()
    assert ref() is not None, "torch's graph holds it"
    del g
    assert released(ref), "released when torch destroyed its graph"


def test_cupy_capture(released):
    cupy = framework("cupy")
    cs = cupy.cuda.Stream(non_blocking=True)
    a = cupy.zeros(4, dtype=cupy.float32)
    host = cupy.cuda.alloc_pinned_memory(16)
    seen_on_host = numpy.frombuffer(host, dtype=numpy.float32, count=4)
    seen, arg = [], Arg()
    with cs:
        a += 1  # CuPy compiles its kernel before the capture
        cs.synchronize()
        cs.begin_capture()
        a += 1
        rt = cupy.cuda.runtime  # ndarray.get refuses during capture; the copy itself is capturable
        rt.memcpyAsync(host.ptr, a.data.ptr, 16, rt.memcpyDeviceToHost, cs.ptr)
        sb.as_stream(cs).launch_host_func(lambda _: seen.append(float(seen_on_host[0])), arg)
        graph = cs.end_capture()
    ref = weakref.ref(arg)
    del arg
    for _ in range(REPLAYS):
        graph.launch(stream=cs)
    cs.synchronize()
    assert seen == [2.0, 3.0, 4.0]
    del graph
    assert released(ref), "released when CuPy destroyed its graph"


def test_cuda_core_graph_builder(released):
    cc = framework("cuda.core")
    dev = cc.Device(0)
    dev.set_current()
    launch_on = dev.create_stream()
    seen, arg = [], Arg()
    gb = dev.create_graph_builder().begin_building()
    sb.as_stream(gb.stream).launch_host_func(lambda a: seen.append(type(a).__name__), arg)
    graph = gb.end_building().complete()
    ref = weakref.ref(arg)
    del arg
    for _ in range(REPLAYS):
        graph.launch(launch_on)
    launch_on.sync()
    assert seen == ["Arg"] * REPLAYS
    graph.close()
    gb.close()
    assert released(ref), "released when cuda.core closed its graph"


def test_streambridge_capture_of_torch_work(released):
    torch = framework("torch")
    s = sb.Stream(non_blocking=True)
    x = torch.zeros(4, device="cuda")
    seen_on_host = torch.zeros(4, pin_memory=True)
    seen = []
    torch.cuda.synchronize()
    s.begin_capture()
    with torch.cuda.stream(s.to_torch()):
        x.mul_(2).add_(1)
        seen_on_host.copy_(x, non_blocking=True)
    sb.hand_over(x, s)  # the graph keeps the tensor it reads
    s.launch_host_func(seen.append, "step")
    s.add_callback(lambda stream, status, host: seen.append(float(host[0])), seen_on_host)
    graph = s.end_capture()
    for _ in range(REPLAYS):
        graph.launch(s)
    s.synchronize()
    assert seen == ["step", 1.0, "step", 3.0, "step", 7.0]
    graph.close()
    # The pinned tensor goes before s: torch frees it with an event recorded on the stream of
    # its non_blocking copy, s, which aborted the process (an H200) where s was destroyed
    # first, as it was whenever the graph's callbacks were freed before this frame ended.
    pinned = weakref.ref(seen_on_host)
    del seen_on_host
    assert released(pinned), "released when the graph was destroyed"
    s.close()


def test_a_child_exits_with_graphs_of_callbacks_alive():
    """Graphs still alive at exit hold Python callbacks: the interpreter ends without
    running or freeing them from a dead interpreter."""
    code = r"""
import streambridge as sb, torch
graphs = []
for i in range(50):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        sb.as_stream(torch.cuda.current_stream()).launch_host_func(lambda _: None, [i])
    g.replay()
    graphs.append(g)
s = sb.Stream()
s.begin_capture()
for i in range(1000):
    s.launch_host_func(lambda _: None, i)
kept = s.end_capture()
kept.launch(s)
print("ok", flush=True)
"""
    rc, out, err = run_child(code)
    assert (rc, out.strip()) == (0, "ok"), err[-2000:]
