"""Device arrays of any framework, read through the CUDA Array Interface (v2, v3) or DLPack:
what a kernel launch and a Go function (go_function) need to know of a torch tensor, a CuPy
array, a Numba array or a cuda.core buffer."""

from __future__ import annotations

import ctypes
from typing import Any, List, NamedTuple, Optional, Tuple

from . import _core
from ._errors import DeviceMismatchError


class ArrayInfo(NamedTuple):
    """A device array as its framework describes it."""

    ptr: int
    typestr: str  # NumPy's ("<f4", "|b1"); "bfloat16" for DLPack's bfloat, which NumPy lacks
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]  # bytes, always given (a C-contiguous array's filled in)
    device: int  # -1 where the framework does not say (a CUDA Array Interface without DLPack)
    readonly: bool
    stream: Optional[int]  # a v3 interface's producer stream to wait for (1, 2 or a handle)

    def go(self) -> str:
        """The text form the Go side reads (bridge.ParseArray)."""
        return (f"array device={self.device} ptr={self.ptr:#x} dtype={self.typestr} "
                f"shape={','.join(map(str, self.shape))} strides={','.join(map(str, self.strides))} "
                f"readonly={'true' if self.readonly else 'false'}")


def _contiguous(shape: Tuple[int, ...], itemsize: int) -> Tuple[int, ...]:
    strides, step = [], itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def _itemsize(typestr: str) -> int:
    if typestr == "bfloat16":
        return 2
    if len(typestr) < 3 or not typestr[2:].isdigit():
        raise ValueError(f"__cuda_array_interface__ typestr {typestr!r} is not a NumPy type string")
    return int(typestr[2:])


def array_info(obj: Any, consumer: Optional[int] = None, device: Optional[int] = None,
               user: str = "") -> Optional[ArrayInfo]:
    """The array ``obj`` describes, and how to order its producer's work before
    ``consumer``, the stream that will use the data (DLPack's convention: 1 legacy, 2
    per-thread, else a handle); None for an object that speaks neither protocol.

    A ``__cuda_array_interface__`` of version 3 says its producer's stream: it comes back in
    ``stream`` for the caller to wait on (0 there is an error, as v3 says; None is nothing
    to wait for). An earlier version says nothing of it (torch's is version 2), so where the
    object also speaks DLPack, DLPack is read: ``__dlpack__(stream=consumer)`` makes the
    producer order its work before ``consumer`` (torch: its current stream's).

    Where ``device`` is given (that of ``user``, a kernel), an array that says it is on
    another device (``__dlpack_device__``: torch, CuPy) raises DeviceMismatchError before it
    is read, which a producer may refuse (torch, for a tensor of a device not current) or act
    on: the work would fault reading it (an illegal address, fatal to the context). An
    ``int`` pointer is not checked: pass one where peer access makes the memory readable."""
    cai = getattr(obj, "__cuda_array_interface__", None)
    dlpack = hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__")
    said = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else None
    on = _ordinal(said)
    if device is not None and on >= 0 and on != device:
        raise DeviceMismatchError(f"the array is on device {on}, {user} on device {device}: copy it there, or use "
                                  f"one of device {on}")
    if cai is not None and not (dlpack and _version(cai) < 3):
        return _from_interface(cai, on)
    if dlpack:
        return _from_dlpack(obj, consumer, said)
    return None


def _ordinal(said: Any) -> int:
    """The CUDA device a ``__dlpack_device__`` answer names; -1 where it names none."""
    if not isinstance(said, tuple) or len(said) != 2:
        return -1
    dev_type, dev_id = said
    return dev_id if dev_type == _KDL_CUDA and isinstance(dev_id, int) and not isinstance(dev_id, bool) else -1


def _version(cai: Any) -> int:
    """An interface's version (3 and later say their producer's ``stream``)."""
    if not isinstance(cai, dict):
        raise TypeError(f"__cuda_array_interface__ must be a dict, not {type(cai).__name__}")
    version = cai.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise TypeError(f"__cuda_array_interface__ version must be an int, not {version!r}")
    return version


def _ints(field: str, values: Any, low: int, high: int) -> None:
    """Each of values an int (not a bool: a TypeError) in [low, high) (a ValueError), which
    the Go side reads as a word; field names them in the error."""
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"__cuda_array_interface__ {field} must be ints, not {type(v).__name__} ({v!r})")
        if not low <= v < high:
            raise ValueError(f"__cuda_array_interface__ {field} {v} is out of range ({low} to {high - 1})")


def _from_interface(cai: Any, device: int) -> ArrayInfo:
    version = _version(cai)
    data = cai.get("data")
    if not isinstance(data, tuple) or len(data) != 2:
        raise ValueError(f"__cuda_array_interface__ data must be (pointer, read_only), not {data!r}")
    _ints("data pointer", data[:1], 0, 2**64)
    shape = cai.get("shape")
    if not isinstance(shape, tuple):
        raise TypeError(f"__cuda_array_interface__ shape must be a tuple, not {type(shape).__name__}")
    _ints("shape", shape, 0, 2**63)
    typestr = cai.get("typestr")
    if not isinstance(typestr, str):
        raise TypeError(f"__cuda_array_interface__ typestr must be a str, not {typestr!r}")
    strides = cai.get("strides")
    if strides is None:
        strides = _contiguous(shape, _itemsize(typestr))
    elif not isinstance(strides, tuple) or len(strides) != len(shape):
        raise ValueError(f"__cuda_array_interface__ strides must be None or one per dimension, not {strides!r}")
    _ints("strides", strides, -2**63, 2**63)
    stream = cai.get("stream") if version >= 3 else None
    if stream == 0:
        raise ValueError("__cuda_array_interface__ stream 0 is not allowed (v3: use 1 for the legacy "
                         "default stream, 2 for the per-thread one, None for no synchronization)")
    if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int)):
        raise TypeError(f"__cuda_array_interface__ stream must be an int or None, not {stream!r}")
    return ArrayInfo(data[0], typestr, shape, tuple(strides), device, bool(data[1]), stream)


