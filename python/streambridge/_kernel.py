"""Kernels from Python: compile CUDA C++ (NVRTC, through the Go core), launch on any
stream, with arguments from Python scalars, NumPy scalars and device arrays of any framework.

In the spirit of ``cupy.RawModule`` / ``cupy.RawKernel`` and ``cuda.core.launch``::

    mod = streambridge.Module(source, name_expressions=["scale<float>"])
    kernel = mod.get_kernel("scale<float>")
    streambridge.launch(kernel, grid, block, (out, x, numpy.float32(2), n), stream=s)
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _core, _handover
from ._array import array_info
from ._core import core as _c
from ._device import device_or_current
from ._errors import ClosedError, DeviceMismatchError
from ._provenance import frameworks_own
from ._stream import ExternalStream, _BaseStream, resolve

Dim = Union[int, Sequence[int]]


def _strings(value: Any, arg: str) -> List[str]:
    """``value`` as a list of str: a sequence of them (a str alone would be split into its
    characters, so it is refused, as is anything else)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{arg} must be a sequence of str (a list or tuple), not {value!r:.80}")
    return list(value)


class Module(_c.ModuleCore):
    """CUDA C++ compiled with NVRTC for a device (its architecture unless ``arch`` is given)
    and loaded there. ``options`` are nvcc-style (``"-std=c++17"``); ``include_paths`` and
    ``defines`` become ``-I`` and ``-D``; ``name_expressions`` (``"scale<float>"``) are the
    template instantiations to keep, which :meth:`get_kernel` then takes as names. A failed
    compile raises :class:`CompileError` with the compiler's whole log. Compiles are cached
    by source, options and target."""

    def __init__(self, code: str, *, options: Sequence[str] = (), name_expressions: Sequence[str] = (),
                 include_paths: Sequence[str] = (), defines: Optional[Dict[str, Any]] = None, arch: str = "",
                 ptx: bool = False, name: str = "program.cu", device: Any = None) -> None:
        if not isinstance(code, str):
            raise TypeError(f"code must be CUDA C++ source text, not {type(code).__name__}")
        for arg, value in (("name", name), ("arch", arch)):
            if not isinstance(value, str):
                raise TypeError(f"{arg} must be a str, not {type(value).__name__}")
        if not isinstance(ptx, bool):
            raise TypeError(f"ptx must be a bool, not {type(ptx).__name__}")
        if defines is not None and not isinstance(defines, Mapping):
            raise TypeError(f"defines must be a mapping of names to values, not {type(defines).__name__}")
        opts = [f"-I{p}" for p in _strings(include_paths, "include_paths")]
        opts += [f"-D{k}" if v is None or v == "" else f"-D{k}={v}" for k, v in sorted((defines or {}).items())]
        opts += _strings(options, "options")
        name_expressions = _strings(name_expressions, "name_expressions")
        for item in opts + list(name_expressions):
            if "\n" in item:
                raise ValueError(f"an option or name expression has a newline: {item!r}")
        self._device = device_or_current(device)
        self._key = _core.compile_module(self._device, code, name, arch, "\n".join(opts),
                                         "\n".join(name_expressions), bool(ptx))

    def get_kernel(self, name: str) -> "Kernel":
        """The kernel ``name`` (an ``extern "C"`` name, a mangled one, or a name expression)."""
        return Kernel(self, name)

    get_function = get_kernel  # CuPy's name

    def __enter__(self) -> "Module":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Kernel(_c.KernelCore):
    """A kernel of a :class:`Module`; ``kernel(grid, block, args, shared_mem=0, stream=None)``
    launches it, as ``cupy.RawKernel`` does: on ``stream`` (anything stream-like; the current
    streambridge stream, else the device's legacy default stream, if None) after the streams
    of the array arguments' producers (cuLaunchKernel).

    The C core (core.c) holds ``_fn`` (the CUfunction), ``_device`` and ``_module`` (whose
    close it checks, and which a launch that lets the GIL go holds open), reads the common
    case itself (ints for grid, block and shared_mem, Python ints and floats as arguments, a
    streambridge stream) and launches every call (``_launch``, which checks the module, the
    stream and their devices). Everything else is read by :meth:`_call`."""

    def __init__(self, module: Module, name: str) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"a Kernel is made from a Module (or by Module.get_kernel), not {type(module).__name__}")
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        if module._closed:  # its key may live on while a launch holds it
            raise ClosedError("the module was closed")
        self.name = name
        self._key = _core.module_function(module._key, name)
        # the module is kept alive (it owns the function) and checked open at each launch
        self._bind(_core.function_handle(self._key), _core.module_context(module._key), module._device, module)

    def _call(self, grid: Dim, block: Dim, args: Sequence[Any], *, shared_mem: int = 0,
              stream: Any = None) -> None:
        """What the C core does not read itself: stream-likes of every kind, arrays (whose
        producers are waited for) and NumPy scalars as arguments, dim3 tuples; then the
        core's launch."""
        g, b = launch_shape(grid, block, shared_mem)
        s = stream if isinstance(stream, _BaseStream) else resolve(stream, self._device)
        values, waits = marshal(args, dlpack_stream(s), self._device)
        if waits:
            wait_producers(s, waits)
        self._launch(s, g, b, shared_mem, values)

    def __repr__(self) -> str:
        return f"<streambridge.Kernel {self.name!r}>"


