"""Exceptions. Every error reaches Python already typed: the native module raises the class
of its kind (declared once in Go, internal/boundary, and generated into the core's
tables.h as SB_KIND_CLASSES, the class names it looks up here) with its code,
name and log as attributes; nothing here reads a message."""

from __future__ import annotations


class CUDAError(RuntimeError):
    """A CUDA driver error: ``.code`` is the CUresult, ``.name`` its CUDA_ERROR_* name."""

    code: int
    name: str

    def __init__(self, message: str, code: int = 0, name: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.name = name


class InvalidHandleError(CUDAError):
    """A handle that is not a live stream of the driver: garbage, freed, or another kind.

    It is raised before the driver sees the handle, so the process is never at risk."""


class NoDriverError(CUDAError):
    """There is no usable CUDA driver on this machine (STREAMBRIDGE_DRIVER=sim selects the
    software driver)."""


class CompileError(CUDAError):
    """A kernel that did not compile (NVRTC); ``.log`` is the compiler's whole log."""

    log: str

    def __init__(self, message: str, code: int = 0, name: str = "", log: str = "") -> None:
        super().__init__(message, code, name)
        self.log = log


class CaptureError(CUDAError):
    """A call that a stream capture forbids. Refused before the driver saw it where
    streambridge can tell (``.code`` 0: the capture goes on), else the driver's refusal
    (``.code`` a CUDA_ERROR_STREAM_CAPTURE_* or CUDA_ERROR_CAPTURED_EVENT result, which may
    have invalidated the capture, such as a query of another library's event recorded in a
    capture that goes on)."""


class DeviceMismatchError(ValueError):
    """A stated device disagrees with the device the stream handle is on."""


class ClosedError(ValueError):
    """The object was closed."""


class ForkedProcessError(RuntimeError):
    """A streambridge call in a child process made by ``fork()``: neither the CUDA driver
    nor streambridge's Go runtime survives a fork, and such a call could hang. Use the
    ``spawn`` start method (``multiprocessing.get_context("spawn")``)."""


class CallbackReentryError(RuntimeError):
    """A streambridge call from inside a host callback that would enter the driver: the
    driver runs host callbacks one at a time on its own thread, and such a call can
    deadlock. It is raised inside the callback and reported by ``callback_errors()``."""


# Where CuPy and cuda.core raise different exceptions for the same bad object, streambridge
# raises one class deriving from each, so an ``except`` written for either catches it.


class ProtocolError(TypeError, ValueError, RuntimeError):
    """A ``__cuda_stream__`` answer that breaks the protocol: not a 2-tuple, a version that is
    not the int 0, a handle that is not an int. CuPy raises ``TypeError`` (shape, types) or
    ``ValueError`` (version) for these, cuda.core ``RuntimeError``."""


class NotStreamLikeError(TypeError, ValueError, AttributeError):
    """An object given where a stream (or, for ``wait``, an event) is needed that is none:
    ``Stream.from_external`` of an object without ``__cuda_stream__`` (CuPy raises
    ``AttributeError``, cuda.core ``TypeError``), ``wait`` of something neither an event nor
    a stream (cuda.core raises ``ValueError``)."""


# Each class by its public name (streambridge.ClosedError), where Python and JAX's errors
# (streambridge.jax) print it, and where pickle finds it.
for _cls in [v for v in globals().values() if isinstance(v, type) and issubclass(v, Exception)]:
    if _cls.__module__ == __name__:  # every class defined here, none imported
        _cls.__module__ = "streambridge"
del _cls
