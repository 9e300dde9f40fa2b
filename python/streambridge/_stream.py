"""Streams: ExternalStream, with the signatures of cupy.cuda.ExternalStream and
torch.cuda.ExternalStream."""

from __future__ import annotations

import inspect
import threading
from typing import Any, Dict, List, Optional, Tuple

from . import _core
from ._core import core as _c
from ._device import Device, as_index, device_index, device_or_current
from ._errors import NotStreamLikeError, ProtocolError
from ._event import Event
from ._graph import Graph, end_capture
from ._provenance import frameworks_own


def callback_errors() -> List[BaseException]:
    """The exceptions raised in host callbacks (``launch_host_func``, ``add_callback``)
    since the last call, oldest first: reading them empties the list, so each is returned
    once. Each was also printed by ``sys.unraisablehook``.
    The newest ``CALLBACK_ERRORS_KEPT`` (1000) are kept: older ones are dropped, and
    counted by :func:`callback_errors_dropped`."""
    return _c.callback_errors()


def callback_errors_dropped() -> int:
    """How many host callbacks' exceptions were dropped, the oldest first, because more
    than ``CALLBACK_ERRORS_KEPT`` waited for :func:`callback_errors` (since the process
    began)."""
    return _c.callback_errors_dropped()


#: How many host callbacks' exceptions :func:`callback_errors` keeps, the newest.
CALLBACK_ERRORS_KEPT: int = _c.CALLBACK_ERRORS_KEPT


def _protocol_handle(obj: Any) -> int:
    """The handle of an object speaking ``__cuda_stream__`` (version 0: ``(0, handle)``)."""
    return _protocol_value(obj.__cuda_stream__())


def _protocol_value(value: Any) -> int:
    """The handle in an answer of ``__cuda_stream__``: ProtocolError for any other answer."""
    if not isinstance(value, tuple) or len(value) != 2:
        raise ProtocolError(f"__cuda_stream__ must return (version, handle), not {value!r}")
    version, handle = value
    if type(version) is not int or version != 0:
        raise ProtocolError(f"__cuda_stream__ version {version!r} is not supported (streambridge speaks "
                            "version 0, the int)")
    if as_index(handle) is None:
        raise ProtocolError(f"__cuda_stream__'s handle must be an int, not {type(handle).__name__}")
    return _handle(handle)


def _handle(value: Any) -> int:
    ptr = as_index(value)
    if ptr is None:
        raise TypeError(f"stream pointer must be an int, not {type(value).__name__}")
    if ptr < 0 or ptr >= 1 << 64:
        raise ValueError(f"stream pointer {ptr} is out of range for a CUstream")
    return ptr


