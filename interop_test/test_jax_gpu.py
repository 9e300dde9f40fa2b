"""streambridge.jax on the GPU: JAX's stream ordered with torch and CuPy both ways, with no
host sync, each against a race control (the same program without streambridge's ordering
reads stale data); several threads; bad events; XLA's command buffers.

JAX's slow work is a chain of matrix products, then x + K, exactly; torch's is a spin
kernel then a fill. A reader of JAX's output reads it through its address, with no sync of
JAX's (unsafe_buffer_pointer, then torch.as_tensor or a CuPy array over it), so that only
streambridge's ordering (or none, in the control) stands between the writer and the reader.
"""

import ast
import random
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _interop import framework, run_child

import streambridge as sb

jax = framework("jax")
torch = framework("torch")
cupy = framework("cupy")
import jax.numpy as jnp  # noqa: E402

import streambridge.jax as sbjax  # noqa: E402

N = 1 << 20
K = 3000.0  # what JAX's slow work adds


def _slow(x):
    """x + K, exactly, after some milliseconds of matrix products on JAX's stream (their sum
    is positive: the minimum adds 0.0). Not a loop: XLA runs a loop's condition on the host,
    which would wait for the GPU inside the call."""
    a = jnp.ones((8192, 8192), jnp.float32)
    m = a
    for _ in range(6):
        m = jnp.tanh((m @ a) * 1e-4)
    return x + K + jnp.minimum(m.sum(), 0.0)


class _Raw:
    """Device memory by address, for torch.as_tensor: the CUDA Array Interface v2 (no stream:
    nothing synchronized)."""

    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (ptr, False), "version": 2}


def _jax_gpu():
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.fail(f"JAX sees no GPU here: {jax.devices()}")


def _produce_then_read(ordered: bool, reader: str):
    """JAX computes y = x + K in x's donated buffer and records done after it; the reader
    copies y on its own stream, after waiting for done where ordered. The copy, and what y
    should be."""
    _jax_gpu()
    seed = float(random.randint(1, 1 << 12))
    done = sb.Event()
    produce = jax.jit(lambda x: sbjax.record(_slow(x), done) if ordered else _slow(x), donate_argnums=0)
    x = jnp.full(N, seed, jnp.float32)
    x.block_until_ready()
    ptr = x.unsafe_buffer_pointer()
    y = produce(x)
    if reader == "torch":
        side = torch.cuda.Stream()
        if ordered:
            sb.as_stream(side).wait_event(done)
        with torch.cuda.stream(side):
            got = torch.as_tensor(_Raw(ptr, N), device="cuda").clone()
        side.synchronize()
        got = got.cpu().numpy()
    else:
        side = cupy.cuda.Stream(non_blocking=True)
        if ordered:
            sb.as_stream(side).wait_event(done)
        mem = cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(ptr, N * 4, owner=None), 0)
        with side:
            got = cupy.ndarray((N,), cupy.float32, mem).copy()
        side.synchronize()
        got = cupy.asnumpy(got)
    assert y.unsafe_buffer_pointer() == ptr, "XLA did not give y x's donated buffer: the test reads the wrong memory"
    np.testing.assert_array_equal(np.asarray(y), seed + K)
    return got, seed + K


@pytest.mark.parametrize("reader", ["torch", "cupy"])
def test_a_reader_after_jaxs_record_sees_jaxs_result(reader):
    got, want = _produce_then_read(True, reader)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("reader", ["torch", "cupy"])
def test_race_control_without_the_record_the_reader_sees_stale_data(reader):
    got, want = _produce_then_read(False, reader)
    assert (got != want).any(), "the control did not race: the test above would pass without streambridge"


def _torch_writes_then_jax_reads(ordered: bool, how: str):
    """torch fills t on a side stream after a 50 ms spin; JAX reads t (imported once, zero
    copy) after waiting for the side stream's event (or the stream itself) where ordered."""
    _jax_gpu()
    t = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    xj = jax.dlpack.from_dlpack(t)
    assert xj.unsafe_buffer_pointer() == t.data_ptr(), "JAX copied torch's tensor: nothing to order"
    seed = float(random.randint(1, 1 << 12))
    side = torch.cuda.Stream()
    s = sb.as_stream(side)
    ready = sb.Event()
    waited_for = ready if how == "event" else s
    consume = jax.jit(lambda v: (sbjax.wait(v, waited_for) if ordered else v) * 2.0)
    consume(xj).block_until_ready()  # compiled before the race
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # ~50 ms
        t.fill_(seed)
    s.record(ready)
    got = np.asarray(consume(xj))
    side.synchronize()
    return got, seed * 2


