"""Events: Event with CuPy's signature; PyTorch's keyword names and cuda.core's
EventOptions accepted too."""

from __future__ import annotations

import inspect
from typing import Any, Optional

from ._core import core as _c
from ._device import as_index, device_or_current
from ._errors import ClosedError
from ._provenance import frameworks_own

_OPTION_NAMES = ("timing_enabled", "blocking_sync", "ipc_enabled")


class Event(_c.EventCore):
    """A CUDA event (cuEventCreate), owned: destroyed on close or collection. The C core
    (core.c) makes it, holds ``_eptr`` (the CUevent), ``_device``, ``_open``, ``_timing``
    and ``_interprocess``, and is the one path of ``record``, ``wait``, ``query``,
    ``synchronize``, ``elapsed_time``, ``ipc_handle`` and ``close``.

    ``Event(block=False, disable_timing=False, interprocess=False)`` as in CuPy; PyTorch's
    ``enable_timing`` and ``blocking`` keywords are accepted too, and ``options`` takes a
    cuda.core ``EventOptions`` (or anything with its ``timing_enabled``, ``blocking_sync``
    and ``ipc_enabled``, or a dict of them). With no options timing is enabled, as in CuPy
    (cuda.core's default is off, PyTorch's too: pass ``disable_timing`` or the options
    to get their behaviour). ``device`` picks the device, 0 by default.
    """

    # from_handle(handle, device=None, *, vouched=False), the borrow of another library's CUevent, is the C
    # core's (core.c, event_from_handle), as ExternalStream's constructor is.

    @property
    def borrowed(self) -> bool:
        """Whether the event is another library's (:meth:`from_handle`, :func:`as_event`)."""
        return self._id != 0

    @property
    def device_id(self) -> int:
        """The device the event was created on."""
        return self._device

    @property
    def ptr(self) -> int:
        """The CUevent, as an int (CuPy's name; ``handle`` is cuda.core's). A closed event
        raises ClosedError rather than hand out a destroyed handle."""
        if not self._open:
            raise ClosedError("the event was closed")
        return self._eptr

    @property
    def handle(self) -> int:
        """The CUevent, as cuda.core names it: :attr:`ptr`."""
        return self.ptr

    @property
    def is_timing_enabled(self) -> Optional[bool]:
        """Whether the event records time; None for a borrowed event (the driver does not
        say how another library made it: ``elapsed_time`` gives the driver's answer)."""
        return None if self.borrowed else self._timing

    @property
    def is_ipc_enabled(self) -> bool:
        return self._interprocess

    @property
    def done(self) -> bool:
        """``query()``, as CuPy spells it."""
        return self.query()

    @property
    def is_done(self) -> bool:
        """``query()``, as cuda.core spells it."""
        return self.query()

    sync = _c.EventCore.synchronize  # cuda.core's name

    def __sub__(self, start: "Event") -> float:
        """``end - start`` in milliseconds, as cuda.core has it."""
        if not isinstance(start, Event):
            return NotImplemented
        return start.elapsed_time(self)

    @classmethod
    def from_ipc_handle(cls, device: Any, handle: bytes) -> "Event":
        """Open an event another process exported (cuIpcOpenEventHandle), with PyTorch's
        signature. The driver refuses a handle exported by this same process."""
        if not isinstance(handle, (bytes, bytearray)):
            raise TypeError(f"handle must be bytes, not {type(handle).__name__}")
        if len(handle) != 64:
            raise ValueError(f"handle must be the 64 bytes ipc_handle() returned, not {len(handle)}")
        return _c.open_ipc_event(cls, device_or_current(device), bytes(handle))

    def to_torch(self) -> Any:
        """The torch event this one borrows (:func:`as_event` of a torch event). PyTorch
        cannot wrap a CUevent it did not make, so any other event raises TypeError: order
        torch's streams with it through streambridge (``as_stream(torch_stream).wait(e)``)."""
        return self._original("torch", "PyTorch", "as_stream(torch_stream).wait(event)")

    def to_cupy(self) -> Any:
        """The CuPy event this one borrows; see :meth:`to_torch`."""
        return self._original("cupy", "CuPy", "as_stream(cupy_stream).wait(event)")

    def to_cuda_core(self) -> Any:
        """The cuda.core event this one borrows; see :meth:`to_torch`."""
        return self._original("cuda", "cuda.core", "as_stream(core_stream).wait(event)")

    def _original(self, module: str, name: str, instead: str) -> Any:
        owner = self._owner
        if owner is not None and type(owner).__module__.split(".")[0] == module:
            return owner
        made = "another library's" if self.borrowed else "streambridge's"
        raise TypeError(f"{name} cannot wrap a CUevent it did not make (this is {made}); "
                        f"use it through streambridge instead: {instead}")

    def __repr__(self) -> str:
        closed = "" if self._open else " closed"
        if self.borrowed:
            return f"<streambridge.Event {self._eptr:#x} device={self._device} borrowed{closed}>"
        return f"<streambridge.Event device={self._device} timing={self._timing}{closed}>"


