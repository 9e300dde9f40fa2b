"""The native module: the C object core (python/native/core.c), and the Go core through
gopy (pyshim/pyshim.go).

Every call into Go passes the core's gate first (no call from a forked child, none from
inside a host callback), so the checks live in one place for both halves. Errors arrive
typed: the native module raises the exception of the error's kind (internal/boundary)."""

from __future__ import annotations

import atexit
import ctypes
import os
from typing import TYPE_CHECKING, Any, Callable

from . import _tables

try:
    from ._native import _sbnative as _native
except ImportError as e:  # pragma: no cover - a broken install
    raise ImportError(f"streambridge: the native module is missing or was built for another Python: {e}") from e


def _core_module() -> Any:
    make = ctypes.PyDLL(_native.__file__).sb_core_module
    make.restype = ctypes.py_object
    return make()


if TYPE_CHECKING:  # the core's types, described in _coretypes.pyi
    from . import _coretypes

    core = _coretypes
else:
    core = _core_module()

# Go in an extension module sees the environment the process started with; what Python set
# before the package's first call that needs the driver (os.environ["STREAMBRIDGE_DRIVER"] =
# "sim", say, before or after the import) is handed over by that call, which loads it.
def _init_entries() -> None:
    """Hands Go the settings, loads the driver and hands the core its entry points (the first
    gate calls this); later changes to the settings are not seen."""
    for name in _tables.SETTINGS:
        if name in os.environ:
            value = os.environ[name]
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"streambridge: bad setting: {name}={value!r} is not UTF-8 text, which streambridge "
                                 "reads its settings as") from None
            _native.pyshim_Setenv(name, value)
    core.init(*(_native.pyshim_Entry(name) for name in _tables.ENTRY_NAMES), _native.pyshim_CaptureGate())


atexit.register(core.at_exit)  # queued Python host callbacks must not enter a finalizing interpreter
gate = core.gate


def _go(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A call into Go, behind the gate. Each is declared below with the types of its Go
    function (pyshim/pyshim.go; gopy's wrappers carry none)."""

    def call(*args: Any) -> Any:
        gate()
        return fn(*args)

    call.__name__ = call.__qualname__ = fn.__name__
    return call


driver_name: Callable[[], str] = _go(_native.pyshim_DriverName)
wrap_stream: Callable[[int, int, int, bool], int] = _go(_native.pyshim_WrapStream)
stream_handle: Callable[[int], int] = _go(_native.pyshim_StreamHandle)
stream_priority: Callable[[int], int] = _go(_native.pyshim_StreamPriority)
stream_id: Callable[[int], int] = _go(_native.pyshim_StreamID)
device_count: Callable[[], int] = _go(_native.pyshim_DeviceCount)
device_description: Callable[[int], str] = _go(_native.pyshim_DeviceDescription)
driver_version: Callable[[], int] = _go(_native.pyshim_DriverVersion)
handle_proof: Callable[[], str] = _go(_native.pyshim_HandleProof)
stream_non_blocking: Callable[[int], bool] = _go(_native.pyshim_StreamNonBlocking)
stream_fence: Callable[[int], int] = _go(_native.pyshim_StreamFence)
stream_begin_capture: Callable[[int, int], bool] = _go(_native.pyshim_StreamBeginCapture)
stream_end_capture: Callable[[int], int] = _go(_native.pyshim_StreamEndCapture)
graph_launch: Callable[[int, int], bool] = _go(_native.pyshim_GraphLaunch)
graph_upload: Callable[[int, int], bool] = _go(_native.pyshim_GraphUpload)
compile_module: Callable[[int, str, str, str, str, str, bool], int] = _go(_native.pyshim_CompileModule)
module_function: Callable[[int, str], int] = _go(_native.pyshim_ModuleFunction)
module_context: Callable[[int], int] = _go(_native.pyshim_ModuleContext)
function_handle: Callable[[int], int] = _go(_native.pyshim_FunctionHandle)
live_keys: Callable[[], int] = _native.pyshim_LiveStreams  # the count of open keys; no driver
live_events = core.live_events  # the count of events the core made and has not destroyed
live_streams = core.live_streams  # the count of streams the core made and has not destroyed
proofs = core.proofs  # (streams here, in Go, events here, in Go): the proofs by loads in the core, and by the Go check
load_word = core.load_word  # a word read as the proofs read, guarded: None where a fault ended the load
arena_heap = core.arena_heap  # the base of the glibc arena's first heap the proofs may load from at an address, or None
validation_reads: Callable[[], str] = _native.pyshim_ValidationReads  # diagnostics; no driver
read_words: Callable[[int, int], str] = _go(_native.pyshim_ReadWords)  # host memory, fault-protected (DLPack capsules)

# release(key, kind): the one close of a key (a _tables.OBJECT_*). Inside a host callback,
# where no call may enter the driver, the key is released by the next close outside one; in
# a forked child, whose objects are the parent's, it is only forgotten.
release = core.release
