"""Exceptions, and the translation of the native module's "kind|code|message" errors."""

from __future__ import annotations


class CUDAError(RuntimeError):
    """A CUDA driver error: ``.code`` is the CUresult, ``.name`` its CUDA_ERROR_* name."""

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

    def __init__(self, message: str, code: int = 0, name: str = "", log: str = "") -> None:
        super().__init__(message, code, name)
        self.log = log


class CaptureError(RuntimeError):
    """A call that a stream capture forbids, refused before it could invalidate the capture."""


class DeviceMismatchError(ValueError):
    """A stated device disagrees with the device the stream handle is on."""


class ClosedError(ValueError):
    """The object was closed."""


_INVALID_HANDLE = 400


def _name(message: str) -> str:
    for word in message.replace(":", " ").split():
        if word.startswith("CUDA_ERROR_"):
            return word
    return ""


def cuda_error(call: str, code: int, name: str) -> CUDAError:
    """The typed error for a driver call that returned ``code`` (named ``name``)."""
    cls = InvalidHandleError if code == _INVALID_HANDLE else CUDAError
    return cls(f"{call}: {name}", code, name)


def translate(err: BaseException) -> BaseException:
    """The typed exception for an error raised by the native module."""
    kind, sep, rest = str(err).partition("|")
    if not sep:
        return err
    code_text, _, message = rest.partition("|")
    code = int(code_text) if code_text.isdigit() else 0
    if kind == "cuda":
        cls = InvalidHandleError if code == _INVALID_HANDLE else CUDAError
        return cls(message, code, _name(message))
    if kind == "capture":
        return CaptureError(message)
    if kind == "compile":
        return CompileError(message, code, "NVRTC_ERROR_COMPILATION" if code == 6 else "", message.partition("\n")[2])
    if kind == "nonvrtc":
        return NoDriverError(message, 0, "")
    if kind == "nodriver":
        return NoDriverError(message, 100, "CUDA_ERROR_NO_DEVICE")
    if kind == "device":
        return DeviceMismatchError(message)
    if kind == "closed":
        return ClosedError(message)
    if kind == "value":
        return ValueError(message)
    return RuntimeError(message)