# The arguments as the core's initializer reads them, declared there (EventCore's doc).
Event.__signature__ = inspect.signature(_c.EventCore)  # type: ignore[attr-defined]
_c.constructs(Event)  # Event(...) goes straight to the core's constructor (readers.inc)


def _read_options(options: Any) -> tuple[Any, Any, Any]:
    """A cuda.core ``EventOptions`` (or an object or dict with its fields) as
    (timing_enabled, blocking_sync, ipc_enabled), each None where not given, for the core's
    Event initializer, which checks the values' types and that they agree with the same
    arguments given by keyword."""
    if isinstance(options, dict):
        opts = options
    elif any(hasattr(options, name) for name in _OPTION_NAMES):
        opts = {name: getattr(options, name) for name in _OPTION_NAMES if getattr(options, name, None) is not None}
    else:
        raise TypeError(f"options must be a cuda.core EventOptions (or an object or dict with "
                        f"{', '.join(_OPTION_NAMES)}), not {type(options).__name__}")
    unknown = set(opts) - set(_OPTION_NAMES)
    if unknown:
        raise TypeError(f"unknown event options {sorted(unknown)} (the options are {', '.join(_OPTION_NAMES)})")
    return opts.get("timing_enabled"), opts.get("blocking_sync"), opts.get("ipc_enabled")




def _event_handle(obj: Any) -> Optional[int]:
    """The CUevent of another framework's event, or None where obj is not one: torch's
    ``cuda_event`` (0 until its first record: refused), CuPy's ``ptr``, cuda.core's and
    Numba's ``handle`` (a ``CUevent``, or a ctypes ``c_void_p``)."""
    module = type(obj).__module__.split(".")[0]
    if "Event" not in type(obj).__name__:  # their streams have handles too
        return None
    if module == "torch":
        h = getattr(obj, "cuda_event", getattr(obj, "event_id", None))
        if isinstance(h, int) and h == 0:
            raise ValueError("this torch event has no CUevent yet: PyTorch makes it at the event's first record")
        return h if isinstance(h, int) else None
    if module in ("cupy", "cupy_backends") and isinstance(getattr(obj, "ptr", None), int):
        return int(obj.ptr)
    if module in ("cuda", "numba"):
        if getattr(obj, "is_closed", False):
            raise ClosedError(f"the {type(obj).__name__} was closed")
        h = getattr(obj, "handle", None)
        if h is not None and hasattr(h, "value"):
            return h.value if isinstance(h.value, int) else None
        try:
            return int(h) if h is not None else None
        except TypeError:
            return None
    return None


def as_event(obj: Any, device: Any = None) -> Event:
    """A streambridge event for anything event-like: a streambridge event (returned as is);
    an int handle (:meth:`Event.from_handle`); a torch, CuPy, cuda.core or Numba event, kept
    alive with the borrowed event (``to_torch()`` and the like give it back). The handle is
    proven live before the driver sees it, as :meth:`Event.from_handle` proves it; where the
    driver's layout cannot be learned, a framework's own event object vouches for its handle
    (``from_handle(..., vouched=True)``), and an object that only looks like one does not."""
    if isinstance(obj, Event):
        return obj
    if as_index(obj) is not None:
        return Event.from_handle(obj, device)
    h = _event_handle(obj)
    if h is None:
        raise TypeError(f"{type(obj).__module__}.{type(obj).__name__} is not event-like (an int CUevent, or a "
                        "torch, CuPy, cuda.core or Numba event)")
    return _c.wrap_event(Event, h, device, obj, frameworks_own(obj))  # from_handle's wrap, keeping obj


def get_elapsed_time(start: Event, end: Event) -> float:
    """Milliseconds between two recorded events, as ``cupy.cuda.get_elapsed_time``."""
    for arg, value in (("start", start), ("end", end)):
        if not isinstance(value, Event):
            raise TypeError(f"{arg} must be a streambridge Event, not {type(value).__name__}")
    return start.elapsed_time(end)
