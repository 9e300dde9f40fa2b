"""The Go core, through the gopy-built module.

Each name here is one call into Go (pyshim/pyshim.go). The frequent ones are the generated
C functions themselves (``_sbnative.pyshim_*``, not gopy's Python wrappers around them:
one Python frame less per call) and raise ``RuntimeError("kind|code|message")``; their
callers catch that and raise :func:`translate`'s typed exception, in a ``try`` that costs
nothing when no error is raised. The rest are wrapped here to raise typed errors.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any, Callable

from ._errors import cuda_error, translate

try:
    from ._native import _sbnative as _native
except ImportError as e:  # pragma: no cover - a broken install
    raise ImportError(f"streambridge: the native module is missing or was built for another Python: {e}") from e


# Go in an extension module sees the environment the process started with; what Python set
# before importing the package (os.environ["STREAMBRIDGE_DRIVER"] = "sim", say) is handed over.
for _name in ("STREAMBRIDGE_DRIVER", "STREAMBRIDGE_LIBCUDA", "STREAMBRIDGE_LIBNVRTC", "STREAMBRIDGE_SIM_DEVICES",
              "CUDA_HOME"):
    if _name in os.environ:
        _native.pyshim_Setenv(_name, os.environ[_name])


def _typed(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except RuntimeError as e:
            raise translate(e) from None

    return call


def _fastcall_module() -> Any:
    """The fast-call functions built into the extension (python/native/fastcall.c)."""
    make = ctypes.PyDLL(_native.__file__).sb_fastcall_module
    make.restype = ctypes.py_object
    return make()


# The most frequent calls skip Go: direct driver calls for handles the Go core validated or
# made, with entry points the Go core resolved (see fastcall.c for why). Objects use them
# once fast_calls() is true; each returns the CUresult. STREAMBRIDGE_FASTCALL=0 turns them
# off (everything then goes through Go), for comparison.
fastcall = _fastcall_module()
_fast_state: Any = None


def fast_calls() -> bool:
    """Whether the fast calls are ready: the driver loaded and offers their entry points."""
    global _fast_state
    if _fast_state is None:
        names = ("cuStreamQuery", "cuEventRecord", "cuStreamWaitEvent", "cuEventQuery", "cuLaunchHostFunc",
                 "cuStreamIsCapturing", "cuLaunchKernel")
        addresses = [_native.pyshim_Entry(n) for n in names]
        _fast_state = os.environ.get("STREAMBRIDGE_FASTCALL", "1") != "0" and all(addresses)
        if _fast_state:
            fastcall.init(*addresses)
    return _fast_state


def check(call: str, result: int) -> None:
    """Raises the typed error for a fast call's failed CUresult."""
    if result:
        raise cuda_error(call, result, _native.pyshim_ResultName(result))


# Frequent: raw, the caller translates errors.
wrap_stream = _native.pyshim_WrapStream
check_stream = _native.pyshim_CheckStream
stream_query = _native.pyshim_StreamQuery
stream_wait_stream = _native.pyshim_StreamWaitStream
stream_wait_event = _native.pyshim_StreamWaitEvent
event_record = _native.pyshim_EventRecord
event_query = _native.pyshim_EventQuery
close = _native.pyshim_Close
nop = _native.pyshim_Nop  # bench/python_bench.py: the cost of one call into Go

# The rest: typed errors here (and the frequent ones again, for where they are not frequent).
typed_close = _typed(close)
typed_wrap_stream = _typed(wrap_stream)
driver_name = _typed(_native.pyshim_DriverName)
new_stream = _typed(_native.pyshim_NewStream)
stream_handle = _typed(_native.pyshim_StreamHandle)
stream_device = _typed(_native.pyshim_StreamDevice)
stream_synchronize = _typed(_native.pyshim_StreamSynchronize)
stream_priority = _typed(_native.pyshim_StreamPriority)
stream_non_blocking = _typed(_native.pyshim_StreamNonBlocking)
new_event = _typed(_native.pyshim_NewEvent)
event_synchronize = _typed(_native.pyshim_EventSynchronize)
event_elapsed_time = _typed(_native.pyshim_EventElapsedTime)
live_streams = _native.pyshim_LiveStreams
event_handle = _typed(_native.pyshim_EventHandle)
stream_launch_cfunc = _typed(_native.pyshim_StreamLaunchCFunc)
compile_module = _typed(_native.pyshim_CompileModule)
stream_begin_capture = _typed(_native.pyshim_StreamBeginCapture)
stream_end_capture = _typed(_native.pyshim_StreamEndCapture)
stream_is_capturing = _typed(_native.pyshim_StreamIsCapturing)
graph_launch = _typed(_native.pyshim_GraphLaunch)
graph_upload = _typed(_native.pyshim_GraphUpload)
module_function = _typed(_native.pyshim_ModuleFunction)
function_handle = _typed(_native.pyshim_FunctionHandle)
launch_kernel = _typed(_native.pyshim_LaunchKernel)
stream_fence = _typed(_native.pyshim_StreamFence)
event_ipc_handle = _typed(_native.pyshim_EventIPCHandle)
open_ipc_event = _typed(_native.pyshim_OpenIPCEvent)
