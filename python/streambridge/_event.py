"""Events: Event with CuPy's signature, PyTorch's keyword names accepted too."""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional

from . import _core
from ._stream import RUNTIME, _BaseStream, _device_index


_default_keys: Dict[int, int] = {}


def _default_stream_key(device: int) -> int:
    """The key of a device's legacy default stream, wrapped once for the process."""
    key = _default_keys.get(device)
    if key is None:
        key = _default_keys.setdefault(device, _core.wrap_stream(0, device, RUNTIME))
    return key


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value


class Event:
    """A CUDA event: ``Event(block=False, disable_timing=False, interprocess=False)`` as in
    CuPy, or with PyTorch's ``enable_timing`` and ``blocking``. Owned: destroyed on close.
    """

    _key: int = 0

    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False, *,
                 enable_timing: Optional[bool] = None, blocking: Optional[bool] = None, device: Any = None) -> None:
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

    def _stream_key(self, stream: Optional[_BaseStream]) -> int:
        if stream is None:  # the device's legacy default stream, as CuPy and PyTorch take None
            return _default_stream_key(self._device)
        if not isinstance(stream, _BaseStream):
            raise TypeError(f"expected a streambridge stream, not {type(stream).__name__}")
        return stream._key

    def record(self, stream: Optional[_BaseStream] = None) -> None:
        """Record on ``stream`` (the default stream if None) (cuEventRecord)."""
        _core.event_record(self._key, self._stream_key(stream))

    def wait(self, stream: Optional[_BaseStream] = None) -> None:
        """Make ``stream`` (the default stream if None) wait for this event (cuStreamWaitEvent)."""
        _core.stream_wait_event(self._stream_key(stream), self._key)

    def query(self) -> bool:
        """Whether the last record's work has completed (cuEventQuery)."""
        return _core.event_query(self._key)

    @property
    def done(self) -> bool:
        return self.query()

    is_done = done

    def synchronize(self) -> None:
        """Wait for the last record's work (cuEventSynchronize)."""
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

    def close(self) -> None:
        """Destroy the event. Idempotent."""
        key, self._key = self._key, 0
        if key:
            _core.close(key)

    def __del__(self) -> None:
        if sys is None or sys.meta_path is None:
            return
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<streambridge.Event device={self._device} timing={self._timing}>"


def get_elapsed_time(start: Event, end: Event) -> float:
    """Milliseconds between two recorded events, as ``cupy.cuda.get_elapsed_time``."""
    return start.elapsed_time(end)