@pytest.mark.parametrize("how", ["event", "stream"])
def test_jax_after_waiting_for_torch_sees_torchs_data(how):
    got, want = _torch_writes_then_jax_reads(True, how)
    np.testing.assert_array_equal(got, want)


def test_race_control_jax_without_the_wait_sees_stale_data():
    got, want = _torch_writes_then_jax_reads(False, "event")
    assert (got != want).any(), "the control did not race: the test above would pass without streambridge"


def test_a_host_callback_runs_in_jaxs_stream_order():
    _jax_gpu()
    seen, after = [], sb.Event()
    f = jax.jit(lambda x: sbjax.record(sbjax.launch_host_func(_slow(x), seen.append, "after the loop"), after))
    x = jnp.zeros(N, jnp.float32)
    y = f(x)
    assert seen == []  # JAX's loop is still running: the callback waits for it on the GPU
    after.synchronize()
    assert seen == ["after the loop"]
    np.testing.assert_array_equal(np.asarray(y), K)


def test_a_go_host_function_runs_in_jaxs_stream_order():
    from streambridge.ext import gokernels

    _jax_gpu()
    label, after = f"jax {random.random()}", sb.Event()
    f = jax.jit(lambda x: sbjax.record(sbjax.launch_host_func(_slow(x), gokernels.Tally, label), after))
    y = f(jnp.zeros(N, jnp.float32))
    assert gokernels.Tallies(label) == 0  # JAX's work is still running
    after.synchronize()
    assert gokernels.Tallies(label) == 1
    np.testing.assert_array_equal(np.asarray(y), K)


THREADS = textwrap.dedent("""
    import os, sys, threading
    os.environ["XLA_FLAGS"] = "--xla_gpu_enable_command_buffer="
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    import test_jax_gpu as t
    errors = []
    def worker(i):
        try:
            for _ in range(5):
                got, want = t._produce_then_read(True, "torch")
                np.testing.assert_array_equal(got, want)
                got, want = t._torch_writes_then_jax_reads(True, "event")
                np.testing.assert_array_equal(got, want)
        except BaseException as e:
            errors.append(f"thread {i}: {type(e).__name__}: {e}")
    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=150)
    print("hung" if any(th.is_alive() for th in threads) else "errors", errors, flush=True)
    os._exit(0)
""")


def test_threads_each_ordering_their_own_jax_and_torch_work():
    """Four threads, each ordering its own JAX and torch work both ways, in a child with
    XLA's command buffers off. XLA captures those in global mode: while it does, a torch
    call on another thread that CUDA forbids during such a capture (a device sync, an
    allocation) fails with torch's "operation not permitted when stream is capturing". That
    is between torch and XLA (docs/jax.md, "Threads"): once in 64 rounds of this body on an
    H200. The same calls with command buffers on, on one thread: the tests above, and the
    command-buffer test below."""
    _jax_gpu()
    code, out, err = run_child(THREADS, Path(__file__).resolve().parent, timeout=240)
    assert code == 0, err[-3000:]
    assert "errors []" in out, out + err[-3000:]