class _BaseStream(_c.StreamCore):
    """What every streambridge stream does. The C core (core.c) makes and fills it and holds,
    read-only, ``_ptr`` (the CUstream), ``_ctx`` (the context a special handle 0, 1 or 2 is
    read in), ``_device``, ``_fence``, ``_open``, ``_owned``, ``_k`` and, for a borrowed
    stream object, ``_id`` (its cuStreamGetId when wrapped: every use checks the handle is
    still that stream, so a destroyed stream whose address a new one took is refused), and
    ``_owner``. It is the one path of the frequent calls: ``query``, ``record``,
    ``wait_event``, ``wait_stream``, ``launch_host_func``, ``add_callback`` and ``close``,
    for every kind of stream. The rest goes through the Go core under ``_key``, a Go stream
    the core makes on first need."""

    @property
    def ptr(self) -> int:
        """The CUstream, as an int (CuPy's name)."""
        return self._ptr

    @property
    def cuda_stream(self) -> int:
        """The CUstream, as an int (PyTorch's name). A property of its own, not ``= ptr``: a
        type checker reads an alias of a property as a method."""
        return self._ptr

    @property
    def handle(self) -> int:
        """The CUstream, as an int (cuda.core's name)."""
        return self._ptr

    @property
    def device_id(self) -> int:
        """The device the stream is on (for a borrowed stream object, read from the handle)."""
        return self._device

    @property
    def priority(self) -> int:
        """cuStreamGetPriority: lower is higher priority."""
        return self._use(_core.stream_priority)  # held: a close meanwhile waits to destroy it

    @property
    def id(self) -> int:
        """cuStreamGetId, Go's Stream.ID: unique among the process's streams for its life, so
        a stream made at a destroyed one's address has another. A stream object's is read
        once (a borrowed one's when it was wrapped, and checked before every use), so it is
        known during a capture too, where the driver would refuse the question and
        invalidate the capture. The special handles' (0, 1, 2: the per-thread stream's is
        the calling thread's) is asked each time, and refused while capturing (CaptureError)."""
        return self._id or self._use(_core.stream_id)

    @property
    def is_non_blocking(self) -> bool:
        """Whether the stream does not synchronize with the legacy default stream. Refused
        while it is capturing (CaptureError): the driver would invalidate the capture."""
        return self._use(_core.stream_non_blocking)

    @property
    def is_nonblocking(self) -> bool:
        """:attr:`is_non_blocking`, as cuda.core spells it."""
        return self.is_non_blocking

    @property
    def done(self) -> bool:
        """``query()``, as CuPy spells it."""
        return self.query()

    sync = _c.StreamCore.synchronize  # synchronize() is the core's: Ctrl-C ends its wait

    def record_event(self, event: Optional[Event] = None) -> Event:
        """PyTorch's name for :meth:`record`."""
        return self.record(event)

    def begin_capture(self, mode: Any = None) -> None:
        """Capture the work submitted to this stream from now on into a graph instead of
        running it (cuStreamBeginCapture), as CuPy's ``begin_capture``. ``mode``:
        ``"global"``, ``"thread_local"``, ``"relaxed"`` or their CUstreamCaptureMode numbers
        0, 1, 2; None is relaxed, as in CuPy. Any stream object can be captured, whichever
        framework made it; work from torch, CuPy and Go kernels on it is captured alike."""
        modes = {None: 2, "global": 0, "thread_local": 1, "relaxed": 2, 0: 0, 1: 1, 2: 2}
        if type(mode) not in (int, str, type(None)) or mode not in modes:
            raise ValueError(f"capture mode must be one of 'global', 'thread_local', 'relaxed' (0, 1, 2), not {mode!r}")
        self._capture(_core.stream_begin_capture, modes[mode])

    def end_capture(self) -> Graph:
        """End the capture and return the executable :class:`Graph` (cuStreamEndCapture,
        cuGraphInstantiateWithFlags). A capture invalidated by a forbidden call raises."""
        return end_capture(self)

    def __cuda_stream__(self) -> Tuple[int, int]:
        self._verify()
        return (0, self._ptr)

    def use(self) -> "_BaseStream":
        """Make this the current stream of its device for the calling thread (see
        :func:`current_stream`), until another ``use()`` or the end of an enclosing ``with``;
        returns self. A closed (or destroyed) stream raises."""
        self._verify()
        _current_streams.use(self)
        return self

    def __enter__(self) -> "_BaseStream":
        """Make this the current stream of its device for the calling thread until the block
        ends; then the stream of the enclosing ``with`` on that device is current again (the
        default stream outside any), whatever ``use()`` set inside (CuPy's rule)."""
        self._verify()
        _current_streams.push(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _current_streams.pop()

    def __eq__(self, other: object) -> bool:
        """The same stream: the same handle (and for 0/1/2, the same device)."""
        if not isinstance(other, _BaseStream) or self._ptr != other._ptr:
            return False
        return self._ptr > 2 or self._device == other._device

    def __hash__(self) -> int:
        return hash(self._ptr)  # equal streams have equal handles

    def __repr__(self) -> str:
        kind = "owned" if self._owned else "borrowed"
        device = "?" if not self._open and self._device < 0 else self.device_id
        closed = "" if self._open else " closed"
        return f"<streambridge.{type(self).__name__} ptr={self._ptr:#x} device={device} {kind}{closed}>"

    @property
    def device(self) -> Device:
        """The stream's device as a :class:`Device`: an ``int`` (CuPy's ``device_id``) that
        also has PyTorch's ``type`` and ``index`` and cuda.core's ``device_id``."""
        return Device(self.device_id)

    # Conversions. Each returns the framework's own object for this same CUstream, which
    # keeps this stream alive; the framework is imported only here, once the stream is
    # proven usable. The stream is held while the framework makes its object (_use): a close
    # on another thread meanwhile leaves the destroy until the framework is done with the
    # handle, which it may ask the driver about.

    def to_torch(self) -> Any:
        """A ``torch.cuda.Stream`` for this stream. 0 and 1 become
        ``torch.cuda.default_stream`` (the legacy default stream): ``torch.cuda.ExternalStream(0)``
        would silently make a new stream, and torch rejects 1.

        Torch keeps this stream's handle in a pinned tensor copied on it with
        ``non_blocking=True`` (and in a tensor given to ``record_stream``) and records an
        event on it when the tensor is freed: close this stream only after such tensors are
        gone, or the process ends in torch (docs/python.md)."""
        return self._use(self._to_torch)

    def _to_torch(self, _key: int) -> Any:
        import torch

        dev = torch.device("cuda", self.device_id)
        if self._ptr in (0, 1):  # torch reads 1 as a stream ID; its default stream is the legacy one
            return torch.cuda.default_stream(dev)
        ts = torch.cuda.ExternalStream(self._ptr, device=dev)
        ts._streambridge = self
        return ts

    def to_cupy(self) -> Any:
        """A ``cupy.cuda`` stream for this stream, which keeps it alive and reports its
        device (``device_id``), so CuPy runs work on it on that device whichever is current.
        The legacy default stream too is this device's (``cupy.cuda.Stream.null`` would be
        the current device's)."""
        return self._use(self._to_cupy)

    def _to_cupy(self, _key: int) -> Any:
        import cupy

        with cupy.cuda.Device(self.device_id):
            from_external = getattr(cupy.cuda.Stream, "from_external", None)
            if from_external is None:  # before CuPy 14
                cs = cupy.cuda.ExternalStream(self._ptr, self.device_id)
                cs._streambridge = self  # kept alive with it
                return cs
            held = _Held(self)
            try:
                cs = from_external(held)  # keeps held, and with it this stream, alive
            finally:
                held.held = False
        # __cuda_stream__ carries no device, so CuPy 14 leaves it unset (-1: the current one)
        cs.device_id = self.device_id
        return cs

    def to_cuda_core(self) -> Any:
        """A ``cuda.core.Stream`` for this stream, through ``Device.create_stream(self)``,
        which speaks ``__cuda_stream__`` and keeps this object alive."""
        return self._use(self._to_cuda_core)

    def _to_cuda_core(self, _key: int) -> Any:
        from cuda.core import Device as CoreDevice

        dev = CoreDevice(self.device_id)
        dev.set_current()
        return dev.create_stream(self)

    def to_numba(self) -> Any:
        """A Numba stream for this stream (``numba.cuda.external_stream``; 0, 1 and 2 are
        Numba's default, legacy and per-thread default streams)."""
        return self._use(self._to_numba)

    def _to_numba(self, _key: int) -> Any:
        if _numba_started.is_set():
            return self._numba_stream()
        with _numba_first:  # Numba's first use, one thread at a time (_numba_first says why)
            ns = self._numba_stream()
            _numba_started.set()
            return ns

    def _numba_stream(self) -> Any:
        from numba import cuda

        with cuda.gpus[self.device_id]:
            if self._ptr == 0:
                return cuda.default_stream()
            if self._ptr == 1:
                return cuda.legacy_default_stream()
            if self._ptr == 2:
                return cuda.per_thread_default_stream()
            ns = cuda.external_stream(self._ptr)
            ns._streambridge = self
            return ns


# Numba makes its device list (``cuda.gpus``) on first use without a lock: eight threads making
# their first conversions at once, two or three raised AssertionError("key already in
# dictionary: 0") from numba-cuda's ``driver.get_device`` (H200). So the first conversion to
# Numba in a process runs alone, the later ones as they come.
_numba_first = threading.Lock()
_numba_started = threading.Event()


class _Held:
    """A stream as ``__cuda_stream__`` shows it to a framework that makes its object from
    the protocol (CuPy 14's ``Stream.from_external``), while the conversion holds it: its
    handle then, though a close on another thread has already refused the stream's own
    ``__cuda_stream__`` (whose ClosedError the framework would turn into its TypeError),
    and the stream's answer after."""

    def __init__(self, stream: "_BaseStream") -> None:
        self.stream, self.held = stream, True

    def __cuda_stream__(self) -> Tuple[int, int]:
        return (0, self.stream._ptr) if self.held else self.stream.__cuda_stream__()


class ExternalStream(_c.ExternalCore, _BaseStream):
    """A stream another library created, borrowed: streambridge never destroys it.

    ``ExternalStream(ptr, device_id=-1)`` as in CuPy, or ``ExternalStream(stream_ptr=...,
    device=...)`` as in PyTorch (an int, ``"cuda:1"`` or a ``torch.device``). The handle is
    proven to be a live stream before the driver sees it: a garbage or freed handle raises
    :class:`InvalidHandleError`. Its device is read from the handle; a stated device that
    disagrees raises :class:`DeviceMismatchError`. 0, 1 and 2 are the CUDA runtime's default
    streams of the stated device (the calling thread's current device if none).

    On a driver whose stream layout cannot be learned nothing can be proven, and a bare
    handle raises :class:`CUDAError` (``CUDA_ERROR_NOT_SUPPORTED``) saying so; ``vouched=True`` is your word that
    the handle is a live stream and stays one while this object is used, and takes it there
    (where the layout is known it is proven as ever). A stream given as another framework's
    object (:func:`as_stream`, ``from_external``) is vouched for by that object, kept alive
    with it.
    """

    # Made by ExternalCore's constructor: in C for a stream object's handle given as CuPy
    # does (core.c, external_core_new), else by _init.

    def _init(self, ptr: Optional[int] = None, device_id: Any = -1, *,
              stream_ptr: Optional[int] = None, device: Any = None, vouched: bool = False) -> None:
        if stream_ptr is None:
            if ptr is None:
                raise TypeError("give the stream pointer once: ptr (CuPy) or stream_ptr (PyTorch)")
        elif ptr is None:
            ptr, device_id = stream_ptr, device
        else:
            raise TypeError("give the stream pointer once: ptr (CuPy) or stream_ptr (PyTorch)")
        if not isinstance(vouched, bool):
            raise TypeError(f"vouched is a bool, not {type(vouched).__name__}")
        self._fill(_handle(ptr), device_index(device_id), vouched)  # the core's one fill (core.c, fill_external)


ExternalStream.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    list(inspect.signature(ExternalStream._init).parameters.values())[1:])

