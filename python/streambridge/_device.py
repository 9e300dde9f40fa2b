"""Devices: a device ordinal that reads as CuPy's, PyTorch's and cuda.core's, and the
device arguments every constructor takes."""

from __future__ import annotations

from typing import Any, Optional

from . import _core
from ._core import core as _c


class Device(int):
    """A device ordinal that reads as each framework expects: an ``int`` (CuPy), with
    ``type == "cuda"`` and ``index`` (PyTorch's ``torch.device``; ``str()`` is
    ``"cuda:N"``, which ``torch.device`` takes) and ``device_id`` (cuda.core)."""

    type = "cuda"

    @property
    def index(self) -> int:
        return int(self)

    @property
    def device_id(self) -> int:  # a property of its own: a type checker reads an alias of one as a method
        return int(self)

    def __str__(self) -> str:
        return f"cuda:{int(self)}"

    def __repr__(self) -> str:
        return f"streambridge.Device({int(self)})"

    def set_current(self) -> None:
        """Make this device current on the calling thread: its primary context becomes the
        thread's current context (cuCtxSetCurrent), as ``torch.cuda.set_device``, ``with
        cupy.cuda.Device(n)`` (``cudaSetDevice``) and cuda.core's ``Device.set_current`` do.
        Streams, events and modules made with no device are made on the current device."""
        _c.enter_device(int(self))  # the context it replaces is not set back


def current_device() -> Device:
    """The calling thread's current device: that of the context current on this thread, as
    ``torch.cuda.set_device``, ``with cupy.cuda.Device(n)``, cuda.core's
    ``Device.set_current`` or :meth:`Device.set_current` left it; device 0 on a thread where
    none is, as ``cudaGetDevice`` answers. Every constructor given no device uses it."""
    return Device(_c.current_device())


def as_index(value: Any) -> Optional[int]:
    """``value`` as an int where it is one or has ``__index__`` (NumPy's integers, as CuPy and
    PyTorch take them), else None; a bool (Python's or NumPy's) is not one."""
    numpy_bool = type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool")
    if isinstance(value, bool) or numpy_bool or not hasattr(type(value), "__index__"):
        return None
    try:
        index = type(value).__index__(value)  # as operator.index, which takes a bool answer as 0 or 1
    except TypeError:
        return None
    if isinstance(index, bool) or not isinstance(index, int):  # an __index__ that answers True is no ordinal
        return None
    return int(index)


def device_count() -> int:
    """The number of devices the driver has (cuDeviceGetCount), as
    ``torch.cuda.device_count()`` and ``cupy.cuda.runtime.getDeviceCount()``."""
    return _core.device_count()


def device_or_current(device: Any) -> int:
    """A device argument's ordinal, with None (or -1) the calling thread's current device: the
    C core's reading (device_arg), which its constructors use."""
    return _c.device_arg(device)


def device_index(device: Any) -> int:
    """-1 for "not said" (None, -1, "cuda", a torch.device with no index: from the handle for
    a borrowed stream, else the current device); an int (or NumPy integer); "cuda:N"; or
    anything with an ``index`` (torch.device)."""
    if device is None:
        return -1
    if isinstance(device, bool):
        raise TypeError(f"device must be an int, 'cuda:N' or a torch.device, not {device!r}")
    index = as_index(device)
    if index is not None:
        device = index
    if isinstance(device, int):
        if not -1 <= device < 2**31:
            raise ValueError(f"device must be -1 or a device ordinal, not {device}")
        return device
    if isinstance(device, str):
        if device == "cuda":  # as torch.device("cuda"): no device said
            return -1
        kind, _, ordinal = device.partition(":")
        if kind != "cuda" or not (ordinal.isascii() and ordinal.isdigit()) or int(ordinal) >= 2**31:
            raise ValueError(f"device string must look like 'cuda:N', not {device!r}")
        return int(ordinal)
    if hasattr(device, "type") and hasattr(device, "index"):  # torch.device
        if device.type != "cuda" or not (device.index is None or isinstance(device.index, int)):
            raise ValueError(f"device must be a CUDA device, not {device!r}")
        return -1 if device.index is None else device.index
    raise TypeError(f"device must be an int, 'cuda:N' or a torch.device, not {type(device).__name__}")


