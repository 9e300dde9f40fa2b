"""Streams of contexts other than a device's primary one (issue 26): a green context's
stream, as torch's object and as a raw handle from the driver API, works wherever a
primary context's does (a stream of a context made with cuCtxCreate is refused, saying
what it is: test_hostile.py, in a child process)."""

import numpy
import pytest
from _interop import SPIN, framework

import streambridge as sb


def driver_api():
    return framework("cuda.bindings.driver")


def ok(result):
    err, *rest = result if isinstance(result, tuple) else (result,)
    assert int(err) == 0, err
    return rest[0] if len(rest) == 1 else rest


@pytest.fixture
def green_stream():
    """(green context, a raw stream of it): all of device 0's SMs, made through the driver API."""
    cu = driver_api()
    ok(cu.cuInit(0))
    res = ok(cu.cuDeviceGetDevResource(0, cu.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM))
    desc = ok(cu.cuDevResourceGenerateDesc([res], 1))
    g = ok(cu.cuGreenCtxCreate(desc, 0, cu.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM))
    s = ok(cu.cuGreenCtxStreamCreate(g, cu.CUstream_flags.CU_STREAM_NON_BLOCKING, 0))
    yield g, int(s)
    ok(cu.cuStreamSynchronize(s))
    ok(cu.cuStreamDestroy(s))
    ok(cu.cuGreenCtxDestroy(g))


def test_a_torch_green_context_stream_orders_work_with_cupy():
    torch, cupy = framework("torch"), framework("cupy")
    green = torch.cuda.green_contexts.GreenContext.create(num_sms=16, device_id=0)
    ts = green.Stream()
    s = sb.as_stream(ts)
    assert s.device_id == 0
    n = 1 << 20
    x = torch.zeros(n, device="cuda")
    spin = sb.Module(SPIN).get_kernel("spin_then_fill")
    # a slow producer on the green stream, through streambridge's launch
    spin(n // 256, 256, (x, numpy.int32(n), numpy.float32(3), numpy.uint64(50_000_000)), stream=s)
    e = sb.Event()
    e.record(s)
    assert not e.done
    cs = cupy.cuda.Stream(non_blocking=True)
    sb.as_stream(cs).wait_event(e)
    with cs:
        y = cupy.asarray(x) + 1  # after the green stream's fill
    cs.synchronize()
    assert float(y.min()) == 4 and float(y.max()) == 4
    # and the other way: torch work on the green stream after CuPy's
    with cs:
        z = cupy.full(n, 7, dtype=cupy.float32)
    sb.as_stream(ts).wait_stream(sb.as_stream(cs))
    with torch.cuda.stream(ts):
        w = torch.as_tensor(z, device="cuda") * 2
    ts.synchronize()
    assert float(w.min()) == 14 and float(w.max()) == 14


def test_a_raw_green_stream_handle_is_proven_and_used(green_stream):
    _, h = green_stream
    s = sb.ExternalStream(h)
    assert s.device_id == 0 and s.ptr == h
    hits = []
    s.launch_host_func(hits.append, "green")
    other = sb.Stream(non_blocking=True)
    other.wait_stream(s)
    other.launch_host_func(hits.append, "after")
    other.synchronize()
    assert hits == ["green", "after"]
    assert s.query()
    assert sb.ExternalStream(h).ptr == h  # proven again, the driver not asked


def test_a_destroyed_green_stream_is_refused(green_stream):
    cu = driver_api()
    g, _ = green_stream
    h = int(ok(cu.cuGreenCtxStreamCreate(g, cu.CUstream_flags.CU_STREAM_NON_BLOCKING, 0)))
    s = sb.ExternalStream(h)
    ok(cu.cuStreamDestroy(h))
    with pytest.raises(sb.InvalidHandleError):
        s.query()
    with pytest.raises(sb.InvalidHandleError):
        sb.ExternalStream(h)