def launch_shape(grid: Dim, block: Dim, shared_mem: int) -> Tuple[Tuple[int, int, int], Tuple[int, int, int]]:
    """A launch's grid and block as dim3 triples, its shared memory checked a byte count."""
    if type(shared_mem) is not int or not 0 <= shared_mem < 2**32:
        raise ValueError(f"shared_mem must be a byte count, not {shared_mem!r}")
    return _dim3(grid, "grid"), _dim3(block, "block")


def argument_list(args: Any) -> None:
    """Kernel arguments come as a tuple or a list (a str is no list of arguments)."""
    if isinstance(args, (str, bytes)) or not isinstance(args, (tuple, list)):
        raise TypeError(f"kernel arguments must be a tuple or list, not {type(args).__name__}")


def _dim3(d: Dim, what: str) -> Tuple[int, int, int]:
    dims: Tuple[Any, ...]
    if isinstance(d, int) and not isinstance(d, bool):
        dims = (d,)
    elif isinstance(d, (tuple, list)) and 1 <= len(d) <= 3:
        dims = tuple(d)
    else:
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, not {d!r}")
    for v in dims:
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{what} must be ints, not {d!r}")
        if not 1 <= v < 2**32:
            raise ValueError(f"{what} dimensions must be 1 .. 2**32-1, not {d!r}")
    x, y, z = (tuple(int(v) for v in dims) + (1, 1))[:3]  # exact ints, as the core reads them
    return x, y, z


def _bits(fmt: str, value: Any) -> int:
    return int.from_bytes(struct.pack("<" + fmt, value).ljust(8, b"\0"), "little")


def dlpack_stream(s: Any) -> int:
    """The stream to hand a DLPack producer (``__dlpack__(stream=...)``) for work on ``s``:
    1 for the legacy default stream (0 in the runtime's reading), 2 for the per-thread one,
    else the handle; and -1 (DLPack's "no synchronization") while ``s`` is capturing a
    graph, which cannot depend on work outside its capture (the producer's ordering would
    be refused by the driver: order it before the capture, or before each replay)."""
    if s.is_capturing():
        return -1
    return s.ptr or 1


