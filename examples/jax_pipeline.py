"""JAX produces, a kernel the Go core compiled transforms, CuPy consumes: each on its own
stream, ordered only by streambridge, with no host sync.

    python3 examples/jax_pipeline.py        # with the streambridge wheel, JAX, CuPy and a GPU

JAX computes y = 2x + 1 in a jitted function, behind some milliseconds of matrix products
(a head start, so that a missing wait would show), and records an event on its own stream
after y (streambridge.jax.record, inside the function). A streambridge stream waits for
that event and runs z = a*y + b, compiled from CUDA C++ by NVRTC through the Go core,
reading y where JAX left it; CuPy's stream waits for that stream and computes sqrt(z). The
host enqueues everything, checks that CuPy's stream is still waiting, and only then
synchronizes; the result is checked against NumPy. interop_test/test_jax_gpu.py runs it.

Without a GPU, JAX, or CuPy it says what is missing and exits with status 0: JAX's CPU
backend has no CUDA stream to order.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX shares the GPU with CuPy

N = 1 << 22
A, B = 3.0, 1.0

TRANSFORM = r"""
extern "C" __global__ void axpb(float *z, const float *y, float a, float b, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) z[i] = a * y[i] + b;
}
"""


def missing() -> str:
    """Empty if the pipeline can run here, else what it needs."""
    lacking = [name for name in ("jax", "cupy") if importlib.util.find_spec(name) is None]
    if lacking:
        return f"this Python has no {' and no '.join(lacking)}"
    import jax

    if not any(d.platform == "gpu" for d in jax.devices()):
        return f"JAX sees no GPU ({jax.devices()})"
    import streambridge

    try:
        if streambridge.driver() != "cuda":
            return f"streambridge runs on the {streambridge.driver()} driver"
    except streambridge.NoDriverError as e:
        return str(e)
    return ""


def main() -> None:
    why = missing()
    if why:
        print(f"the JAX pipeline needs a GPU with JAX and CuPy: {why}")
        return
    import cupy
    import jax
    import jax.numpy as jnp
    import numpy

    import streambridge as sb
    import streambridge.jax as sbjax

    produced = sb.Event()
    kernel = sb.Module(TRANSFORM).get_kernel("axpb")

    @jax.jit
    def produce(x):
        m = jnp.ones((8192, 8192), jnp.float32)
        for _ in range(4):  # the head start; the sum is positive, so the minimum adds 0
            m = jnp.tanh((m @ m) * 1e-4)
        y = 2 * x + 1 + jnp.minimum(m.sum(), 0.0)
        return sbjax.record(y, produced)  # on JAX's stream, after y

    transform_s = sb.Stream(non_blocking=True)
    consume_s = cupy.cuda.Stream(non_blocking=True)
    x = jnp.linspace(0, 1, N, dtype=jnp.float32)
    z = cupy.empty(N, cupy.float32)
    with consume_s:  # CuPy compiles its kernel on first use: before the clock starts
        cupy.sqrt(cupy.ones(1, cupy.float32))
    produce(x).block_until_ready()  # compiled, and run once
    consume_s.synchronize()

    t0 = time.perf_counter()
    y = produce(x)  # returns at once; JAX's stream is still working
    transform_s.wait_event(produced)
    kernel((N + 255) // 256, 256, (z.data.ptr, y.unsafe_buffer_pointer(), numpy.float32(A), numpy.float32(B), N),
           stream=transform_s)
    c = sb.as_stream(consume_s)
    c.wait_stream(transform_s)
    with consume_s:
        out = cupy.sqrt(z)
    enqueued = time.perf_counter() - t0
    waiting = not consume_s.done
    consume_s.synchronize()
    total = time.perf_counter() - t0

    ref = numpy.sqrt(A * (2 * numpy.linspace(0, 1, N, dtype=numpy.float32) + 1) + B)
    ok = numpy.allclose(cupy.asnumpy(out), ref, rtol=1e-6)
    print(f"driver {sb.driver()}, JAX {jax.__version__} on {jax.devices()[0].device_kind}; {N} elements")
    print(f"  enqueued in {enqueued * 1e3:.3f} ms; CuPy's stream still waiting then: {waiting}; "
          f"all done in {total * 1e3:.1f} ms")
    print(f"  checked {N} results against NumPy on the CPU: {'all equal' if ok else 'MISMATCH'}")
    del y  # JAX's buffer: kept until the consumer is done with it
    if not ok or not waiting:
        sys.exit(1)


if __name__ == "__main__":
    main()
