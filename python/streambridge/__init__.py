"""streambridge: CUDA streams shared safely between PyTorch, CuPy, cuda.core and Go.

Importing never needs a GPU; :func:`driver` says which driver is in use or raises
:class:`NoDriverError` saying why there is none (STREAMBRIDGE_DRIVER=sim selects the
software driver, which runs stream semantics and no kernels).
"""

from ._errors import (CallbackReentryError, CaptureError, ClosedError, CompileError, CUDAError, DeviceMismatchError,
                      ForkedProcessError, InvalidHandleError, NoDriverError)
from ._core import driver_name as driver
from ._device import Device
from ._event import Event, get_elapsed_time
from ._go import go_function
from ._graph import Graph
from ._kernel import Kernel, Module, launch
from ._stream import ExternalStream, Stream, as_stream, callback_errors, current_stream
from . import ext

__all__ = [
    "CUDAError",
    "CallbackReentryError",
    "CaptureError",
    "ClosedError",
    "CompileError",
    "Device",
    "DeviceMismatchError",
    "Event",
    "ExternalStream",
    "ForkedProcessError",
    "Graph",
    "InvalidHandleError",
    "Kernel",
    "Module",
    "NoDriverError",
    "Stream",
    "as_stream",
    "callback_errors",
    "current_stream",
    "driver",
    "ext",
    "get_elapsed_time",
    "go_function",
    "launch",
]
__version__ = "0.1.0"
