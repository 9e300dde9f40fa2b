"""JAX as a stream party: order JAX's work with PyTorch, CuPy, cuda.core and Go on the GPU,
with no host sync. Import it where JAX is installed.

JAX has no Python API for its CUDA stream. These functions go inside jitted code; each
returns what it was given and places one call in the function's dataflow, which XLA runs on
JAX's stream when it reaches it (through XLA's FFI: python/native/xla.inc)::

    import jax, jax.numpy as jnp
    import streambridge as sb, streambridge.jax as sbjax

    done, ready = sb.Event(), sb.Event()  # made once, used every step

    @jax.jit
    def step(x):
        x = sbjax.wait(x, ready)  # JAX's stream waits for what torch recorded first
        y = jnp.sin(x) * 2
        return sbjax.record(y, done)  # done is recorded on JAX's stream after y

    torch_side.record(ready)  # torch_side = sb.as_stream(torch.cuda.current_stream())
    y = step(x)
    torch_side.wait_event(done)  # torch's later work runs after JAX's y: no host sync

- :func:`record` records an event on JAX's stream after its argument is computed: any
  framework, or Go, then orders after it (``wait_event``, ``Stream.wait``, ``to_torch()``).
- :func:`wait` makes JAX's stream wait for an event, or for a stream's work so far, before
  what it returns is used: JAX consumes what torch, CuPy or a Go kernel produced.
- :func:`launch_host_func` runs a host callback, Python or Go, in JAX's stream order.
- :func:`launch` launches a kernel streambridge compiled on JAX's stream, with JAX arrays as
  its arguments, and gives back those it writes.

The event or stream is fixed when the function is traced (it is part of the compiled
program): make it once and give the same one each call, as CUDA programs reuse events; a
new one each call compiles the function again. A streambridge event or stream is kept
weakly: closed or collected, the call fails with JAX's error carrying streambridge's
(``ClosedError: ...``), as any call on it would; a wrong-device or invalid one the same.

XLA never captures these calls into a CUDA graph (the handler says it is not command-buffer
compatible): where XLA runs the work around them as graphs, they run between (docs/jax.md).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, TypeVar, Union

import jax
import jax.numpy as jnp
import numpy as np

from . import _xla
from ._core import core as _c
from ._event import Event, _event_handle
from ._kernel import Kernel, argument_list, launch_shape

__all__ = ["launch", "launch_host_func", "record", "wait", "TARGET"]

#: The name of streambridge's FFI target, registered for JAX's CUDA and CPU platforms.
TARGET = "streambridge"

T = TypeVar("T")


def _register() -> None:
    """Registers the core's handler with XLA (at import: Python imports a module once); XLA
    asks its API version then, and refuses a version it does not take (raised here as
    RuntimeError, saying which)."""
    handler = _c.xla_handler()
    for platform in ("CUDA", "cpu"):
        try:
            jax.ffi.register_ffi_target(TARGET, {"instantiate": handler, "execute": handler}, platform=platform)
        except Exception as e:  # XLA's own error type, which jaxlib does not export the same way in every version
            raise RuntimeError(f"streambridge.jax cannot register its handler with this JAX ({jax.__version__}) "
                               f"for {platform}: {e}") from e


def _place(op: int, token: int, x: T, after: bool) -> T:
    """One call of op in the dataflow of x's arrays: after them (a record, a callback), or
    before what is returned is used (a wait)."""
    leaves, tree = jax.tree_util.tree_flatten(x)
    if not leaves:
        raise TypeError("streambridge.jax's calls take an array, or a pytree of arrays, to place the call after "
                        "or before; this one has none")
    leaves = [jnp.asarray(leaf) for leaf in leaves]
    attrs = {"op": np.int64(op), "token": np.int64(token)}
    # No side effect is declared (a JAX effect leaves jit's fast dispatch path, some 60 us a
    # call): the call is kept because what is returned is its result.
    if after:
        # The arrays go through the call, aliased (in place: XLA copies one first only where
        # it must keep the original, a function's argument or a value used again).
        call = jax.ffi.ffi_call(TARGET, [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in leaves],
                                input_output_aliases={i: i for i in range(len(leaves))}, vmap_method="broadcast_all")

        def values(*vs: Any) -> Any:
            return tuple(call(*vs, **attrs))

        def tangents(primals: Any, tangents: Any) -> Any:  # the values pass unchanged: so do tangents
            return through(*primals), tuple(tangents)

        through: Any = jax.custom_jvp(values)
        through.defjvp(tangents)
        leaves = list(through(*leaves))
    else:
        # A wait cannot take the arrays through it: XLA would copy an argument before the call,
        # reading it before the wait. The call gives back -0.0 (its operand, aliased), and
        # each array returned is the array plus that: the same values (-0.0 kept; a NaN stays
        # a NaN, with the GPU's own payload), computed after the call (fused into the array's
        # next use, where that is elementwise).
        call = jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct((), np.float32), input_output_aliases={0: 0},
                                vmap_method="broadcast_all")
        zero = call(jnp.float32(-0.0), **attrs)
        leaves = [_plus(v, zero) for v in leaves]
    out: T = jax.tree_util.tree_unflatten(tree, leaves)
    return out


def _plus(v: Any, zero: Any) -> Any:
    """v, computed after zero (-0.0): v + -0.0 is v for every float, -0.0 included (a NaN
    stays a NaN)."""
    if v.dtype == np.bool_:
        return v | zero.astype(np.bool_)
    if jnp.issubdtype(v.dtype, jnp.complexfloating):
        return v + jax.lax.complex(zero, zero).astype(v.dtype)
    return v + zero.astype(v.dtype)


def record(x: T, event: Any) -> T:
    """``x``, with ``event`` recorded on JAX's stream after ``x`` is computed. ``event`` is a
    streambridge Event, or anything :func:`streambridge.as_event` takes (read now)."""
    return _place(_xla.RECORD, _xla.token(event, "event"), x, after=True)


def wait(x: T, event_or_stream: Any) -> T:
    """``x``, used only after JAX's stream waits for ``event_or_stream``: an event (as
    :meth:`Stream.wait_event`), or a stream (as :meth:`Stream.wait_stream`: its work enqueued
    before the jitted call runs), either streambridge's or anything :func:`as_event` or
    :func:`as_stream` takes. Use what it returns: work on the ``x`` given is not ordered."""
    is_event = isinstance(event_or_stream, Event) or _event_handle(event_or_stream) is not None
    return _place(_xla.WAIT, _xla.token(event_or_stream, "event" if is_event else "stream"), x, after=False)


def launch(kernel: Any, grid: Any, block: Any, args: Sequence[Any], *, outputs: Union[int, Sequence[int]],
           shared_mem: int = 0) -> Any:
    """Launch ``kernel`` (a streambridge :class:`Kernel`, compiled by the Go core) on JAX's
    stream, in the dataflow: after the JAX arrays among ``args`` are computed, each passed
    as its device address; the other arguments as :meth:`Kernel.__call__` takes them (ints,
    floats, NumPy scalars). ``outputs`` names, by position in ``args``, the arrays the
    kernel writes: they are given back (one array for an int, else a tuple), written in
    place of the arrays given (XLA copies one first where it must keep the original). The
    kernel must write no other argument. Not under ``jax.vmap`` or ``jax.grad``."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"launch takes a streambridge Kernel, not {type(kernel).__name__}")
    g, b = launch_shape(grid, block, shared_mem)
    argument_list(args)
    one = isinstance(outputs, int)
    written = [outputs] if isinstance(outputs, int) else list(outputs)
    operands: list[Any] = []
    plan: list[Any] = []
    for a in args:
        if isinstance(a, jax.Array):
            plan.append(_xla.Operand(len(operands)))
            operands.append(a)
        elif isinstance(a, np.ndarray) and a.ndim > 0:
            raise TypeError("a NumPy array is no kernel argument here: pass a JAX array (jnp.asarray)")
        else:
            plan.append(a)
    outs = []
    for i in written:
        if type(i) is not int or not 0 <= i < len(args) or not isinstance(plan[i], _xla.Operand):
            raise ValueError(f"outputs names arguments by position, each a JAX array; {i!r} is not one")
        outs.append(plan[i].index)
    if len(set(outs)) != len(outs):
        raise ValueError("outputs names an argument twice")
    call = jax.ffi.ffi_call(TARGET, [jax.ShapeDtypeStruct(operands[k].shape, operands[k].dtype) for k in outs],
                            input_output_aliases={k: j for j, k in enumerate(outs)})
    token = _xla.launch_token(kernel, g, b, shared_mem, tuple(plan))
    results = call(*operands, op=np.int64(_xla.LAUNCH), token=np.int64(token))
    return results[0] if one else tuple(results)


def launch_host_func(x: T, fn: Callable[[Any], Any], arg: Optional[Any] = None) -> T:
    """``x``, with ``fn(arg)`` called on the driver's thread after ``x`` is computed on JAX's
    stream, as :meth:`Stream.launch_host_func` calls it: any Python callable, or a Go function
    exported with streambridge (``streambridge.ext.gokernels.Tally`` is one). ``fn`` and ``arg`` are kept
    for the process; each placement is its own call (tracing the function again compiles it
    again)."""
    return _place(_xla.CALLBACK, _xla.callback_token(fn, arg), x, after=True)


_register()  # at import: a JAX whose XLA does not take the handler's API version fails here
