"""Streams: ExternalStream, with the signatures of cupy.cuda.ExternalStream and
torch.cuda.ExternalStream."""

from __future__ import annotations

import sys
from typing import Any, Optional, Tuple

from . import _core

RUNTIME = 0  # 0/1/2 as the CUDA runtime reads them (PyTorch, CuPy, cuda.core)


def _device_index(device: Any) -> int:
    """-1 for "from the handle"; an int; "cuda:N"; or anything with an ``index`` (torch.device)."""
    if device is None:
        return -1
    if isinstance(device, bool):
        raise TypeError(f"device must be an int, 'cuda:N' or a torch.device, not {device!r}")
    if isinstance(device, int):
        if device < -1:
            raise ValueError(f"device must be -1 or a device ordinal, not {device}")
        return device
    if isinstance(device, str):
        kind, _, index = device.partition(":")
        if kind != "cuda" or not index.isdigit():
            raise ValueError(f"device string must look like 'cuda:N', not {device!r}")
        return int(index)
    if hasattr(device, "type") and hasattr(device, "index"):  # torch.device
        if device.type != "cuda" or not (device.index is None or isinstance(device.index, int)):
            raise ValueError(f"device must be a CUDA device, not {device!r}")
        return -1 if device.index is None else device.index
    raise TypeError(f"device must be an int, 'cuda:N' or a torch.device, not {type(device).__name__}")


def _handle(ptr: Any) -> int:
    if isinstance(ptr, bool) or not isinstance(ptr, int):
        raise TypeError(f"stream pointer must be an int, not {type(ptr).__name__}")
    if ptr < 0 or ptr >= 1 << 64:
        raise ValueError(f"stream pointer {ptr} is out of range for a CUstream")
    return ptr


class ExternalStream:
    """A stream another library created, borrowed: streambridge never destroys it.

    ``ExternalStream(ptr, device_id=-1)`` as in CuPy, or ``ExternalStream(stream_ptr=...,
    device=...)`` as in PyTorch (an int, ``"cuda:1"`` or a ``torch.device``). The handle is
    proven to be a live stream before the driver sees it: a garbage or freed handle raises
    :class:`InvalidHandleError`. Its device is read from the handle; a stated device that
    disagrees raises :class:`DeviceMismatchError`. 0, 1 and 2 are the CUDA runtime's default
    streams of the stated device (device 0 if none).
    """

    def __init__(self, ptr: Optional[int] = None, device_id: Any = -1, *,
                 stream_ptr: Optional[int] = None, device: Any = None) -> None:
        if (ptr is None) == (stream_ptr is None):
            raise TypeError("give the stream pointer once: ptr (CuPy) or stream_ptr (PyTorch)")
        handle = _handle(ptr if ptr is not None else stream_ptr)
        dev = _device_index(device if stream_ptr is not None else device_id)
        self._key = _core.wrap_stream(handle, dev, RUNTIME)
        self._ptr = handle
        self._device = _core.stream_device(self._key)

    @property
    def ptr(self) -> int:
        """The CUstream, as an int (CuPy's name)."""
        return self._ptr

    cuda_stream = ptr  # PyTorch's name
    handle = ptr  # cuda.core's name

    @property
    def device_id(self) -> int:
        """The device the stream is on, read from the handle."""
        return self._device

    def query(self) -> bool:
        """Whether all work submitted so far has completed (cuStreamQuery)."""
        return _core.stream_query(self._key)

    @property
    def done(self) -> bool:
        """``query()``, as CuPy spells it."""
        return self.query()

    def synchronize(self) -> None:
        """Wait for all work submitted so far (cuStreamSynchronize)."""
        _core.stream_synchronize(self._key)

    def wait_stream(self, other: "ExternalStream") -> None:
        """Make work submitted from now on wait for ``other``'s work so far
        (cuEventRecord + cuStreamWaitEvent, one call into Go)."""
        if not isinstance(other, ExternalStream):
            raise TypeError(f"wait_stream takes a streambridge stream, not {type(other).__name__}")
        _core.stream_wait_stream(self._key, other._key)

    def __cuda_stream__(self) -> Tuple[int, int]:
        return (0, self._ptr)

    def close(self) -> None:
        """Forget the stream (it stays alive for its owner). Idempotent."""
        key, self._key = getattr(self, "_key", 0), 0
        if key:
            _core.close_stream(key)

    def __del__(self) -> None:
        if sys is None or sys.meta_path is None:  # interpreter shutdown
            return
        try:
            self.close()
        except Exception:
            pass

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExternalStream) and (self._ptr, self._device) == (other._ptr, other._device)

    def __hash__(self) -> int:
        return hash((self._ptr, self._device))

    def __repr__(self) -> str:
        return f"<streambridge.ExternalStream ptr={self._ptr:#x} device={self._device} borrowed>"
