"""Events: Event with CuPy's signature; PyTorch's keyword names and cuda.core's
EventOptions accepted too."""

from __future__ import annotations

import sys
from typing import Any, Optional

from . import _core, _stream
from ._core import core as _c
from ._stream import _BaseStream, _device_index, resolve
from ._tables import OBJECT_EVENT

_OPTION_NAMES = ("timing_enabled", "blocking_sync", "ipc_enabled")


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value


class Event(_c.EventCore):
    """A CUDA event (cuEventCreate), owned: destroyed on close. The C core (core.c) holds
    ``_eptr`` (the CUevent), ``_device`` and ``_open`` and is the one path of ``record``,
    ``wait`` and ``query``.

    ``Event(block=False, disable_timing=False, interprocess=False)`` as in CuPy; PyTorch's
    ``enable_timing`` and ``blocking`` keywords are accepted too, and ``options`` takes a
    cuda.core ``EventOptions`` (or anything with its ``timing_enabled``, ``blocking_sync``
    and ``ipc_enabled``, or a dict of them). With no options timing is enabled, as in CuPy
    (cuda.core's default is off, PyTorch's too: pass ``disable_timing`` or the options
    to get their behaviour). ``device`` picks the device, 0 by default.
    """

    _key: int = 0
    _timing: bool = False
    _interprocess: bool = False

    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False, *,
                 enable_timing: Optional[bool] = None, blocking: Optional[bool] = None,
                 options: Any = None, device: Any = None) -> None:
        if options is not None:
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
            enable_timing = opts.get("timing_enabled", False)
            blocking = opts.get("blocking_sync", blocking)
            interprocess = opts.get("ipc_enabled", interprocess)
        block = _flag("blocking" if blocking is not None else "block", blocking if blocking is not None else block)
        if enable_timing is not None:
            disable_timing = not _flag("enable_timing", enable_timing)
        disable_timing = _flag("disable_timing", disable_timing)
        interprocess = _flag("interprocess", interprocess)
        if interprocess and not disable_timing:
            raise ValueError("an interprocess event must have timing disabled (CU_EVENT_INTERPROCESS)")
        self._device = max(_device_index(device), 0)
        self._key, self._eptr = _core.new_event(self._device, block, disable_timing, interprocess)
        self._timing = not disable_timing
        self._interprocess = interprocess
        self._open = True

    @classmethod
    def _from_options(cls, options: Any, device: int) -> "Event":
        """The event ``Stream.record(options=...)`` makes."""
        return cls(device=device) if options is None else cls(options=options, device=device)

    @property
    def device_id(self) -> int:
        """The device the event was created on."""
        return self._device

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

    is_done = done  # cuda.core's name

    def synchronize(self) -> None:
        """Wait for the last record's work (cuEventSynchronize); other Python threads run."""
        _core.event_synchronize(self._key)

    sync = synchronize

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds from this event to ``end`` (cuEventElapsedTime)."""
        if not isinstance(end, Event):
            raise TypeError(f"elapsed_time takes an Event, not {type(end).__name__}")
        return _core.event_elapsed_time(self._key, end._key)

    def __sub__(self, start: "Event") -> float:
        """``end - start`` in milliseconds, as cuda.core has it."""
        if not isinstance(start, Event):
            return NotImplemented
        return start.elapsed_time(self)

    def ipc_handle(self) -> bytes:
        """The 64-byte handle another process opens with :meth:`from_ipc_handle`
        (cuIpcGetEventHandle). The event must be ``interprocess``."""
        return bytes.fromhex(_core.event_ipc_handle(self._key))

    @classmethod
    def from_ipc_handle(cls, device: Any, handle: bytes) -> "Event":
        """Open an event another process exported (cuIpcOpenEventHandle), with PyTorch's
        signature. The driver refuses a handle exported by this same process."""
        if not isinstance(handle, (bytes, bytearray)):
            raise TypeError(f"handle must be bytes, not {type(handle).__name__}")
        self = cls.__new__(cls)
        self._device = max(_device_index(device), 0)
        self._key = _core.open_ipc_event(self._device, bytes(handle).hex())
        self._eptr = _core.event_handle(self._key)
        self._interprocess = True
        self._open = True
        return self

    def close(self) -> None:
        """Destroy the event (cuEventDestroy). Idempotent."""
        self._open = False
        key, self._key = self._key, 0
        if key:
            _core.release(key, OBJECT_EVENT)

    def __del__(self) -> None:
        if sys is None or sys.meta_path is None:  # interpreter shutdown
            return
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<streambridge.Event device={self._device} timing={self._timing}>"


def _stream_for(stream: Any, device: int, what: str) -> _BaseStream:
    if stream is not None:
        raise TypeError(f"{what} takes a streambridge stream or None, not {type(stream).__name__}")
    return resolve(None, device)


_stream.Event = Event


def get_elapsed_time(start: Event, end: Event) -> float:
    """Milliseconds between two recorded events, as ``cupy.cuda.get_elapsed_time``."""
    return start.elapsed_time(end)
