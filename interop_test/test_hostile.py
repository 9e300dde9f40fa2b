"""Hostile handles, each in its own child process: every one must raise a typed error and
the process must live. Handed to torch.cuda.ExternalStream, cupy.cuda.ExternalStream or
cuda.core's Stream.from_handle, the garbage and freed ones kill the process (SIGSEGV).

Each runs twice: "first", as the process's first wrap (checked by the Go core), and "after a
wrap", once a live stream of the device was wrapped, so that the C core has met the device's
context and tries to prove the handle with its own loads first (core.c, proven_here)."""

import os

import pytest
from _interop import framework, run_child

CHILD = r"""
import gc, random, sys
import streambridge as sb

kind, when = sys.argv[1], sys.argv[2]

def freed_cupy():
    import cupy
    s = cupy.cuda.Stream(non_blocking=True); h = s.ptr; del s; gc.collect(); return h

def freed_cuda_core():
    from cuda.core import Device
    d = Device(0); d.set_current(); s = d.create_stream(); h = int(s.handle); s.close(); return h

def freed_numba():
    from numba import cuda
    s = cuda.stream(); h = s.handle.value if hasattr(s.handle, "value") else int(s.handle); del s; gc.collect()
    cuda.current_context().deallocations.clear()  # numba defers the cuStreamDestroy
    return h

def freed_streambridge():
    s = sb.Stream(); h = s.ptr; s.close(); return h

def tensor_pointer():
    import torch
    global keep
    keep = torch.empty(16, device="cuda"); return keep.data_ptr()

def event_handle():
    import cupy
    global keep
    keep = cupy.cuda.Event(); return keep.ptr

def context_handle():
    from cuda.core import Device
    d = Device(0); d.set_current(); return int(d.context.handle)

class Proto:
    def __init__(self, value): self.value = value
    def __cuda_stream__(self):
        if isinstance(self.value, Exception): raise self.value
        return self.value

def live_handle():
    global keep
    keep = sb.Stream(); return keep.ptr

def stream_object():  # the object a live torch stream's block points to: where a chain may read both ways
    import ctypes, torch
    global keep
    keep = torch.cuda.Stream(); return ctypes.c_uint64.from_address(keep.cuda_stream).value

CASES = {
    "garbage": lambda: sb.ExternalStream(0xDEADBEEF),
    "garbage aligned": lambda: sb.ExternalStream(0x7F0012345678),
    "first page": lambda: sb.ExternalStream(4096 - 8),
    "kernel address": lambda: sb.ExternalStream(0xFFFFFFFF81000000),
    "near 2**64": lambda: sb.ExternalStream(2**64 - 8),
    "negative": lambda: sb.ExternalStream(-1),
    "too large": lambda: sb.ExternalStream(2**64),
    "str": lambda: sb.ExternalStream("0x1234"),
    "float": lambda: sb.ExternalStream(1.5),
    "None via as_stream": lambda: sb.as_stream(None),
    "bool": lambda: sb.ExternalStream(True),
    "random x1000": None,  # below
    "freed cupy stream": lambda: sb.ExternalStream(freed_cupy()),
    "freed cuda.core stream": lambda: sb.ExternalStream(freed_cuda_core()),
    "freed numba stream": lambda: sb.ExternalStream(freed_numba()),
    "freed streambridge stream": lambda: sb.ExternalStream(freed_streambridge()),
    "tensor data pointer": lambda: sb.ExternalStream(tensor_pointer()),
    "event handle": lambda: sb.ExternalStream(event_handle()),
    "context handle": lambda: sb.ExternalStream(context_handle()),
    "stream object address": lambda: sb.ExternalStream(stream_object()),
    "inside a stream's block": lambda: sb.ExternalStream(live_handle() + 8),
    "stated device out of range": lambda: sb.ExternalStream(live_handle(), 99),
    "protocol version 1": lambda: sb.Stream.from_external(Proto((1, live_handle()))),
    "protocol short tuple": lambda: sb.Stream.from_external(Proto((0,))),
    "protocol list": lambda: sb.Stream.from_external(Proto([0, live_handle()])),
    "protocol str handle": lambda: sb.Stream.from_external(Proto((0, "12345"))),
    "protocol garbage handle": lambda: sb.Stream.from_external(Proto((0, 0xDEADBEE0))),
    "protocol raises": lambda: sb.Stream.from_external(Proto(RuntimeError("boom"))),
    "no protocol": lambda: sb.Stream.from_external(object()),
    "faulthandler after import": None,  # below
}

TYPED = (sb.InvalidHandleError, sb.DeviceMismatchError, sb.CUDAError, sb.ProtocolError, sb.NotStreamLikeError,
         TypeError, ValueError)
if when == "after a wrap":
    sb.ExternalStream(live_handle()).query()
if kind == "random x1000":
    rng = random.Random(1)
    for _ in range(1000):
        try:
            sb.ExternalStream(rng.randrange(3, 2**64))
        except TYPED:
            continue
        print("ACCEPTED"); sys.exit(3)
    print("RAISED InvalidHandleError x1000"); sys.exit(0)
if kind == "faulthandler after import":  # the Go side falls back to process_vm_readv
    import faulthandler; faulthandler.enable()
    CASES[kind] = lambda: sb.ExternalStream(0x7F0012345678)
try:
    CASES[kind]()
except TYPED as e:
    print("RAISED", type(e).__name__); sys.exit(0)
except RuntimeError as e:
    if str(e) == "boom":  # the protocol object's own exception, passed on
        print("RAISED", type(e).__name__); sys.exit(0)
    raise
print("ACCEPTED"); sys.exit(3)
"""

