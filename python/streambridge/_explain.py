"""explain(obj): what streambridge sees in any framework's stream or event, and what it would
refuse, as text a user can read; report(): the driver, the devices and the frameworks'
current streams (``python -m streambridge``). Nothing here raises for what it is given: an
answer that cannot be had is written down with the reason."""

from __future__ import annotations

import importlib.util
from typing import Any, Callable, List, Optional, Tuple

from . import _core, _tables
from ._device import as_index
from ._event import Event, _event_handle, as_event
from ._stream import _BaseStream, as_stream, current_stream

_FRAMEWORKS = {"torch": "PyTorch", "cupy": "CuPy", "cupy_backends": "CuPy", "cuda": "cuda.core", "numba": "Numba",
               "jax": "JAX", "jaxlib": "JAX", "streambridge": "streambridge"}


def _qualified(obj: Any) -> str:
    """The module and name of obj's class, whatever the class says its module is."""
    module = type(obj).__module__
    return f"{module}.{type(obj).__name__}" if isinstance(module, str) and module else type(obj).__name__


def _framework(obj: Any) -> str:
    module = str(type(obj).__module__ or "")  # a class may set it to None, or to anything
    unknown = f"{module or 'a class with no module'} (not a framework streambridge knows)"
    return _FRAMEWORKS.get(module.split(".")[0], unknown)


def _ask(what: Callable[[], Any]) -> Tuple[Any, Optional[str]]:
    """what(), or the reason it failed."""
    try:
        return what(), None
    except Exception as e:  # noqa: BLE001 - written into the report, never raised
        return None, f"{type(e).__name__}: {e}"


def explain(obj: Any) -> str:
    """A report on any stream-like or event-like object of any framework: its handle,
    device, context, owner, blocking flag, priority, stream id, capture status and pending
    work, and what streambridge would refuse and why. It never raises for what it is given:
    a garbage handle or an object that is neither is reported as such.

    >>> import os; _ = os.environ.setdefault("STREAMBRIDGE_DRIVER", "sim")
    >>> import streambridge as sb
    >>> print(sb.explain(0xDEADBEEF).splitlines()[1])
      refused     InvalidHandleError: stream check: CUDA_ERROR_INVALID_HANDLE: invalid resource handle (0xdeadbeef is not a live CUDA stream; it was not passed to the driver)
    """
    if isinstance(obj, Event):
        return _explain_event(obj, "streambridge.Event: " + (
            "another library's event, borrowed: never destroyed by streambridge" if obj.borrowed else
            "an event of streambridge, created here, destroyed on close() or collection"))
    handle, why = _ask(lambda: _event_handle(obj))
    if handle is not None or why is not None:
        title = f"{_qualified(obj)}: an event of {_framework(obj)}"
        e, why = _ask(lambda: as_event(obj))
        if e is None:
            return f"{title}\n  refused     {why}"
        return _explain_event(e, f"{title}, borrowed by as_event: never destroyed by streambridge")
    return _explain_stream(obj)


def _explain_stream(obj: Any) -> str:
    kind = "a bare handle" if as_index(obj) is not None else f"an object of {_framework(obj)}"
    title = f"{_qualified(obj)}: {kind}"
    s, why = _ask(lambda: as_stream(obj))
    if s is None:
        return f"{title}\n  refused     {why}"
    lines = [f"{title}, a stream"]

    def row(name: str, text: str) -> None:
        lines.append(f"  {name:<11} {text}")

    special = s.ptr <= _tables.MAX_SPECIAL_STREAM
    row("handle", f"{s.ptr:#x}" + (f": {_tables.SPECIAL_STREAMS[s.ptr]} of device {s.device_id}" if special else ""))
    row("device", f"{s.device_id}, in its primary context or a green context of it")
    if isinstance(obj, _BaseStream):
        owner = ("streambridge: created here, destroyed on close() or collection" if s._owned
                 else "borrowed: streambridge never destroys it")
        if s._owner is not None:
            owner += f"; kept alive with its {_framework(s._owner)} object"
    elif as_index(obj) is not None:
        owner = ("the CUDA runtime's: always there" if special else
                 "unknown: a bare handle, which nothing keeps alive; every use checks it is still the stream "
                 "it was (its stream id)")
    else:
        owner = f"{_framework(obj)}: borrowed and kept alive with the streambridge stream"
    row("owner", owner)
    if not s._open:
        row("state", "closed: every call on it raises ClosedError")
        return "\n".join(lines)
    _, why = _ask(s._verify)
    if why is not None:
        row("state", f"unusable, every call on it raises {why}")
        return "\n".join(lines)
    capturing, why = _ask(s.is_capturing)
    row("capture", why or ("capturing into a graph: synchronize() raises CaptureError, host callbacks "
                           "become part of the graph (run at every replay); its flags, id and pending work "
                           "are not asked (the driver would invalidate the capture)" if capturing
                           else "not capturing"))
    priority, why = _ask(lambda: s.priority)
    row("priority", why or f"{priority} (lower is higher)")
    if capturing is False:
        blocking, why = _ask(lambda: s.is_non_blocking)
        row("blocking", why or ("non-blocking: does not synchronize with the legacy default stream" if blocking
                                else "blocking: synchronizes with the legacy default stream"))
        ident, why = _ask(lambda: s.id)
        row("stream id", why or f"{ident}" + (" (the calling thread's)" if s.ptr == 2 else ""))
        idle, why = _ask(s.query)
        row("work", why or ("none pending" if idle else "pending: work submitted to it has not finished"))
    refusals = []
    if s.ptr == 0:
        refusals.append("as a __cuda_array_interface__ or DLPack stream, 0 is an error (ambiguous there)")
    if as_index(obj) is not None and not special:
        refusals.append("once its owner destroys it, every use raises InvalidHandleError, also if the "
                        "driver gives its address to a new stream")
    refusals.append(f"a stated device other than {s.device_id} raises DeviceMismatchError (ValueError where the "
                    "driver has no such device)")
    row("refuses", "; ".join(refusals))
    return "\n".join(lines)


