"""Events: Event with CuPy's signature; PyTorch's keyword names and cuda.core's
EventOptions accepted too."""

from __future__ import annotations

import inspect
from typing import Any

from ._core import core as _c
from ._device import device_index
from ._errors import ClosedError

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

    @classmethod
    def _from_options(cls, options: Any, device: int) -> "Event":
        """The event ``Stream.record(options=...)`` makes."""
        return cls(device=device) if options is None else cls(options=options, device=device)

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
    def is_timing_enabled(self) -> bool:
        return self._timing

    @property
    def is_ipc_enabled(self) -> bool:
        return self._interprocess

    def _record(self, stream: Any = None) -> None:
        """``record``'s arguments other than one stream: None is the current streambridge
        stream, else the device's legacy default stream, as CuPy and PyTorch take it."""
        return self.record(_stream_for(stream, self._device, "record"))

    def _wait(self, stream: Any = None) -> None:
        """``wait``'s arguments other than one stream, as :meth:`_record` takes them."""
        return self.wait(_stream_for(stream, self._device, "wait"))

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
        return _c.open_ipc_event(cls, max(device_index(device), 0), bytes(handle))

    def __repr__(self) -> str:
        closed = "" if self._open else " closed"
        return f"<streambridge.Event device={self._device} timing={self._timing}{closed}>"


# The arguments as the core's initializer reads them, declared there (EventCore's doc).
Event.__signature__ = inspect.signature(_c.EventCore)  # type: ignore[attr-defined]


def _read_options(options: Any) -> tuple[Any, Any, Any]:
    """A cuda.core ``EventOptions`` (or an object or dict with its fields) as
    (timing_enabled, blocking_sync or None, ipc_enabled or None), for the core's Event
    initializer, which checks the values' types."""
    if isinstance(options, dict):
        opts = options
    elif any(hasattr(options, name) for name in _OPTION_NAMES):
        opts = {name: getattr(options, name) for name in _OPTION_NAMES if getattr(options, name, None) is not None}
    else:
        raise TypeError(f"options must be a cuda.core EventOptions (or an object or dict with "
                        f"{', '.join(_OPTION_NAMES)}), not {type(options).__name__}")
    unknown = set(opts) - set(_OPTION_NAMES)
    if unknown:
        raise TypeError(f"unknown event options {sorted(unknown)}")
    return opts.get("timing_enabled", False), opts.get("blocking_sync"), opts.get("ipc_enabled")


_c.set_event_options_reader(_read_options)


def _stream_for(stream: Any, device: int, what: str) -> Any:
    if stream is not None:
        raise TypeError(f"{what} takes a streambridge stream or None, not {type(stream).__name__}")
    return _c.resolve(None, device)


def get_elapsed_time(start: Event, end: Event) -> float:
    """Milliseconds between two recorded events, as ``cupy.cuda.get_elapsed_time``."""
    return start.elapsed_time(end)