def _stream_to_wait_for(obj: Any) -> "_BaseStream":
    """The stream ``Stream.wait`` (the C core's) waits for where obj is neither an Event nor
    a streambridge stream: another framework's stream object, as :func:`as_stream` reads it.
    An int handle is refused: it could be an event's or a stream's."""
    if as_index(obj) is not None:
        raise NotStreamLikeError("wait takes an Event or a stream object, not an int handle (it could be an "
                                 "event's or a stream's: wrap it with as_stream)")
    try:
        return as_stream(obj)
    except NotStreamLikeError:
        raise NotStreamLikeError(f"wait takes an Event or a stream object, not {type(obj).__name__}") from None


_UNASKED = object()


def _from_external(obj: Any, value: Any = _UNASKED) -> ExternalStream:
    """CuPy 14's ``Stream.from_external``: borrow the stream of any object speaking the
    ``__cuda_stream__`` protocol, keeping the object alive as long as the stream. ``value``
    is the object's answer when the C core (core.c, from_external) already asked."""
    if value is _UNASKED:
        if not hasattr(type(obj), "__cuda_stream__"):
            raise NotStreamLikeError(f"{type(obj).__name__} does not speak the __cuda_stream__ protocol")
        value = obj.__cuda_stream__()
    s = ExternalStream(_protocol_value(value), vouched=frameworks_own(obj))  # obj is kept: its word, if its framework's
    s._owner = obj
    return s



