"""streambridge.jax on the CPU: the core's XLA FFI handler, called as XLA calls it.

Everywhere (no JAX needed): xla_frames.c plays XLA's side from the layout xla_ffi.h declares,
so the handler's metadata answer, its stages, its attributes, its errors and its three ops
run through the one path on the software driver's streams. Where jaxlib is installed, the
layout is held to the header it ships, and where JAX is, the calls are traced and run on
JAX's CPU backend, which has no CUDA stream: each fails with streambridge's clear error.
What needs JAX's CUDA stream is interop_test/test_jax_gpu.py's.
"""

from __future__ import annotations

import ctypes
import gc
import importlib.util
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import streambridge as sb
from streambridge import _xla
from streambridge._core import core as _c

NATIVE = Path(__file__).resolve().parents[1] / "native"
HEADER = NATIVE / "xla_ffi.h"
INT64, INT32, ABSENT = 0, 1, 2  # how xla_frames.c passes an attribute


def _declared(name: str) -> int:
    """A number xla_ffi.h declares: a #define, or one of SBX_CONSTANTS (held to XLA's)."""
    text = HEADER.read_text()
    found = re.search(rf"#define {name} (\d+)", text) or re.search(rf"C\({name}, \w+, (\d+)\)", text)
    return int(found.group(1))


EXECUTE, INSTANTIATE = _declared("SBX_STAGE_EXECUTE"), _declared("SBX_STAGE_INSTANTIATE")
INVALID_ARGUMENT, FAILED_PRECONDITION = _declared("SBX_INVALID_ARGUMENT"), _declared("SBX_FAILED_PRECONDITION")
UNIMPLEMENTED = _declared("SBX_UNIMPLEMENTED")


def _compile(tmp_path: Path, source: str, name: str) -> ctypes.CDLL:
    out = tmp_path / name
    subprocess.run(["gcc", "-std=c11", "-shared", "-fPIC", "-Wall", "-Werror", f"-I{NATIVE}", "-o", str(out),
                    str(Path(__file__).with_name(source))], check=True)
    return ctypes.CDLL(str(out))


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    lib = _compile(tmp_path_factory.mktemp("frames"), "xla_frames.c", "frames.so")
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    handler = ctypes.c_void_p(get(_c.xla_handler(), None))

    def call(op=_xla.RECORD, token=0, stream=None, *, stage=EXECUTE, op_kind=INT64, token_kind=INT64, buffers=()):
        message = ctypes.create_string_buffer(1024)
        addresses = (ctypes.c_void_p * max(len(buffers), 1))(*buffers)
        code = lib.frames_call(handler, stage, ctypes.c_longlong(op), op_kind, ctypes.c_longlong(token), token_kind,
                               ctypes.c_void_p(stream), addresses, len(buffers), message, ctypes.c_size_t(1024))
        return code, message.value.decode()

    def metadata():
        major, minor, traits = ctypes.c_int(), ctypes.c_int(), ctypes.c_uint()
        ok = lib.frames_metadata(handler, ctypes.byref(major), ctypes.byref(minor), ctypes.byref(traits))
        return ok, major.value, minor.value, traits.value

    call.metadata = metadata
    return call


def test_the_handler_states_its_api_version_and_that_xla_must_never_capture_it(frames):
    ok, major, minor, traits = frames.metadata()
    assert ok and (major, minor) == (_declared("SBX_API_MAJOR"), _declared("SBX_API_MINOR"))
    assert traits == 0  # no XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE: never in a CUDA graph


def test_a_call_records_waits_and_calls_back_on_the_stream_xla_hands_over(frames):
    """JAX's stream stands as a software stream s: the producer's slow callback, then the
    handler's record of ev on s; on o, the handler's wait for ev and its callback: the
    callback runs after the producer's, as on any stream of the one path."""
    s, o, ev, order = sb.Stream(non_blocking=True), sb.Stream(non_blocking=True), sb.Event(), []
    s.launch_host_func(lambda _: (time.sleep(0.2), order.append("produced")), None)
    assert frames(_xla.RECORD, _xla.token(ev, "event"), s.ptr) == (0, "")
    assert frames(_xla.WAIT, _xla.token(ev, "event"), o.ptr) == (0, "")
    assert frames(_xla.CALLBACK, _xla.callback_token(order.append, "consumed"), o.ptr) == (0, "")
    assert order == []  # enqueued, not run: the handler never waits
    o.synchronize()
    assert order == ["produced", "consumed"]
    # and a wait for a stream: its work so far
    s.launch_host_func(lambda _: (time.sleep(0.1), order.append("second")), None)
    assert frames(_xla.WAIT, _xla.token(s, "stream"), o.ptr) == (0, "")
    assert frames(_xla.CALLBACK, _xla.callback_token(order.append, "after"), o.ptr) == (0, "")
    o.synchronize()
    assert order[2:] == ["second", "after"]