WHILE_XLA_COMPILES = textwrap.dedent("""
    import faulthandler, os, sys, threading, time
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax, jax.numpy as jnp, torch
    import streambridge as sb
    seconds = float(sys.argv[1])
    faulthandler.dump_traceback_later(seconds + 30, exit=True)  # a hang: every thread's stack, and out
    stop, counts, errors = threading.Event(), {"compiles": 0, "rounds": 0}, []
    def compiles():
        k = 0
        while not stop.is_set():
            k += 1
            f = jax.jit(lambda x, k=k: jnp.tanh(((x @ x) * 1e-3 + k) @ x).sum())
            f(jnp.ones((1024, 1024)) * k).block_until_ready()
            counts["compiles"] += 1
    def ours():
        theirs = torch.cuda.Stream()
        while not stop.is_set():
            try:
                s, s2, e = sb.Stream(), sb.Stream(non_blocking=True), sb.Event()
                s.record(e); s2.wait_event(e); s2.wait(s); e.query(); s.query()
                e.synchronize(); s.synchronize(); s2.synchronize()
                t = sb.as_stream(theirs); t.wait_event(e); t.synchronize()
                e.close(); s2.close(); s.close()
                counts["rounds"] += 1
            except Exception as x:  # any error is the test's failure, printed
                errors.append(repr(x))
    threads = [threading.Thread(target=f) for f in (compiles, ours, ours)]
    for th in threads:
        th.start()
    time.sleep(seconds)
    stop.set()
    for th in threads:
        th.join()
    print(counts, "errors", errors[:3], flush=True)
""")


def test_calls_and_closes_go_on_while_xla_compiles_on_another_thread():
    """Every kind of streambridge call, from two threads, while a third compiles and runs
    one new JAX function after another: no error and no hang (a hang prints every thread's
    stack and fails). Not with Python host callbacks: those, anyone's, hang beside JAX's
    dispatch on another thread (docs/jax.md, "Threads": CuPy's launch_host_func hung this
    program too, on an H200), which no call of ours can prevent."""
    _jax_gpu()
    code, out, err = run_child(WHILE_XLA_COMPILES, 10, timeout=120)
    assert code == 0 and "errors []" in out, out + err[-4000:]
    counts = ast.literal_eval(out.split(" errors")[0])
    assert counts["compiles"] > 0 and counts["rounds"] > 0, out


@pytest.mark.parametrize("case", ["closed", "collected", "garbage"])
def test_a_bad_event_is_a_typed_error_and_jax_goes_on(case):
    _jax_gpu()
    x = jnp.arange(8.0)
    if case == "garbage":
        with pytest.raises(sb.InvalidHandleError):
            jax.jit(lambda v: sbjax.record(v, 0x7F00DEAD0000))(x)
    else:
        ev = sb.Event()
        f = jax.jit(lambda v: sbjax.record(v + 1, ev))
        if case == "closed":
            ev.close()
        else:
            f = jax.jit(lambda v: sbjax.record(v + 1, sb.Event()))  # collected once traced
        with pytest.raises(Exception, match="streambridge.ClosedError: ") as raised:
            jax.block_until_ready(f(x))
        assert type(raised.value).__module__.startswith("jax")
    ok = sb.Event()
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: sbjax.record(v * 3, ok))(x)), np.arange(8.0) * 3)
    ok.synchronize()


COMMAND_BUFFERS = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = sys.argv[1]
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax, jax.numpy as jnp, numpy as np, torch
    import streambridge as sb, streambridge.jax as sbjax
    N, seen, done, ready = 1 << 20, [], sb.Event(), sb.Event()
    # the calls inside a loop's body and between fusions XLA would run as CUDA graphs
    def body(i, v):
        v = sbjax.launch_host_func(jnp.sin(v) * 0 + v + 1.0, seen.append, 1)
        return sbjax.record(v, done)
    f = jax.jit(lambda x: jax.lax.fori_loop(0, 50, body, sbjax.wait(x, ready) * 1.0))
    t = torch.zeros(N, device="cuda"); torch.cuda.synchronize()
    xj = jax.dlpack.from_dlpack(t)
    f(xj).block_until_ready(); done.synchronize(); seen.clear()
    side = torch.cuda.Stream(); s = sb.as_stream(side)
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000); t.fill_(7.0)
    s.record(ready)
    y = np.asarray(f(xj)); done.synchronize()
    print("values", bool((y == 57.0).all()), "callbacks", len(seen))