_KDL_CUDA = 2
_DL_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}  # DLDataTypeCode; 4 is bfloat
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
# DLManagedTensorVersioned (DLPack 1.x): version, manager_ctx, deleter and flags, then the
# DLTensor; flag bit 0 is read-only. A DLTensor is six words: data; device (type, id);
# ndim and dtype (code, bits, lanes); shape; strides; byte_offset.
_VERSIONED_FLAGS_WORD, _VERSIONED_TENSOR_AT, _READ_ONLY = 3, 32, 1
_MAX_NDIM = 64


def _exported(obj: Any, device: int, consumer: Optional[int]) -> Any:
    """``obj.__dlpack__(stream=consumer)``, with obj's device current on the calling thread:
    torch exports a tensor only so (BufferError otherwise), whichever device a launch or a Go
    function is on. The thread's context is then set back exactly as it was (another
    device's, a green context's, or none)."""
    before = _core.core.enter_device(device)
    try:
        return obj.__dlpack__(stream=consumer)
    finally:
        _core.core.leave_device(before)


def _words(addr: int, n: int, what: str) -> List[int]:
    """n words at addr, read without letting a bad pointer fault (the Go core's protected
    reader, as for stream handles)."""
    try:
        raw = bytes.fromhex(_core.read_words(addr, n))
    except ValueError as e:
        raise ValueError(f"__dlpack__ returned a capsule whose {what} is not readable: {e}") from None
    return [int.from_bytes(raw[i:i + 8], "little") for i in range(0, len(raw), 8)]


def _signed(v: int, bits: int = 64) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def _from_dlpack(obj: Any, consumer: Optional[int], said: Any) -> ArrayInfo:
    """A DLPack producer's array. The capsule is read, not consumed: the producer keeps
    ownership (released with the capsule), and ``obj`` must outlive the use of the data.
    Every pointer in it is read through the Go core's fault-protected reader, so a broken
    producer gets a ValueError, not a crash. ``said`` is what its ``__dlpack_device__`` said."""
    if not isinstance(said, tuple) or len(said) != 2:
        raise TypeError(f"__dlpack_device__ must return (device_type, device_id), not {said!r}")
    dev_type, dev_id = said
    if dev_type != _KDL_CUDA:
        raise ValueError(f"a DLPack array must be on a CUDA device, not device type {dev_type}")
    if isinstance(dev_id, bool) or not isinstance(dev_id, int) or not 0 <= dev_id < 2**31:
        raise ValueError(f"__dlpack_device__ must name a device ordinal, not {dev_id!r}")
    capsule = _exported(obj, dev_id, consumer)
    if type(capsule).__name__ != "PyCapsule":
        raise TypeError(f"__dlpack__ must return a PyCapsule, not {type(capsule).__name__}")
    name = _capsule_name(capsule)
    if name not in (b"dltensor", b"dltensor_versioned"):
        raise ValueError(f"__dlpack__ returned a capsule named {name!r}, not an unused DLPack tensor")
    managed = _capsule_pointer(capsule, name) or 0
    readonly = False
    if name == b"dltensor_versioned":
        readonly = bool(_words(managed, _VERSIONED_FLAGS_WORD + 1, "header")[_VERSIONED_FLAGS_WORD] & _READ_ONLY)
        managed += _VERSIONED_TENSOR_AT
    data, device, ndim_dtype, shape_at, strides_at, byte_offset = _words(managed, 6, "tensor")
    ndim, dtype = _signed(ndim_dtype, 32), ndim_dtype >> 32
    if not 0 <= ndim <= _MAX_NDIM:
        raise ValueError(f"__dlpack__ returned a tensor of {ndim} dimensions")
    code, bits, lanes = dtype & 0xFF, (dtype >> 8) & 0xFF, dtype >> 16
    if lanes != 1 or bits % 8 or not bits or (code not in _DL_KINDS and code != 4):
        raise ValueError(f"DLPack dtype (code {code}, {bits} bits, {lanes} lanes) has no NumPy type string")
    size = bits // 8
    typestr = "bfloat16" if code == 4 else ("|" if size == 1 else "<") + _DL_KINDS[code] + str(size)
    shape = tuple(_signed(d) for d in _words(shape_at, ndim, "shape")) if ndim else ()
    if any(d < 0 for d in shape):
        raise ValueError(f"__dlpack__ returned a negative shape {shape}")
    if strides_at and ndim:
        strides = tuple(_signed(st) * size for st in _words(strides_at, ndim, "strides"))
    else:
        strides = _contiguous(shape, size)
    device_id = _signed(device >> 32, 32)
    return ArrayInfo((data + byte_offset) & ((1 << 64) - 1), typestr, shape, strides, device_id, readonly, None)
