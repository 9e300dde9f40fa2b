"""Other frameworks' events borrowed on the GPU (Event.from_handle, as_event): torch's, CuPy's,
cuda.core's and Numba's CUevents proven live before the real driver sees them, ordering work
between frameworks, and refused (never a crash) once destroyed, also when the address names a
new event, and when the handle is a stream's or garbage."""

import gc
import threading

import pytest
from _interop import SPIN, framework, run_child

import streambridge as sb


def _torch_event(**kw):
    torch = framework("torch")
    e = torch.cuda.Event(**kw)
    e.record()  # PyTorch makes the CUevent at the first record
    return e


def _cuda_core_event():
    core = framework("cuda.core")
    dev = core.Device(0)
    dev.set_current()
    return dev.create_event()


MAKERS = {
    "torch": _torch_event,
    "cupy": lambda: framework("cupy").cuda.Event(),
    "cuda.core": _cuda_core_event,
    "numba": lambda: framework("numba.cuda").event(),
}


@pytest.mark.parametrize("lib", sorted(MAKERS))
def test_each_frameworks_event_is_borrowed_and_works(lib):
    theirs = MAKERS[lib]()
    e = sb.as_event(theirs)
    assert e.borrowed and e.device_id == 0 and e._owner is theirs
    s = sb.Stream(non_blocking=True)
    e.record(s)
    s.wait_event(e)
    e.synchronize()
    assert e.query()
    if lib == "torch":
        assert e.to_torch() is theirs
    if lib == "cupy":
        assert e.to_cupy() is theirs
    if lib == "cuda.core":
        assert e.to_cuda_core() is theirs
    e.close()
    assert sb.as_event(theirs).query()  # the close forgot it; their event is alive


def test_a_borrowed_torch_event_orders_a_cupy_consumer_after_a_torch_producer():
    torch, cupy = framework("torch"), framework("cupy")
    n = 1 << 20
    out = torch.zeros(n, device="cuda")
    producer = torch.cuda.Stream()
    spin = cupy.RawKernel(SPIN, "spin_then_fill")
    done = torch.cuda.Event()
    with torch.cuda.stream(producer):
        spin((64,), (256,), (out.data_ptr(), cupy.int32(n), cupy.float32(3.0), cupy.uint64(50_000_000)),
             stream=cupy.cuda.ExternalStream(producer.cuda_stream))
        done.record(producer)  # torch records its own event
    consumer = cupy.cuda.Stream(non_blocking=True)
    sb.as_stream(consumer).wait_event(sb.as_event(done))  # streambridge orders CuPy after torch's event
    with consumer:
        total = float(cupy.asarray(out).sum())
    consumer.synchronize()
    assert total == 3.0 * n


def test_elapsed_time_between_two_borrowed_torch_events():
    torch = framework("torch")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(1_000_000)
    end.record()
    end.synchronize()
    ms = sb.as_event(start).elapsed_time(sb.as_event(end))
    assert ms == pytest.approx(start.elapsed_time(end), rel=0.01, abs=0.01)


def test_a_destroyed_cupy_event_is_refused_and_its_reused_address_too():
    cupy = framework("cupy")
    theirs = cupy.cuda.Event(disable_timing=True)
    keep = cupy.cuda.Event(disable_timing=True)  # noqa: F841 - a neighbour in the context's list
    handle = theirs.ptr
    borrowed = sb.Event.from_handle(handle)  # the handle only: CuPy may destroy its event
    assert borrowed.query()
    del theirs
    gc.collect()
    with pytest.raises(sb.InvalidHandleError, match="was destroyed"):
        borrowed.query()
    with pytest.raises(sb.InvalidHandleError):
        sb.Event.from_handle(handle)
    made = []
    for _ in range(2000):
        made.append(cupy.cuda.Event(disable_timing=True))
        if made[-1].ptr == handle:
            break
    reused = made[-1].ptr == handle
    print(f"address reused by a new CuPy event after {len(made)}: {reused}")
    with pytest.raises(sb.InvalidHandleError, match="now names another event" if reused else "was destroyed"):
        borrowed.synchronize()
    if reused:
        assert sb.Event.from_handle(handle).query()  # a new wrap is the new event


def test_a_stream_handle_is_not_an_event():
    torch, cupy = framework("torch"), framework("cupy")
    for h in (torch.cuda.Stream().cuda_stream, cupy.cuda.Stream(non_blocking=True).ptr, sb.Stream().ptr):
        with pytest.raises(sb.InvalidHandleError, match="not a live CUDA event"):
            sb.Event.from_handle(h)


def test_an_event_made_on_another_thread():
    cupy = framework("cupy")
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("e", cupy.cuda.Event()))
    t.start()
    t.join()
    assert sb.as_event(box["e"]).query()  # its memory is that thread's arena: the Go check proves it


LONE = r"""
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
dev, ctx, ev = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
cu.cuDeviceGet(ctypes.byref(dev), 0)
cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
cu.cuCtxSetCurrent(ctx)
assert cu.cuEventCreate(ctypes.byref(ev), 2) == 0  # the only event of the context
import streambridge as sb
e = sb.Event.from_handle(ev.value)
e.record(sb.Stream())
e.synchronize()
print("lone event borrowed:", e.query())
"""


def test_the_only_event_of_a_context_is_proven_live():
    rc, out, err = run_child(LONE)
    assert rc == 0, err
    assert "lone event borrowed: True" in out


HOSTILE = r"""
import sys
import streambridge as sb
bad = [3, 0x1000, 0xdeadbeef0, 0x7fffffffe000, 1 << 46, 2**64 - 8]
import cupy
bad.append(cupy.cuda.Stream(non_blocking=True).ptr)
refused = 0
for h in bad:
    try:
        sb.Event.from_handle(h)
    except sb.InvalidHandleError:
        refused += 1
import random
rng = random.Random(5)
for _ in range(20000):
    try:
        sb.Event.from_handle(rng.getrandbits(47) & ~7 or 8)
    except sb.InvalidHandleError:
        refused += 1
print("refused", refused, "of", len(bad) + 20000)
"""


def test_garbage_handles_are_refused_in_a_child_that_survives():
    framework("cupy")
    rc, out, err = run_child(HOSTILE)
    assert rc == 0, err
    assert "refused 20007 of 20007" in out