""")


@pytest.mark.parametrize("flags", ["", "--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL,WHILE,CONDITIONAL "
                                       "--xla_gpu_graph_min_graph_size=1"])
def test_in_a_function_xla_runs_as_cuda_graphs_the_calls_run_every_time(flags):
    """The handler is not command-buffer compatible: XLA runs each call itself, between the
    graphs it makes of the rest, so none is captured once and skipped on replay."""
    code, out, err = run_child(COMMAND_BUFFERS, flags)
    assert code == 0, err[-3000:]
    assert "values True callbacks 50" in out, out + err[-3000:]


def test_a_wait_gives_back_every_value():
    """Bit for bit, but a NaN's payload: the GPU's add gives its canonical NaN."""
    _jax_gpu()
    ev = sb.Event()
    torch.cuda.current_stream().synchronize()
    sb.as_stream(torch.cuda.current_stream()).record(ev)
    tree = {
        "f32": jnp.array([-0.0, 0.0, np.nan, -np.inf, 1.5, -7.25], jnp.float32),
        "bf16": jnp.array([-0.0, 3.0], jnp.bfloat16),
        "i32": jnp.array([-5, 0, 2**31 - 1], jnp.int32),
        "u8": jnp.array([0, 255], jnp.uint8),
        "bool": jnp.array([True, False]),
        "c64": jnp.array([complex(-0.0, -0.0), complex(1, np.nan)], jnp.complex64),
    }
    out = jax.jit(lambda t: sbjax.wait(t, ev))(tree)
    for k in tree:
        a, b = np.asarray(tree[k]), np.asarray(out[k])
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=k != "bool"), k
        if a.dtype.kind in "fc":  # and every zero's sign, in both parts
            parts = (a.real, b.real), (a.imag, b.imag)
            assert all((np.signbit(p) == np.signbit(q)).all() for p, q in parts), k
        else:
            assert a.tobytes() == b.tobytes(), k


def test_two_alike_callbacks_both_run():
    _jax_gpu()
    seen, done = [], sb.Event()
    f = jax.jit(lambda v: sbjax.record(sbjax.launch_host_func(sbjax.launch_host_func(v, seen.append, 1),
                                                               seen.append, 1), done))
    f(jnp.arange(4.0)).block_until_ready()
    done.synchronize()
    assert seen == [1, 1]


def test_the_example_pipeline_matches_numpy():
    example = Path(__file__).resolve().parent.parent / "examples" / "jax_pipeline.py"
    code, out, err = run_child(example.read_text())
    assert code == 0, out + err[-3000:]
    assert "all equal" in out and "still waiting then: True" in out, out


def test_gradients_go_through_the_calls_and_the_calls_run():
    _jax_gpu()
    ev, seen = sb.Event(), []

    def f(x):
        y = sbjax.record(x ** 2, ev)
        return sbjax.launch_host_func(y, seen.append, "forward").sum()

    x = jnp.arange(4.0)
    value, g = jax.jit(jax.value_and_grad(f))(x)
    ev.synchronize()
    np.testing.assert_array_equal(np.asarray(g), 2 * np.arange(4.0))
    assert float(value) == 14.0
    torch.cuda.synchronize()
    assert seen == ["forward"]


SCALE = r"""
extern "C" __global__ void scale_add(float *y, const float *x, float a, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_a_kernel_streambridge_compiled_runs_on_jaxs_stream_on_jax_arrays():
    """y = a*x + y by a kernel compiled through the Go core, launched on JAX's stream inside a
    jitted function, on x computed just before (JAX's slow work first): in order, checked
    against NumPy; y given in is left as it was (XLA copied it: an argument)."""
    _jax_gpu()
    kernel = sb.Module(SCALE).get_kernel("scale_add")
    n = N

    @jax.jit
    def f(x, y):
        x = _slow(x)  # x + K, after the matrix products
        return sbjax.launch(kernel, (n + 255) // 256, 256, (y, x, np.float32(3.0), n), outputs=0)

    x, y = jnp.full(n, 1.0, jnp.float32), jnp.arange(n, dtype=jnp.float32)
    out = f(x, y)
    np.testing.assert_array_equal(np.asarray(out), 3.0 * (1.0 + K) + np.arange(n, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(y), np.arange(n, dtype=np.float32))
    closed = sb.Module(SCALE)
    k2 = closed.get_kernel("scale_add")
    g = jax.jit(lambda v: sbjax.launch(k2, 1, 1, (v, v, np.float32(1), 0), outputs=0))
    closed.close()
    with pytest.raises(Exception, match="streambridge.ClosedError: "):
        jax.block_until_ready(g(jnp.ones(4)))