class Stream(_c.OwnedCore, _BaseStream):
    """A CUDA stream, as ``cupy.cuda.Stream(null=False, non_blocking=False, ptds=False,
    priority=None)``: created and owned by streambridge (cuStreamCreateWithPriority), or,
    with ``null`` or ``ptds``, the device's legacy or per-thread default stream. ``device``
    (streambridge's addition) picks the device, 0 by default. The C core makes it (stream.inc,
    stream_made_of) and destroys it on close or collection.
    """

    @classmethod
    def from_handle(cls, handle: int) -> ExternalStream:
        """cuda.core's ``Stream.from_handle``: borrow a stream by its handle."""
        return ExternalStream(handle)

    # CuPy 14's Stream.from_external(obj): in C for the common case (core.c,
    # from_external), else _from_external above.
    from_external = classmethod(_c.from_external)


# The arguments as the core's initializer reads them, declared there (OwnedCore's doc).
Stream.__signature__ = inspect.signature(_c.OwnedCore)  # type: ignore[attr-defined]
_c.constructs(Stream)  # Stream(...) goes straight to the core's constructor (readers.inc)

class _CurrentStreams(threading.local):
    """A thread's current streams, one per device, under CuPy's rules (cupy/cupy#5143):
    ``with`` pushes its stream on its device's stack and the end of the block makes the
    stack's new top current (the default stream when it is empty); ``use()`` changes the
    current stream only, so the end of an enclosing ``with`` forgets it."""

    def __init__(self) -> None:
        self.current: Dict[int, _BaseStream] = {}
        self.stacks: Dict[int, List[_BaseStream]] = {}
        self.entered: List[int] = []  # the device of each open with-block, innermost last

    def use(self, stream: _BaseStream) -> None:
        self.current[stream._device] = stream

    def push(self, stream: _BaseStream) -> None:
        self.stacks.setdefault(stream._device, []).append(stream)
        self.entered.append(stream._device)
        self.current[stream._device] = stream

    def pop(self) -> None:
        if not self.entered:
            return
        device = self.entered.pop()
        stack = self.stacks[device]
        stack.pop()
        if stack:
            self.current[device] = stack[-1]
        else:
            self.current.pop(device, None)


    def of(self, device: int) -> "_BaseStream":
        stream = self.current.get(device)
        return default_stream(device) if stream is None else stream