def test_a_launch_gets_the_operands_addresses_in_its_arguments_places(frames):
    """The handler hands run the operands' addresses; run puts each where the launch's plan
    has an Operand, on the stream XLA gave. (A stand-in for the kernel: the software driver
    runs no device code; interop_test/test_jax_gpu.py launches a real one.)"""
    launched, s = [], sb.Stream()

    def kernel(grid, block, args, *, shared_mem, stream):
        launched.append((grid, block, args, shared_mem, stream == s))

    plan = (_xla.Operand(1), 2.5, _xla.Operand(0), 7)
    token = _xla.launch_token(kernel, (4, 1, 1), (256, 1, 1), 0, plan)
    assert frames(_xla.LAUNCH, token, s.ptr, buffers=(0x1000, 0x2000)) == (0, "")
    assert launched == [((4, 1, 1), (256, 1, 1), (0x2000, 2.5, 0x1000, 7), 0, True)]


def test_a_go_function_is_a_host_callback_in_the_streams_order(frames):
    from streambridge.ext import gokernels

    s, label = sb.Stream(), f"test_jax {time.monotonic_ns()}"
    s.launch_host_func(lambda _: time.sleep(0.1), None)
    assert frames(_xla.CALLBACK, _xla.callback_token(gokernels.Tally, label), s.ptr) == (0, "")
    assert gokernels.Tallies(label) == 0  # behind the sleeping callback
    s.synchronize()
    assert gokernels.Tallies(label) == 1
    assert sb.callback_errors() == []


def test_the_stages_before_execute_do_nothing(frames):
    s, order = sb.Stream(), []
    for stage in range(EXECUTE):  # instantiate, prepare, initialize
        assert frames(_xla.CALLBACK, _xla.callback_token(order.append, stage), s.ptr, stage=stage) == (0, "")
    s.synchronize()
    assert order == []


def test_the_same_object_has_the_same_token_while_it_lives(frames):
    ev, other = sb.Event(), sb.Event()
    assert _xla.token(ev, "event") == _xla.token(ev, "event") != _xla.token(other, "event")
    fn = [].append
    assert _xla.callback_token(fn, 1) != _xla.callback_token(fn, 1)  # each placement its own call


@pytest.mark.parametrize("case", ["closed", "collected", "unknown token", "stream closed"])
def test_a_closed_or_collected_party_comes_back_to_xla_as_closederror(frames, case):
    s, ev = sb.Stream(), sb.Event()
    if case == "stream closed":
        other = sb.Stream()
        token, op = _xla.token(other, "stream"), _xla.WAIT
        other.close()
    else:
        token, op = _xla.token(ev, "event"), _xla.RECORD
    if case == "closed":
        ev.close()
    elif case == "collected":
        del ev
        gc.collect()
    elif case == "unknown token":
        token = 10**15
    code, message = frames(op, token, s.ptr)
    assert code == FAILED_PRECONDITION
    assert message.startswith("streambridge.ClosedError: ")


@pytest.mark.learned_layout
def test_a_garbage_stream_from_xla_is_refused_not_used(frames):
    ev = sb.Event()
    code, message = frames(_xla.RECORD, _xla.token(ev, "event"), 0x7F00DEAD0000)
    assert (code, message.split(":")[0]) == (INVALID_ARGUMENT, "streambridge.InvalidHandleError")


@pytest.mark.parametrize("op_kind,token_kind", [(ABSENT, INT64), (INT64, ABSENT), (INT32, INT64), (INT64, INT32)])
@pytest.mark.parametrize("stage", [INSTANTIATE, EXECUTE])
def test_attributes_that_are_not_streambridges_are_refused_at_every_stage(frames, op_kind, token_kind, stage):
    s = sb.Stream()
    code, message = frames(_xla.RECORD, 1, s.ptr, stage=stage, op_kind=op_kind, token_kind=token_kind)
    assert code == INVALID_ARGUMENT and "attributes are not streambridge's" in message


def test_an_unknown_op_is_a_value_error(frames):
    ev, s = sb.Event(), sb.Stream()
    code, message = frames(99, _xla.token(ev, "event"), s.ptr)
    assert (code, message.split(":")[0]) == (INVALID_ARGUMENT, "builtins.ValueError")


def test_no_stream_from_xla_says_the_calls_need_a_cuda_device(frames):
    ev = sb.Event()
    code, message = frames(_xla.RECORD, _xla.token(ev, "event"), None)
    assert code == UNIMPLEMENTED
    assert "orders work on JAX's CUDA streams: XLA gave this call none" in message


