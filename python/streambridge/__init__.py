"""streambridge: CUDA streams shared safely between PyTorch, CuPy, cuda.core and Go.

    >>> import os
    >>> _ = os.environ.setdefault("STREAMBRIDGE_DRIVER", "sim")  # no GPU needed; leave out on one
    >>> import streambridge as sb
    >>> producer, consumer = sb.Stream(non_blocking=True), sb.Stream(non_blocking=True)
    >>> seen = []
    >>> producer.launch_host_func(seen.append, "producer done")  # on the driver's thread, in order
    >>> consumer.wait_stream(producer)  # the consumer's later work waits for the producer's
    >>> borrowed = sb.ExternalStream(consumer.ptr)  # any framework's handle, proven live first
    >>> borrowed.synchronize()
    >>> seen, borrowed == consumer, producer.query()
    (['producer done'], True, True)

``as_stream(obj)`` takes any framework's stream (torch, CuPy, cuda.core, Numba, or a
``__cuda_stream__`` object); ``to_torch()``, ``to_cupy()``, ``to_cuda_core()`` and
``to_numba()`` give it back as theirs. Importing never needs a GPU; :func:`driver` says which
driver is in use or raises :class:`NoDriverError` saying why there is none
(STREAMBRIDGE_DRIVER=sim selects the software driver, which runs stream semantics and no
kernels).
"""

from ._errors import (CallbackReentryError, CaptureError, ClosedError, CompileError, CUDAError, DeviceMismatchError,
                      ForkedProcessError, InvalidHandleError, NoDriverError, NotStreamLikeError, ProtocolError)
from ._core import driver_name as driver
from ._device import Device, current_device, device_count
from ._event import Event, as_event, get_elapsed_time
from ._explain import explain
from ._handover import hand_over
from ._go import go_function
from ._graph import Graph
from ._kernel import Kernel, Module, launch
from ._stream import (
    CALLBACK_ERRORS_KEPT,
    ExternalStream,
    Stream,
    as_stream,
    callback_errors,
    callback_errors_dropped,
    current_stream,
)
from . import ext

__all__ = [
    "CALLBACK_ERRORS_KEPT",
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
    "NotStreamLikeError",
    "ProtocolError",
    "Stream",
    "as_event",
    "as_stream",
    "callback_errors",
    "callback_errors_dropped",
    "current_device",
    "current_stream",
    "device_count",
    "driver",
    "ext",
    "explain",
    "get_elapsed_time",
    "go_function",
    "hand_over",
    "launch",
]
__version__ = "0.1.0"