_current_streams = _CurrentStreams()


def current_stream(device: Any = None) -> "_BaseStream":
    """The calling thread's current stream of ``device`` (the current device by default, as
    every streambridge constructor: :func:`current_device`): the one made current by
    ``use()`` or ``with``, else the device's legacy default stream, as
    ``cupy.cuda.get_current_stream`` and ``torch.cuda.current_stream`` answer. Only
    streambridge's calls read it: ``with s`` does not make ``s`` CuPy's or PyTorch's current
    stream."""
    return _current_streams.of(device_or_current(device))


def _numba_handle(obj: Any) -> Optional[int]:
    """A Numba stream's handle: a ctypes ``c_void_p`` (None is the NULL stream) or, in
    numba-cuda with cuda-python bindings, a ``CUstream`` that converts with ``int``."""
    h = getattr(obj, "handle", None)
    if h is None:
        return None
    if hasattr(h, "value"):
        return h.value or 0 if isinstance(h.value, (int, type(None))) else None
    if type(obj).__module__.split(".")[0] != "numba":
        return None
    try:
        return int(h)
    except TypeError:
        return None


_defaults: Dict[int, ExternalStream] = {}


def default_stream(device: int) -> ExternalStream:
    """A device's legacy default stream (handle 0), wrapped once for the process."""
    s = _defaults.get(device)
    if s is None:
        s = _defaults.setdefault(device, ExternalStream(0, device))
    return s


def resolve(stream: Any, device: int) -> _BaseStream:
    """The stream a call with ``stream=`` works on: a stream-like as :func:`as_stream`
    takes it; for None, this thread's current stream of ``device`` (:func:`current_stream`),
    as CuPy and PyTorch take None: their current stream, by default the default one."""
    if stream is None:
        return _current_streams.of(device)
    return stream if isinstance(stream, _BaseStream) else as_stream(stream)



def as_stream(obj: Any, device: Any = None, *, vouched: bool = False) -> _BaseStream:
    """A streambridge stream for anything stream-like: a streambridge stream (returned as
    is); an int handle; an object speaking ``__cuda_stream__`` (cuda.core, CuPy 14, recent
    PyTorch); a ``torch.cuda.Stream`` (``.cuda_stream``), a ``cupy.cuda.Stream`` (``.ptr``)
    or a Numba stream (``.handle.value``). The object is kept alive with the stream; its
    device is read from the handle and checked against ``device`` if given. Where the
    driver's layout cannot be learned, a framework's own stream object (its class as its
    module defines it) vouches for its handle; any other object, a ``__cuda_stream__`` one
    too, is refused as a bare int is, unless ``vouched=True`` says you know it is a live
    stream for as long as the object is kept (the object is kept with the stream).
    """
    if not isinstance(vouched, bool):
        raise TypeError(f"vouched is a bool, not {type(vouched).__name__}")
    if isinstance(obj, _BaseStream):
        return obj
    handle = as_index(obj)  # an int, or a NumPy integer
    if handle is not None:
        return ExternalStream(handle, -1 if device is None else device, vouched=vouched)
    if hasattr(type(obj), "__cuda_stream__"):
        handle = _protocol_handle(obj)
    elif isinstance(getattr(obj, "cuda_stream", None), int):  # torch.cuda.Stream
        handle = obj.cuda_stream
    elif isinstance(getattr(obj, "ptr", None), int):  # cupy.cuda.Stream
        handle = obj.ptr
    elif (numba := _numba_handle(obj)) is not None:
        handle = numba
    else:
        raise NotStreamLikeError(f"{type(obj).__name__} is not stream-like (an int, a __cuda_stream__ object, "
                                 "or a torch, CuPy, cuda.core or Numba stream)")
    # obj is kept: its word, where it is its framework's own stream or the caller vouches
    # (anything else is proven, or refused where that cannot be, as an int is)
    s = ExternalStream(handle, -1 if device is None else device, vouched=vouched or frameworks_own(obj))
    s._owner = obj
    return s