def test_a_callback_that_raises_is_the_callbacks_error_not_the_calls(frames, monkeypatch):
    monkeypatch.setattr(sys, "unraisablehook", lambda u: None)  # printed there too; taken here
    s = sb.Stream()
    sb.callback_errors()

    def boom(_):
        raise KeyError("from the callback")

    assert frames(_xla.CALLBACK, _xla.callback_token(boom, None), s.ptr) == (0, "")
    s.synchronize()
    assert [type(e) for e in sb.callback_errors()] == [KeyError]


def test_calls_from_many_threads_release_every_wrapper(frames):
    streams, events = _c.live_streams(), _c.live_events()
    s, ev = sb.Stream(), sb.Event()
    token = _xla.token(ev, "event")
    bad = []

    def work():
        for _ in range(200):
            for op in (_xla.RECORD, _xla.WAIT):
                code, message = frames(op, token, s.ptr)
                if code:
                    bad.append(message)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s.synchronize()
    assert bad == []
    s.close()
    ev.close()
    assert (_c.live_streams(), _c.live_events()) == (streams, events)


# -- against jaxlib's header, where jaxlib is installed --

def _jaxlib_include() -> Path:
    spec = importlib.util.find_spec("jaxlib")
    if spec is None or spec.origin is None:
        pytest.skip("SKIP: jaxlib is not installed here: the layout is held to its header where it is "
                    "(CI's JAX stage: make pytest-jax)")
    include = Path(spec.origin).parent / "include"
    assert (include / "xla/ffi/api/c_api.h").is_file(), f"jaxlib ships no xla/ffi/api/c_api.h under {include}"
    return include


def _holds(header: Path, include: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["gcc", "-std=c11", "-fsyntax-only", "-Wall", "-Werror", "-DSBX_HOLD", f"-I{include}",
                           "-include", "xla/ffi/api/c_api.h", str(header)], capture_output=True, text=True)


def test_what_the_handler_reads_of_xla_is_held_to_jaxlibs_header(tmp_path):
    include = _jaxlib_include()
    r = _holds(HEADER, include)
    assert r.returncode == 0, r.stderr
    # the hold bites: a field out of place, or a constant changed, does not compile
    text = HEADER.read_text()
    for before, after, says in [
        ("F(s, int, stage) F(s, struct sbx_Args, args)", "F(s, struct sbx_Args, args) F(s, int, stage)",
         "XLA_FFI_CallFrame.stage has moved"),
        ("C(SBX_S64, XLA_FFI_DataType_S64, 5)", "C(SBX_S64, XLA_FFI_DataType_S64, 6)", "XLA_FFI_DataType_S64 is not 6"),
        ("#define SBX_API_MAJOR 0", "#define SBX_API_MAJOR 1", "an API version this XLA does not take"),
    ]:
        assert before in text
        wrong = tmp_path / "xla_ffi.h"
        wrong.write_text(text.replace(before, after))
        r = _holds(wrong, include)
        assert r.returncode != 0 and says in r.stderr, (before, r.stderr)


# -- on JAX's CPU backend, where JAX is installed --

@pytest.fixture(scope="module")
def jax():
    if importlib.util.find_spec("jax") is None:
        pytest.skip("SKIP: JAX is not installed here (CI's JAX stage runs these: make pytest-jax)")
    import jax

    return jax


@pytest.fixture(scope="module")
def sbjax(jax):
    import streambridge.jax as sbjax

    return sbjax


def test_the_calls_go_in_the_dataflow_and_give_back_what_they_took(jax, sbjax):
    import jax.numpy as jnp

    ev, s = sb.Event(), sb.Stream()

    def f(tree):
        tree = sbjax.wait(tree, ev)
        tree = sbjax.wait(tree, s)
        tree = {k: v * 2 for k, v in tree.items()}
        tree = sbjax.launch_host_func(tree, print, "done")
        return sbjax.record(tree, ev)

    x = {"a": jnp.arange(4.0), "b": jnp.ones((2, 3), jnp.int32)}
    out = jax.eval_shape(f, x)
    assert {k: (v.shape, v.dtype) for k, v in out.items()} == {k: (v.shape, v.dtype) for k, v in x.items()}
    text = jax.jit(f).lower(x).as_text()
    assert text.count("stablehlo.custom_call @streambridge") == 4
    # XLA keeps every call through its optimizations, two alike callbacks included
    twice = jax.jit(lambda v: sbjax.launch_host_func(sbjax.launch_host_func(v, print, 1), print, 1))
    assert twice.lower(x["a"]).compile().as_text().count('custom_call_target="streambridge"') == 2
    assert jax.jit(f).lower(x).compile().as_text().count('custom_call_target="streambridge"') == 4
    # traced again with the same event and stream: the same program, so JAX's caches hold
    g = jax.jit(lambda v: sbjax.record(sbjax.wait(v, s), ev))
    assert g.lower(x["a"]).as_text() == jax.jit(lambda v: sbjax.record(sbjax.wait(v, s), ev)).lower(x["a"]).as_text()
    assert "custom_call @streambridge" in jax.jit(jax.vmap(lambda v: sbjax.record(v, ev))).lower(x["a"][None]).as_text()


