"""Go functions of your own, built into streambridge's native module (see :mod:`streambridge.ext`),
called with streams and arrays of any framework."""

from __future__ import annotations

import functools
from typing import Any, Callable, List, Optional, Tuple, TypeVar

from ._array import array_info
from ._core import gate
from ._kernel import dlpack_stream, hand_over_arrays, is_array, wait_producers
from ._stream import _BaseStream, as_stream


_T = TypeVar("_T")


def _is_plain(arg: Any) -> bool:
    return arg is None or isinstance(arg, (bool, int, float, str, bytes))


def _held(streams: List[_BaseStream], call: Callable[[], _T]) -> _T:
    """call() with every stream of streams held (``_use``): a close on another thread
    meanwhile leaves the destroy to after it, where the Go function would have met a
    destroyed handle; a closed one raises ClosedError first. Each stream's Go wrapper is made
    on the way (open while the stream is): where the driver's layout cannot be learned, the
    Go function's own wrap of the handle is then taken on the word the stream was taken on
    (ours, or its framework's object: streams.Vouched)."""
    if not streams:
        return call()

    def rest(_key: int) -> _T:
        return _held(streams[1:], call)

    return streams[0]._use(rest)


def go_function(fn: Callable[..., Any], hand_over: bool = False) -> Callable[..., Any]:
    """``fn``, a function of a Go package built into the native module next to streambridge
    (``streambridge.ext.gokernels.Saxpy``), made to take streams and arrays:

    - a stream-like argument (a streambridge, torch, CuPy, cuda.core or Numba stream, or a
      ``__cuda_stream__`` object) is validated and passed as its handle (``uint64`` in Go,
      which reads it with ``bridge.Default().Stream``); plain ints pass unchanged;
    - a device array (``__cuda_array_interface__`` or DLPack: torch tensors, CuPy arrays,
      cuda.core buffers) is passed as the text ``bridge.ParseArray`` reads: pointer, dtype,
      shape, strides, device. First the call's stream (its first stream argument) is made to
      wait for the array's producer: a v3 interface's stream, or DLPack's own ordering;
    - the errors the Go function returns raise streambridge's typed exceptions (the native
      module classifies them: ``bridge.DescribeForPython``);
    - like every streambridge call, it is refused in a forked child and inside a host callback;
    - with ``hand_over=True``, each array argument is handed over to the call's stream after
      the call (:func:`streambridge.hand_over`), so that its memory is not given to other work
      before the Go function's work on the stream is done, even if the caller drops the array.
      Off by default: it costs more than a launch (bench/python_bench.py).
    """
    if not callable(fn):
        raise TypeError(f"go_function takes a function of a Go package, not {type(fn).__name__}")

    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        stream: Optional[_BaseStream] = None
        streams: List[_BaseStream] = []
        passed: List[Any] = list(args)
        arrays = []
        for i, a in enumerate(args):
            if _is_plain(a):
                continue
            if is_array(a):
                arrays.append(i)
                continue
            s = as_stream(a)  # raises TypeError for what is neither
            streams.append(s)
            passed[i] = s.ptr
            stream = stream or s
        if hand_over and arrays and stream is None:
            raise ValueError("hand_over=True needs a stream argument to hand the arrays over to")
        waits: List[Tuple[int, Any]] = []
        for i in arrays:
            info = array_info(args[i], None if stream is None else dlpack_stream(stream))
            if info is None:
                raise TypeError(f"argument {i}: {type(args[i]).__name__} is not a device array")
            if info.stream is not None:
                if stream is None:
                    raise ValueError(f"argument {i}: the array's producer stream must be waited on, and the call "
                                     "has no stream argument to wait")
                waits.append((info.stream, args[i]))
            passed[i] = info.go()
        if waits:
            wait_producers(stream, waits)
        gate()
        result = _held(streams, functools.partial(fn, *passed))
        if hand_over and stream is not None:
            hand_over_arrays(args, stream)
        return result

    if hand_over is not False and hand_over is not True:
        raise TypeError(f"hand_over must be a bool, not {type(hand_over).__name__}")
    return call
