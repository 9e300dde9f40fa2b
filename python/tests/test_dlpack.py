"""DLPack producers' capsules are read through the Go core's fault-protected reader: a
well-formed one is read exactly, a broken one is a ValueError, never a crash."""

import ctypes
import subprocess
import sys
import textwrap

import pytest

import streambridge
from streambridge._array import array_info

_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class Tensor(ctypes.Structure):  # DLTensor
    _fields_ = [("data", ctypes.c_uint64), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64)]


class Producer:
    """A DLPack producer over memory made here (the capsule names the DLManagedTensor,
    whose first member is the DLTensor), said to be on ``device``: by default the driver's
    last, which is not 0 where there are two, so that a device read is not a default."""

    def __init__(self, address=None, shape=(2, 3), strides=None, ndim=None, device=None):
        self.device = streambridge.device_count() - 1 if device is None else device
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.strides = (ctypes.c_int64 * len(strides))(*strides) if strides else None
        self.tensor = Tensor(0x7000_0000_1000, 2, self.device, len(shape) if ndim is None else ndim, 2, 32, 1,
                             ctypes.addressof(self.shape), self.strides and ctypes.addressof(self.strides), 16)
        self.address = ctypes.addressof(self.tensor) if address is None else address

    def __dlpack_device__(self):
        return (2, self.device)

    def __dlpack__(self, stream=None):
        return _new_capsule(self.address, b"dltensor", None)


def test_a_capsule_is_read_exactly():
    producer = Producer(strides=(1, 2))
    info = array_info(producer, 1)
    assert info.ptr == 0x7000_0000_1000 + 16 and info.typestr == "<f4" and info.device == producer.device
    assert info.shape == (2, 3) and info.strides == (4, 8) and info.stream is None
    assert array_info(Producer(), 1).strides == (12, 4), "no strides: C-contiguous"


@pytest.mark.parametrize("producer", ["Producer(address=0xdeadbeef000)", "Producer(address=8)",
                                      "Producer(ndim=1000)", "bad_shape()"])
def test_a_broken_capsule_is_a_value_error_and_the_process_lives(producer):
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parent)!r})
        from test_dlpack import Producer, array_info

        def bad_shape():
            p = Producer()
            p.tensor.shape = 0xdeadbeef000
            return p

        try:
            array_info({producer}, 1)
        except ValueError as e:
            print("refused:", e)
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "refused:" in p.stdout, p.stdout + p.stderr


class Both(Producer):
    """A producer that speaks both protocols, as torch, CuPy and JAX do; ``version`` is its
    CUDA Array Interface's, and the consumer stream DLPack was given is kept."""

    def __init__(self, version, stream=None):
        super().__init__()
        self.given = []
        self.__cuda_array_interface__ = {"data": (0x7000_0000_2000, False), "shape": (2, 3), "typestr": "<f4",
                                         "strides": None, "version": version}
        if version >= 3:
            self.__cuda_array_interface__["stream"] = stream

    def __dlpack__(self, stream=None):
        self.given.append(stream)
        return super().__dlpack__(stream)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_an_interface_without_a_stream_gives_way_to_dlpack_which_is_handed_the_consumer(version):
    # torch's interface is version 2: it names no producer stream, so only DLPack's
    # handshake (__dlpack__(stream=consumer)) orders the producer's work before the consumer.
    producer = Both(version)
    info = array_info(producer, 0x5000)
    assert producer.given == [0x5000], "DLPack was asked with the consumer's stream"
    assert info.ptr == 0x7000_0000_1000 + 16 and info.device == producer.device and info.stream is None


@pytest.mark.parametrize("stream", [None, 1, 0x6000])
def test_a_version_3_interface_is_read_and_its_stream_comes_back_to_wait_on(stream):
    producer = Both(3, stream)
    info = array_info(producer, 0x5000)
    assert producer.given == [], "a v3 interface says the stream itself: DLPack is not asked"
    assert info.ptr == 0x7000_0000_2000 and info.stream == stream and info.device == producer.device


@pytest.mark.parametrize("version", ["3", 3.0, True, None])
def test_an_interface_version_that_is_not_an_int_is_a_type_error(version):
    class Bad:
        __cuda_array_interface__ = {"data": (0x1000, False), "shape": (1,), "typestr": "<f4", "version": version}

    with pytest.raises(TypeError, match="version must be an int"):
        array_info(Bad(), 1)