def _explain_event(e: Event, title: str) -> str:
    lines = [title]

    def row(name: str, text: str) -> None:
        lines.append(f"  {name:<11} {text}")

    if not e._open:
        row("state", "closed: every call on it raises ClosedError")
        return "\n".join(lines)
    row("handle", f"{e._eptr:#x}")
    row("device", f"{e.device_id}, in its primary context")
    if e.borrowed:
        row("timing", "not known: the driver does not say how another library made it")
    else:
        row("timing", "enabled" if e._timing else "disabled: elapsed_time() raises naming it")
    if not e.borrowed:
        row("interprocess", "yes: ipc_handle() exports it" if e._interprocess else "no")
    done, why = _ask(e.query)
    row("work", why or ("complete (or never recorded)" if done else "pending: the work before its record "
                                                                    "has not finished"))
    row("refuses", f"recording it on a stream of a device other than {e.device_id} raises "
                   "DeviceMismatchError" + ("; once its owner destroys it, every use raises InvalidHandleError "
                                            "(also when its address names a new event)" if e.borrowed else ""))
    return "\n".join(lines)


def _framework_streams() -> List[Tuple[str, Callable[[], Any]]]:
    """Each importable framework's current stream, as a call that makes it."""
    found: List[Tuple[str, Callable[[], Any]]] = [("streambridge", current_stream)]

    def torch_stream() -> Any:
        import torch

        return torch.cuda.current_stream()

    def cupy_stream() -> Any:
        import cupy

        return cupy.cuda.get_current_stream()

    def core_stream() -> Any:
        from cuda.core import Device

        dev = Device(0)
        dev.set_current()
        return dev.default_stream

    def numba_stream() -> Any:
        from numba import cuda

        return cuda.default_stream()

    for name, module, make in (("PyTorch", "torch", torch_stream), ("CuPy", "cupy", cupy_stream),
                               ("cuda.core", "cuda.core", core_stream), ("Numba", "numba", numba_stream)):
        present, _ = _ask(lambda: importlib.util.find_spec(module) is not None)
        if present:
            found.append((name, make))
    return found


def report() -> str:
    """What ``python -m streambridge`` prints: the driver, its devices, and :func:`explain` of
    the current stream of streambridge and of each framework that can be imported."""
    from . import __version__

    lines = [f"streambridge {__version__}"]
    name, why = _ask(_core.driver_name)
    if name is None:
        lines.append(f"driver: none ({why})")
        return "\n".join(lines)
    version, _ = _ask(_core.driver_version)
    count, why = _ask(_core.device_count)
    shown = f"CUDA {version // 1000}.{version % 1000 // 10}" if isinstance(version, int) else "version unknown"
    lines.append(f"driver: {name} ({shown}), {count if why is None else why} device(s)")
    for d in range(count or 0):
        text, why = _ask(lambda: _core.device_description(d))
        lines.append(f"  device {d}: {text or why}")
    proof, why = _ask(_core.handle_proof)
    lines.append(f"stream handles: {proof or why}")
    current, why = _ask(_core.core.current_device)
    lines.append(f"current device of this thread (the default device): {current if why is None else why}")
    lines.append("current streams:")
    for framework, make in _framework_streams():
        stream, why = _ask(make)
        text = why if why is not None else explain(stream)
        lines.append(f"- {framework}: " + text.replace("\n", "\n    "))
    return "\n".join(lines)
