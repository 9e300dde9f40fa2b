"""streambridge.explain on each framework's streams and events, and python -m streambridge,
on the GPU with the frameworks importable."""

import subprocess
import sys

import pytest
from _interop import framework

import streambridge as sb


def rows(text):
    return {line[2:13].strip(): line[14:] for line in text.splitlines()[1:]}


def torch_stream():
    return framework("torch").cuda.Stream(), "PyTorch", lambda s: s.cuda_stream


def cupy_stream():
    return framework("cupy").cuda.Stream(non_blocking=True), "CuPy", lambda s: s.ptr


def core_stream():
    dev = framework("cuda.core").Device(0)
    dev.set_current()
    return dev.create_stream(), "cuda.core", lambda s: int(s.handle)


def numba_stream():
    s = framework("numba.cuda").stream()
    return s, "Numba", lambda s: s.handle.value if hasattr(s.handle, "value") else int(s.handle)


@pytest.mark.parametrize("make", [torch_stream, cupy_stream, core_stream, numba_stream],
                         ids=["torch", "cupy", "cuda.core", "numba"])
def test_explain_names_each_frameworks_stream(make):
    s, name, handle = make()
    text = sb.explain(s)
    print(text)
    r = rows(text)
    assert text.splitlines()[0].endswith(f"an object of {name}, a stream")
    assert r["handle"] == f"{handle(s):#x}" and r["owner"].startswith(f"{name}: borrowed")
    assert r["capture"] == "not capturing" and int(r["stream id"]) > 0 and r["work"] == "none pending"


def test_explain_a_stream_torch_is_capturing_leaves_the_capture_valid():
    torch = framework("torch")
    s = torch.cuda.Stream()
    x = torch.zeros(4, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        x += 1
        r = rows(sb.explain(s))
    assert r["capture"].startswith("capturing into a graph")
    g.replay()
    torch.cuda.synchronize()
    assert x.tolist() == [1.0] * 4, "the capture held: one replay added one"


def _recorded_torch_event():
    e = framework("torch").cuda.Event()
    e.record()  # PyTorch makes the CUevent at the first record
    return e


@pytest.mark.parametrize("make, name", [
    (_recorded_torch_event, "PyTorch"),
    (lambda: framework("cupy").cuda.Event(), "CuPy"),
])
def test_explain_borrows_other_frameworks_events(make, name):
    e = make()
    text = sb.explain(e)
    print(text)
    assert text.splitlines()[0].endswith(f"an event of {name}, borrowed by as_event: never destroyed by streambridge")
    assert rows(text)["work"].startswith(("complete", "pending"))


def test_explain_refuses_a_torch_event_never_recorded():
    text = sb.explain(framework("torch").cuda.Event())
    assert "no CUevent yet" in rows(text)["refused"]


def test_python_m_streambridge_lists_every_frameworks_current_stream():
    p = subprocess.run([sys.executable, "-m", "streambridge"], capture_output=True, text=True, timeout=300)
    print(p.stdout)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[1].startswith("driver: cuda (CUDA ")
    for name in ("streambridge", "PyTorch", "CuPy", "cuda.core", "Numba"):
        assert any(line.startswith(f"- {name}: ") and line.endswith("a stream") for line in p.stdout.splitlines()), name