def test_gradients_go_through_the_calls(jax, sbjax):
    import jax.numpy as jnp

    ev, s = sb.Event(), sb.Stream()

    def f(x):
        y = sbjax.record(sbjax.wait(x, s) ** 2, ev)
        return sbjax.launch_host_func(y, print, None).sum()

    x = jnp.arange(3.0)
    assert jax.eval_shape(jax.grad(f), x).shape == (3,)
    # with the value returned, the forward pass's three calls are kept; jax.grad returns no
    # value, and what no result depends on is dropped, the record and the callback with it
    assert jax.jit(jax.value_and_grad(f)).lower(x).as_text().count("custom_call @streambridge") == 3
    assert jax.jit(jax.grad(f)).lower(x).as_text().count("custom_call @streambridge") == 1  # the wait
    # (their values: interop_test/test_jax_gpu.py, where the calls run)


def test_on_jaxs_cpu_backend_a_call_fails_with_streambridges_error(jax, sbjax):
    import jax.numpy as jnp

    ev, cpu = sb.Event(), jax.devices("cpu")[0]  # JAX's CPU backend, where a GPU is JAX's default too
    f = jax.jit(lambda x: sbjax.record(x + 1, ev))
    x = jax.device_put(jnp.arange(3.0), cpu)
    with pytest.raises(Exception, match="streambridge.jax orders work on JAX's CUDA streams") as raised:
        jax.block_until_ready(f(x))
    assert type(raised.value).__module__.startswith("jax")
    with pytest.raises(Exception, match="CUDA streams"):  # again: the same error, no crash
        jax.block_until_ready(f(x))


def test_a_bad_event_or_stream_is_refused_when_traced(jax, sbjax):
    import jax.numpy as jnp

    x = jnp.arange(3.0)
    with pytest.raises(TypeError, match="not event-like"):
        jax.jit(lambda v: sbjax.record(v, "an event"))(x)
    with pytest.raises(sb.NotStreamLikeError):
        jax.jit(lambda v: sbjax.wait(v, object()))(x)
    with pytest.raises(TypeError, match="callable"):
        jax.jit(lambda v: sbjax.launch_host_func(v, 3))(x)
    with pytest.raises(TypeError, match="has none"):
        jax.jit(lambda v: sbjax.record({}, sb.Event()))(x)


@pytest.mark.learned_layout
def test_a_launch_is_refused_when_traced_where_its_arguments_are_wrong(jax, sbjax):
    import jax.numpy as jnp
    import numpy as np

    x = jnp.arange(4.0)
    with pytest.raises(TypeError, match="streambridge Kernel"):
        sbjax.launch(print, 1, 1, (x,), outputs=0)

    class NotCompiled(sb.Kernel):  # a Kernel in type only: the software driver compiles nothing
        def __init__(self):
            pass

    k = NotCompiled()
    with pytest.raises(ValueError, match="each a JAX array"):
        sbjax.launch(k, 1, 1, (x, 3), outputs=1)
    with pytest.raises(ValueError, match="twice"):
        sbjax.launch(k, 1, 1, (x,), outputs=(0, 0))
    with pytest.raises(TypeError, match="NumPy array"):
        sbjax.launch(k, 1, 1, (x, np.ones(3)), outputs=0)
    with pytest.raises(TypeError, match="grid"):
        sbjax.launch(k, "1", 1, (x,), outputs=0)
    text = jax.jit(lambda v: sbjax.launch(k, 1, 4, (v, np.float32(2), 4), outputs=0)).lower(x).as_text()
    assert "custom_call @streambridge" in text and "output_operand_aliases" in text


def test_a_garbage_handle_is_refused_when_traced(jax, sbjax):
    import jax.numpy as jnp

    with pytest.raises(sb.InvalidHandleError):
        jax.jit(lambda v: sbjax.record(v, 0x7F00DEAD0000))(jnp.arange(3.0))


def test_the_target_called_without_streambridges_attributes_says_so(jax, sbjax):
    import jax.numpy as jnp
    import numpy as np

    call = jax.ffi.ffi_call(sbjax.TARGET, jax.ShapeDtypeStruct((0,), np.uint8), has_side_effect=True)
    with pytest.raises(Exception, match="attributes are not streambridge's"):
        jax.block_until_ready(jax.jit(lambda v: call(v, op=np.int32(1)))(jnp.arange(3.0)))
