"""What a call that :mod:`streambridge.jax` placed in a jitted function does when XLA runs
it; no JAX here (the core names :func:`run`, python.inc, and this module imports anywhere).

The call carries two int64 attributes, fixed when the function is traced: its op and a
token, a number standing for the event, stream or callback it was given (:func:`token`,
:func:`callback_token`). The core's handler (python/native/xla.inc) calls :func:`run` with
them and JAX's CUstream; what run raises reaches the user as JAX's error, with the
exception's name and message.

A streambridge event or stream given is kept weakly: closed or collected, the call raises
:class:`ClosedError`, as any call on it would. A wrapper made here of another framework's
object (:func:`as_event`, :func:`as_stream`) and a callback with its argument are kept for
the process, as the compiled function that names them is.
"""

from __future__ import annotations

import functools
import itertools
import threading
import weakref
from typing import Any, Callable, Dict, Optional, Tuple

from ._errors import ClosedError
from ._event import Event, as_event
from ._stream import ExternalStream, _BaseStream, as_stream

#: The ops (the ``op`` attribute).
RECORD, WAIT, CALLBACK, LAUNCH = 1, 2, 3, 4


class Operand:
    """In a launch's arguments: the address of the call's operand ``index``."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

# token -> a weak reference to a streambridge object, (a wrapper made here,), or (callback, arg)
_parties: Dict[int, Any] = {}
_by_id: Dict[int, int] = {}  # id(object) -> its token, while it lives
_next = itertools.count(1)
_lock = threading.Lock()


def _forget(token: int, key: int, _: Any) -> None:
    """A weakly kept object was collected (a weakref callback: no lock, single dict operations)."""
    _parties.pop(token, None)
    if _by_id.get(key) == token:
        _by_id.pop(key, None)


def token(obj: Any, kind: str) -> int:
    """The token of an event (kind "event") or a stream ("stream") given to a call: the
    same for the same object while it lives, so that tracing again compiles the same
    program. Anything else event- or stream-like is read now, as :func:`as_event` or
    :func:`as_stream` reads it (a bad one raises here, at trace time), and its wrapper kept."""
    if kind == "event":
        ours = isinstance(obj, Event)
        party = obj if ours else as_event(obj)
    else:
        ours = isinstance(obj, _BaseStream)
        party = obj if ours else as_stream(obj)
    with _lock:
        known = _by_id.get(id(obj))
        kept = _parties.get(known) if known is not None else None
        if known is not None and isinstance(kept, weakref.ref) and kept() is party:
            return known
        t = next(_next)
        if ours:
            _parties[t] = weakref.ref(obj, functools.partial(_forget, t, id(obj)))
            _by_id[id(obj)] = t
        else:
            _parties[t] = (party,)  # a new wrapper each trace: kept, never looked up by id
        return t


def callback_token(fn: Callable[[Any], Any], arg: Any) -> int:
    """A new token for a host callback ``fn(arg)``, both kept for the process: each placement
    its own, so that XLA never merges two alike into one call."""
    if not callable(fn):
        raise TypeError(f"the callback must be callable, not {type(fn).__name__}")
    t = next(_next)
    _parties[t] = (fn, arg)
    return t


def launch_token(kernel: Any, grid: Any, block: Any, shared_mem: int, args: Tuple[Any, ...]) -> int:
    """A new token for a kernel launch on the call's operands: ``args`` as the kernel takes
    them, an :class:`Operand` where an operand's address goes. Kept for the process."""
    t = next(_next)
    _parties[t] = (kernel, grid, block, shared_mem, args)
    return t


def _collected(token: int) -> ClosedError:
    return ClosedError(f"the event or stream this jitted call was given (token {token}) was collected: keep a "
                       "reference to it for as long as the function may run")


def run(op: int, token: int, handle: int, buffers: Tuple[Optional[int], ...] = ()) -> None:
    """The call op of token, on the stream handle (JAX's, from XLA's call frame, vouched
    for by XLA: proven as any where the layout is known), with the addresses of the call's
    operands. Raises as the one path raises."""
    party = _parties.get(token)
    if party is None:
        raise _collected(token)
    stream = ExternalStream(handle, vouched=True)
    try:
        if op == CALLBACK:
            fn, arg = party
            stream.launch_host_func(fn, arg)
            return
        if op == LAUNCH:
            kernel, grid, block, shared_mem, args = party
            kernel(grid, block, tuple(buffers[a.index] if isinstance(a, Operand) else a for a in args),
                   shared_mem=shared_mem, stream=stream)
            return
        obj: Any = party() if isinstance(party, weakref.ref) else party[0]
        if obj is None:
            raise _collected(token)
        if op == RECORD:
            obj.record(stream)
        elif op == WAIT:
            stream.wait(obj)
        else:
            raise ValueError(f"op {op} is not one of streambridge.jax's")
    finally:
        stream.close()
