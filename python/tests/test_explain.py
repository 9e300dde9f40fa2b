"""streambridge.explain and python -m streambridge: a readable report on anything, which
never raises for what it is given and never disturbs what it looks at."""

import os
import subprocess
import sys

import pytest

import streambridge as sb


def rows(text):
    """The report's rows as {name: text}."""
    return {line[2:13].strip(): line[14:] for line in text.splitlines()[1:]}


def test_an_owned_stream_is_reported_whole():
    s = sb.Stream(non_blocking=True, priority=-1)
    text = sb.explain(s)
    r = rows(text)
    assert text.splitlines()[0] == "streambridge._stream.Stream: an object of streambridge, a stream"
    assert r["handle"] == f"{s.ptr:#x}" and r["device"].startswith("0, in its primary context")
    assert r["owner"].startswith("streambridge: created here") and r["priority"].startswith("-1 ")
    assert r["blocking"].startswith("non-blocking") and r["capture"] == "not capturing"
    assert int(r["stream id"]) > 0 and r["work"] == "none pending"


def test_pending_work_and_the_special_handles():
    s = sb.Stream(non_blocking=True)
    import threading

    gate = threading.Event()
    s.launch_host_func(lambda _: gate.wait(5), None)
    assert rows(sb.explain(s))["work"].startswith("pending")
    gate.set()
    s.synchronize()
    r = rows(sb.explain(0))
    assert r["handle"] == "0x0: the legacy default stream (CUDA runtime's 0) of device 0"
    assert r["owner"] == "the CUDA runtime's: always there" and "0 is an error" in r["refuses"]
    assert rows(sb.explain(2))["handle"].startswith("0x2: CU_STREAM_PER_THREAD")


@pytest.mark.learned_layout
def test_a_bare_handle_and_its_borrowed_wrapper_after_the_owner_destroyed_it():
    owner = sb.Stream()
    handle = owner.ptr
    assert "every use raises InvalidHandleError" in rows(sb.explain(handle))["refuses"]
    borrowed = sb.ExternalStream(handle)
    owner.close()
    assert rows(sb.explain(borrowed))["state"].startswith("unusable, every call on it raises InvalidHandleError")
    assert rows(sb.explain(owner))["state"].startswith("closed")
    assert rows(sb.explain(handle))["refused"].startswith("InvalidHandleError")


class RaisingProtocol:
    def __cuda_stream__(self):
        raise KeyError("boom")


@pytest.mark.parametrize("bad, says", [
    pytest.param(0xDEADBEEF, "InvalidHandleError", marks=pytest.mark.learned_layout), ("0x1234", "NotStreamLikeError"), (None, "NotStreamLikeError"),
    (RaisingProtocol(), "KeyError: 'boom'"), (2**70, "ValueError"), (True, "NotStreamLikeError"),
])
def test_garbage_is_reported_not_raised(bad, says):
    text = sb.explain(bad)
    assert rows(text)["refused"].startswith(says), text


def test_explaining_a_capturing_stream_leaves_the_capture_valid():
    s = sb.Stream(non_blocking=True)
    s.begin_capture()
    r = rows(sb.explain(s))
    assert r["capture"].startswith("capturing into a graph") and "blocking" not in r and "work" not in r
    with pytest.raises(sb.CaptureError, match="reading its flags"):
        s.is_non_blocking  # the driver would invalidate the capture: refused first
    s.end_capture().launch(s)  # still valid
    s.synchronize()


@pytest.mark.learned_layout
def test_events_ours_and_others():
    e = sb.Event(disable_timing=True)
    r = rows(sb.explain(e))
    assert r["handle"] == f"{e.ptr:#x}" and r["timing"].startswith("disabled") and r["work"].startswith("complete")
    e.close()
    assert rows(sb.explain(e))["state"].startswith("closed")

    class Event:  # the shape of torch.cuda.Event
        def __init__(self, handle):
            self.cuda_event = handle

    Event.__module__ = "torch.cuda.streams"
    text = sb.explain(Event(0x1234))
    assert text.splitlines()[0] == "torch.cuda.streams.Event: an event of PyTorch"
    assert rows(text)["refused"].startswith("InvalidHandleError") and "0x1234 is not a live CUDA event" in text
    assert "no CUevent yet" in rows(sb.explain(Event(0)))["refused"]  # torch makes it at the first record
    live = sb.Event()
    text = sb.explain(Event(live.ptr))
    assert text.splitlines()[0].endswith("borrowed by as_event: never destroyed by streambridge")
    r = rows(text)
    assert r["handle"] == f"{live.ptr:#x}" and r["timing"].startswith("not known") and "InvalidHandleError" in r["refuses"]
    assert "interprocess" not in r


def run_module(**env):
    return subprocess.run([sys.executable, "-m", "streambridge"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


@pytest.mark.learned_layout
def test_python_m_streambridge_prints_the_driver_devices_and_current_streams(driver_name):
    p = run_module()
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"streambridge {sb.__version__}"
    assert lines[1].startswith(f"driver: {driver_name} (CUDA ") and "device(s)" in lines[1]
    assert lines[2].startswith("  device 0: ") and "compute capability" in lines[2]
    assert "current streams:" in lines
    assert "current device of this thread (the default device): 0" in lines  # a new process sets none
    assert any(line.startswith("- streambridge: ") and line.endswith("a stream") for line in lines)
    proof = [line for line in lines if line.startswith("stream handles: ")]
    assert proof and proof[0].startswith(
        "stream handles: proven live before use (the layout of the driver's stream objects was learned: "
        "a handle is proven by reading them; a handle leads to the object"), lines
    assert "holds the handle at word " in proof[0] and "the identity is at word " in proof[0], proof
    assert "; event handles likewise: an event handle leads to the object" in proof[0], proof


def test_python_m_streambridge_help_says_what_it_prints():
    p = subprocess.run([sys.executable, "-m", "streambridge", "--help"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("usage: python -m streambridge") and "current stream of each framework" in p.stdout
    assert "driver: " not in p.stdout  # the report is not printed
    p = subprocess.run([sys.executable, "-m", "streambridge", "--bogus"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "unrecognized arguments: --bogus" in p.stderr


def test_python_m_streambridge_says_when_handles_cannot_be_proven():
    p = run_module(STREAMBRIDGE_LAYOUT="unlearnable")
    assert p.returncode == 0, p.stderr
    assert "stream handles: not provable (STREAMBRIDGE_LAYOUT=unlearnable): a bare handle is refused; a " \
           "framework's own stream object, and as_stream(obj, vouched=True) or ExternalStream(ptr, vouched=True), " \
           "are taken on their word" in p.stdout.splitlines(), p.stdout


def test_python_m_streambridge_without_a_driver_says_why():
    p = run_module(STREAMBRIDGE_DRIVER="bogus")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[1].startswith("driver: none (ValueError: ") and "STREAMBRIDGE_DRIVER" in p.stdout
