"""Events: Event with CuPy's signature; PyTorch's keyword names and cuda.core's
EventOptions accepted too."""

from __future__ import annotations

import sys
from typing import Any, Optional

from . import _core, _stream
from ._core import close as _close, event_query as _event_query, event_record as _event_record
from ._core import stream_wait_event as _stream_wait_event
from ._core import check as _check, fast_calls as _fast_calls, fastcall as _fc
from ._errors import translate
from ._stream import _BaseStream, _device_index, resolve

_fc_event_record = _fc.event_record
_fc_stream_wait_event = _fc.stream_wait_event
_fc_event_query = _fc.event_query
_NOT_READY = 600  # CUDA_ERROR_NOT_READY

def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value


class Event(_fc.EventCore):
    """A CUDA event (cuEventCreate), owned: destroyed on close.

    ``Event(block=False, disable_timing=False, interprocess=False)`` as in CuPy; PyTorch's
    ``enable_timing`` and ``blocking`` keywords are accepted too, and ``options`` takes a
    cuda.core ``EventOptions`` (or anything with its ``timing_enabled``, ``blocking_sync``
    and ``ipc_enabled``, or a dict of them). With no options timing is enabled, as in CuPy
    (cuda.core's default is off, PyTorch's too: pass ``disable_timing`` or the options
    to get their behaviour). ``device`` picks the device, 0 by default.
    """

    _key: int = 0
    _device: int = 0
    _timing: bool = False
    _interprocess: bool = False

    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False, *,
                 enable_timing: Optional[bool] = None, blocking: Optional[bool] = None,
                 options: Any = None, device: Any = None) -> None:
        if options is not None:
            opts = options if isinstance(options, dict) else {
                name: getattr(options, name) for name in ("timing_enabled", "blocking_sync", "ipc_enabled")
                if getattr(options, name, None) is not None}
            unknown = set(opts) - {"timing_enabled", "blocking_sync", "ipc_enabled"}
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
        self._key = _core.new_event(self._device, block, disable_timing, interprocess)
        self._timing = not disable_timing
        self._interprocess = interprocess
        self._enable_fast()

    def _enable_fast(self) -> None:
        if _fast_calls():
            self._eptr = _core.event_handle(self._key)
            self._fast = True

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

    def _record(self, stream: Optional[_BaseStream] = None) -> None:
        """Record on ``stream`` (cuEventRecord); None is the current streambridge stream,
        else the device's legacy default stream, as CuPy and PyTorch take it."""
        if not isinstance(stream, _BaseStream):
            stream = _stream_for(stream, self._device, "record")
        # Stream.record's fast path, written again rather than called: a call costs ~50 ns
        # on a path measured against cuda.core's (bench/python_bench.py, event record).
        if self._fast and stream._fast:
            r = _fc_event_record(self._eptr, stream._ptr)
            if r:
                _check("cuEventRecord", r)
            return
        try:
            _event_record(self._key, stream._key)
        except RuntimeError as e:
            raise translate(e) from None

    def wait(self, stream: Optional[_BaseStream] = None) -> None:
        """Make ``stream`` wait for this event (cuStreamWaitEvent); None as in :meth:`record`."""
        if not isinstance(stream, _BaseStream):
            stream = _stream_for(stream, self._device, "wait")
        if self._fast and stream._fast:
            r = _fc_stream_wait_event(stream._ptr, self._eptr)
            if r:
                _check("cuStreamWaitEvent", r)
            return
        try:
            _stream_wait_event(stream._key, self._key)
        except RuntimeError as e:
            raise translate(e) from None

    def query(self) -> bool:
        """Whether the last record's work has completed (cuEventQuery)."""
        if self._fast:
            r = _fc_event_query(self._eptr)
            if r == 0:
                return True
            if r == _NOT_READY:
                return False
            _check("cuEventQuery", r)
        try:
            return _event_query(self._key)
        except RuntimeError as e:
            raise translate(e) from None

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
        self._interprocess = True
        self._enable_fast()
        return self

    def close(self) -> None:
        """Destroy the event (cuEventDestroy). Idempotent."""
        self._fast = False
        key, self._key = self._key, 0
        if key:
            try:
                _close(key)
            except RuntimeError as e:
                raise translate(e) from None

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
        raise TypeError(f"{what} takes a streambridge stream, not {type(stream).__name__}")
    return resolve(None, device)


_stream.Event = Event


def get_elapsed_time(start: Event, end: Event) -> float:
    """Milliseconds between two recorded events, as ``cupy.cuda.get_elapsed_time``."""
    return start.elapsed_time(end)
