"""The Go core, through the gopy-built module, with its errors made typed."""

from __future__ import annotations

import functools
from typing import Any, Callable

from . import _errors

try:
    from ._native import pyshim as _shim
except ImportError as e:  # pragma: no cover - a broken install
    raise ImportError(f"streambridge: the native module is missing or was built for another Python: {e}") from e


def _typed(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except RuntimeError as e:
            raise _errors.translate(e) from None

    return call


driver_name = _typed(_shim.DriverName)
wrap_stream = _typed(_shim.WrapStream)
new_stream = _typed(_shim.NewStream)
stream_handle = _typed(_shim.StreamHandle)
stream_device = _typed(_shim.StreamDevice)
stream_query = _typed(_shim.StreamQuery)
stream_synchronize = _typed(_shim.StreamSynchronize)
stream_wait_stream = _typed(_shim.StreamWaitStream)
close = _typed(_shim.Close)
stream_priority = _typed(_shim.StreamPriority)
stream_non_blocking = _typed(_shim.StreamNonBlocking)
stream_wait_event = _typed(_shim.StreamWaitEvent)
new_event = _typed(_shim.NewEvent)
event_record = _typed(_shim.EventRecord)
event_query = _typed(_shim.EventQuery)
event_synchronize = _typed(_shim.EventSynchronize)
event_elapsed_time = _typed(_shim.EventElapsedTime)
live_streams = _shim.LiveStreams