KINDS = [
    "garbage", "garbage aligned", "first page", "kernel address", "near 2**64", "negative", "too large",
    "str", "float", "None via as_stream", "bool", "random x1000", "freed cupy stream", "freed cuda.core stream",
    "freed numba stream", "freed streambridge stream", "tensor data pointer", "event handle", "context handle",
    "stream object address", "inside a stream's block", "stated device out of range", "protocol version 1", "protocol short tuple", "protocol list",
    "protocol str handle", "protocol garbage handle", "protocol raises", "no protocol", "faulthandler after import",
]
WHEN = ["first", "after a wrap"]
outcomes = {}


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("kind", KINDS)
def test_hostile_handle_raises_in_a_child_that_lives(kind, when):
    rc, out, err = run_child(CHILD, kind, when)
    outcomes[(kind, when)] = "raised" if rc == 0 else ("crashed" if rc < 0 or rc > 3 else "accepted")
    assert rc == 0 and out.startswith("RAISED"), f"exit {rc}: {out}{err[-2000:]}"


def test_hostile_summary():
    """Prints the count the issue asks for (run after the cases above)."""
    counts = {k: sum(1 for v in outcomes.values() if v == k) for k in ("raised", "accepted", "crashed")}
    line = (f"hostile handles: {len(outcomes) // len(WHEN)} kinds x {len(WHEN)} ({', '.join(WHEN)}), "
            f"each in a child process: {counts}")
    print("\n" + line)
    if os.environ.get("STREAMBRIDGE_REPORT"):  # scripts/gpu-check.sh prints it
        with open(os.environ["STREAMBRIDGE_REPORT"], "a") as f:
            f.write(line + "\n")
    assert len(outcomes) == len(KINDS) * len(WHEN) and counts["raised"] == len(outcomes)


NON_PRIMARY = r"""
import streambridge as sb
from cuda.bindings import driver as cu

def ok(r):
    assert r[0] == cu.CUresult.CUDA_SUCCESS, r[0]
    return r[1] if len(r) == 2 else None

ok(cu.cuInit(0))
dev = ok(cu.cuDeviceGet(0))
ok(cu.cuDevicePrimaryCtxRetain(dev))  # active, as the frameworks leave it
try:
    ctx = ok(cu.cuCtxCreate(None, 0, dev))
except TypeError:  # cuda.bindings 12's signature
    ctx = ok(cu.cuCtxCreate(0, dev))
s = ok(cu.cuStreamCreate(1))
assert cu.cuStreamQuery(s)[0] == cu.CUresult.CUDA_SUCCESS  # live, as far as the driver is concerned
try:
    sb.ExternalStream(int(s))
except sb.InvalidHandleError as e:
    print("CALLED NOT LIVE", e)
except sb.CUDAError as e:
    print("REFUSED", e.name, e)
else:
    print("ACCEPTED")
ok(cu.cuStreamDestroy(s))
ok(cu.cuCtxDestroy(ctx))
"""


def test_a_stream_of_a_context_of_its_own_is_refused_saying_what_it_is():
    """A cuCtxCreate context shares no objects with its device's primary one (the driver
    refuses the primary context's events on its streams), so its live stream is refused with
    CUDA_ERROR_INVALID_CONTEXT, saying what it is: not called dead, not crashed on, not
    guessed at (green contexts' streams are taken: test_green_contexts.py)."""
    framework("cuda.bindings")
    rc, out, err = run_child(NON_PRIMARY)
    assert rc == 0 and out.startswith("REFUSED CUDA_ERROR_INVALID_CONTEXT"), f"exit {rc}: {out}{err[-2000:]}"
    assert "cuCtxCreate" in out and "live CUDA stream of context" in out, out