def marshal(args: Sequence[Any], consumer: Optional[int] = None,
            device: Optional[int] = None) -> Tuple[Tuple[int, ...], List[Tuple[int, Any]]]:
    """Each kernel argument as up to 8 bytes in an int, and the producer streams to wait for, each with its array.

    - ``bool``: 1 byte; ``int``: ``long long`` (8 bytes); ``float``: ``double``, as CuPy;
    - NumPy scalars: their own dtype and size (``numpy.float32(2)`` is a 4-byte float);
    - device arrays (``__cuda_array_interface__`` v2/v3, or DLPack: torch tensors, CuPy
      arrays, cuda.core buffers): their device pointer. A v3 interface's ``stream`` is
      honoured: the launch waits for it (1 the legacy stream, 2 the per-thread one, None
      nothing; 0 is an error); a DLPack producer is given ``consumer``, the launch's stream
      in DLPack's reading, and orders its work before it. An array that says it is on
      another device than ``device`` (the kernel's) raises DeviceMismatchError before the
      launch: the kernel would fault reading it (an illegal address, fatal to the context);
      pass its pointer as an ``int`` where peer access makes it readable;
    - streambridge-known device pointers: pass ``int`` values yourself.
    """
    if type(args) is tuple and not args:
        return (), []
    argument_list(args)
    values, waits = [], []
    for i, a in enumerate(args):
        if isinstance(a, bool):
            values.append(int(a))
        elif isinstance(a, int):
            if not -(2**63) <= a < 2**64:
                raise ValueError(f"argument {i}: {a} does not fit 64 bits")
            values.append(a & (2**64 - 1))
        elif isinstance(a, float):
            values.append(_bits("d", a))
        elif type(a).__module__ == "numpy" and hasattr(a, "dtype") and getattr(a, "ndim", None) == 0:
            raw = a.tobytes()
            if len(raw) > 8:
                raise ValueError(f"argument {i}: {a.dtype} is wider than 8 bytes")
            values.append(int.from_bytes(raw.ljust(8, b"\0"), "little"))
        else:
            try:
                info = array_info(a, consumer, device, "the kernel")
            except DeviceMismatchError as e:
                raise DeviceMismatchError(f"argument {i}: {e}") from None
            if info is None:
                raise TypeError(f"argument {i}: {type(a).__name__} is not a kernel argument (an int, float, "
                                "bool, NumPy scalar, or a device array with __cuda_array_interface__ or DLPack)")
            if info.stream is not None:
                waits.append((info.stream, a))
            values.append(info.ptr)
    return tuple(values), waits


def wait_producers(s: Any, waits: List[Tuple[int, Any]]) -> None:
    """Makes ``s`` wait for the producers' streams of a CUDA Array Interface v3, each given
    with its array: a framework's own array vouches for its stream where the driver's layout
    cannot be learned (as its stream object would: _provenance)."""
    for w, array in waits:
        if w != s.ptr:  # a stream object's device comes from its handle; 1 and 2 are s's device's
            s.wait_stream(ExternalStream(w, vouched=frameworks_own(array)) if w > 2 else ExternalStream(w, s.device_id))


def launch(kernel: Kernel, grid: Dim, block: Dim, args: Sequence[Any], stream: Any = None,
           shared_mem: int = 0, hand_over: bool = False) -> None:
    """Launch ``kernel`` on ``stream`` (anything stream-like; the current streambridge
    stream, else the device's legacy default stream, if None) after the streams of its
    array arguments' producers (cuLaunchKernel). With ``hand_over=True`` each array argument
    is then handed over to the stream (:func:`streambridge.hand_over`), so that its memory
    is not given to other work before the kernel is done with it, even if the caller drops
    the array at once. Off by default: it costs more than the launch itself
    (bench/python_bench.py, "hand_over per array argument")."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"launch takes a streambridge Kernel, not {type(kernel).__name__}")
    if hand_over is not False and hand_over is not True:
        raise TypeError(f"hand_over must be a bool, not {type(hand_over).__name__}")
    if not hand_over:
        kernel(grid, block, args, shared_mem=shared_mem, stream=stream)
        return
    s = stream if isinstance(stream, _BaseStream) else resolve(stream, kernel._device)
    kernel(grid, block, args, shared_mem=shared_mem, stream=s)
    hand_over_arrays(args, s)


def is_array(a: Any) -> bool:
    """Whether a kernel or Go function argument is a device array (read by array_info)."""
    return hasattr(a, "__cuda_array_interface__") or hasattr(a, "__dlpack__")


def hand_over_arrays(args: Sequence[Any], s: Any) -> None:
    """Hands each array of args over to s, after the work that uses them was submitted."""
    for a in args:
        if is_array(a):
            _handover.hand_over(a, s)
