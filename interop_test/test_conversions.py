"""A stream made by each of PyTorch, CuPy, cuda.core and Numba goes into streambridge and
back out into each of the others: the same CUstream, usable by every framework."""

import pytest
from _interop import framework, run_child

import streambridge


def numba_handle(s):
    """ctypes c_void_p in older Numba, a cuda-python CUstream in numba-cuda."""
    return s.handle.value or 0 if hasattr(s.handle, "value") else int(s.handle)


def make_torch():
    s = framework("torch").cuda.Stream()
    return s, s.cuda_stream


def make_cupy():
    s = framework("cupy").cuda.Stream(non_blocking=True)
    return s, s.ptr


def make_cuda_core():
    dev = framework("cuda.core").Device(0)
    dev.set_current()
    s = dev.create_stream()
    return s, int(s.handle)


def make_numba():
    s = framework("numba.cuda").stream()
    return s, numba_handle(s)


def make_streambridge():
    s = streambridge.Stream(non_blocking=True)
    return s, s.ptr


MAKERS = {"torch": make_torch, "cupy": make_cupy, "cuda.core": make_cuda_core, "numba": make_numba,
          "streambridge": make_streambridge}


def handle_and_sync(name, obj):
    """The CUstream a framework's stream object holds, after synchronizing it its own way."""
    if name == "torch":
        obj.synchronize()
        return obj.cuda_stream
    if name == "cupy":
        obj.synchronize()
        return obj.ptr
    if name == "cuda.core":
        obj.sync()
        return int(obj.handle)
    obj.synchronize()  # numba
    return numba_handle(obj)


@pytest.mark.parametrize("source", MAKERS)
@pytest.mark.parametrize("target", ["torch", "cupy", "cuda.core", "numba"])
def test_round_trip(source, target):
    owner, handle = MAKERS[source]()
    s = streambridge.as_stream(owner)
    assert (s.ptr, s.device_id) == (handle, 0)
    out = getattr(s, "to_" + target.replace(".", "_"))()
    assert handle_and_sync(target, out) == handle
    if target == "cupy":
        assert out.device_id == 0, "CuPy must be told the stream's device (-1 would mean the current one)"
    again = streambridge.as_stream(out)
    assert again == s


@pytest.mark.parametrize("special", [0, 1, 2], ids=["null", "legacy", "per-thread"])
@pytest.mark.parametrize("target", ["torch", "cupy", "cuda.core", "numba"])
def test_default_streams_convert_to_each_frameworks_meaning(special, target):
    s = streambridge.ExternalStream(special, 0)
    out = getattr(s, "to_" + target.replace(".", "_"))()
    got = handle_and_sync(target, out)
    if target == "cupy":
        assert out.device_id == 0, "this device's default stream, not the current device's"
    if target == "torch" and special in (0, 1):  # torch's default stream is the legacy one
        torch = framework("torch")
        assert out == torch.cuda.default_stream(0), "not a new pooled stream, as torch.cuda.ExternalStream(0) gives"
    else:
        assert got == special or (special == 0 and got in (0, 1)), (target, special, got)


_CONVERSIONS_RACING_A_CLOSE = """
import random, sys, threading
import streambridge
target = sys.argv[1]
convert = getattr(streambridge.Stream, "to_" + target.replace(".", "_"))
first = streambridge.Stream(non_blocking=True)
convert(first)  # the framework's first use (at once on many threads: the test after this one)
first.close()
made = refused = 0
lock = threading.Lock()
for _ in range(100):
    s = streambridge.Stream(non_blocking=True)
    start = threading.Barrier(4)

    def use():
        global made, refused
        start.wait()
        n = 0
        try:
            while True:
                convert(s)
                n += 1
        except streambridge.ClosedError:
            with lock:
                made, refused = made + n, refused + 1

    threads = [threading.Thread(target=use) for _ in range(3)]
    for t in threads:
        t.start()
    start.wait()
    threading.Event().wait(random.random() * 0.003)
    s.close()
    for t in threads:
        t.join(30)
        assert not t.is_alive(), "a conversion did not return after close"
print("made", made > 0, "refused", refused)
"""


@pytest.mark.parametrize("target", ["torch", "cupy", "cuda.core", "numba"])
def test_a_conversion_racing_a_close_on_another_thread_gets_a_live_handle_or_closed_error(target):
    """The framework makes its object from the handle (and may ask the driver about it)
    while the stream is held: a close on another thread meanwhile is left until it is done,
    and the conversions after raise ClosedError. In a child: a destroyed handle reaching the
    driver would end the process."""
    framework(target if target != "numba" else "numba.cuda")
    rc, out, err = run_child(_CONVERSIONS_RACING_A_CLOSE, target)
    assert rc == 0, f"exit {rc}\n{out}\n{err[-4000:]}"
    assert out.split() == ["made", "True", "refused", "300"], out + err


@pytest.mark.parametrize("target", ["torch", "cupy", "cuda.core", "numba"])
def test_a_conversion_of_a_capturing_stream_leaves_the_capture_going(target):
    s = streambridge.Stream(non_blocking=True)
    s.begin_capture("global")
    getattr(s, "to_" + target.replace(".", "_"))()
    s.record()
    s.end_capture().close()
    s.close()


_FIRST_CONVERSIONS_AT_ONCE = """
import sys, threading, traceback
import streambridge
target = sys.argv[1]
convert = getattr(streambridge.Stream, "to_" + target.replace(".", "_"))
streams = [streambridge.Stream(non_blocking=True) for _ in range(8)]
start = threading.Barrier(8)
errors = []

def first(s):
    start.wait()
    try:
        convert(s)
    except Exception:
        errors.append(traceback.format_exc())

threads = [threading.Thread(target=first, args=(s,)) for s in streams]
for t in threads:
    t.start()
for t in threads:
    t.join(60)
print("".join(errors[:1]), file=sys.stderr)
print("errors", len(errors))
"""


@pytest.mark.parametrize("target", ["torch", "cupy", "cuda.core", "numba"])
def test_first_conversions_on_eight_threads_at_once_all_succeed(target):
    """Eight threads each make the process's first conversion to the framework at once (its
    first use, which it may set up lazily): each gets its stream. In a child, so that this
    conversion is the framework's first."""
    framework(target if target != "numba" else "numba.cuda")
    rc, out, err = run_child(_FIRST_CONVERSIONS_AT_ONCE, target)
    assert (rc, out.split()) == (0, ["errors", "0"]), f"exit {rc}\n{out}\n{err[-4000:]}"
