"""Kernel arguments and launch checks, on any driver (launching itself needs a GPU: see
interop_test/test_kernels.py)."""

import struct

import numpy
import pytest

import streambridge
from streambridge._kernel import _dim3, marshal


class CAI:
    """An array speaking the CUDA Array Interface, as a framework's would."""

    def __init__(self, ptr, version=3, **extra):
        self.__cuda_array_interface__ = dict(shape=(4,), typestr="<f4", data=(ptr, False), version=version, **extra)


def bits(fmt, v):
    return int.from_bytes(struct.pack("<" + fmt, v).ljust(8, b"\0"), "little")


def test_scalars_take_cupys_types_and_numpy_scalars_their_own():
    values, waits = marshal((7, -1, 2.5, True, numpy.float32(2.5), numpy.int32(-3), numpy.uint8(255), numpy.float64(1.0)))
    assert values == (7, 2**64 - 1, bits("d", 2.5), 1, bits("f", 2.5), bits("i", -3), 255, bits("d", 1.0))
    assert waits == []


def test_device_arrays_pass_their_pointer_and_the_v3_stream_rules():
    assert marshal((CAI(0x1000, version=2),)) == ((0x1000,), []), "v2: no stream, no wait"
    assert marshal((CAI(0x1000, stream=None),)) == ((0x1000,), []), "v3 None: no wait"
    arrays = (CAI(0x1000, stream=1), CAI(0x2000, stream=2), CAI(0x3000, stream=0xABC0))
    assert marshal(arrays)[1] == [(1, arrays[0]), (2, arrays[1]), (0xABC0, arrays[2])], "each with its array"
    with pytest.raises(ValueError, match="stream 0 is not allowed"):
        marshal((CAI(0x1000, stream=0),))
    with pytest.raises(ValueError, match="data must be"):
        marshal((type("Bad", (), {"__cuda_array_interface__": {"data": None, "version": 3}})(),))


@pytest.mark.parametrize("bad, error", [
    ("text", TypeError), (object(), TypeError), (2**64, ValueError), (numpy.complex128(1j), ValueError),
])
def test_bad_arguments_are_type_and_value_errors(bad, error):
    with pytest.raises(error):
        marshal((bad,))
    with pytest.raises(TypeError):
        marshal(5)


def test_grid_and_block_shapes():
    assert _dim3(4, "grid") == (4, 1, 1) and _dim3((2, 3), "grid") == (2, 3, 1)
    for bad in ((), (1, 2, 3, 4), 1.5, (0,), (True,)):
        with pytest.raises((TypeError, ValueError)):
            _dim3(bad, "grid")


def test_compiling_says_why_it_cannot(driver_name):
    try:
        streambridge.Module("extern \"C\" __global__ void k() {}")
    except streambridge.NoDriverError as e:
        assert "NVRTC" in str(e)  # this machine has no libnvrtc: a clear error, not a crash
    except streambridge.CUDAError as e:
        assert driver_name == "sim" and e.name == "CUDA_ERROR_NOT_SUPPORTED", "the software driver loads no code"
    else:
        assert driver_name == "cuda"
