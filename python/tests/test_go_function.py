"""A Go package of one's own built into the native module (examples/gokernels), called
through go_function: streams validated and passed as handles, arrays described to Go,
producers' streams waited for, Go's errors typed. Nothing here launches a kernel on made-up
pointers; the launches on real data are in interop_test/test_go_kernels.py."""

import os
import re
import subprocess
import sys
import threading

import pytest

import streambridge
from streambridge.ext import gokernels

describe = streambridge.go_function(gokernels.Describe)
saxpy = streambridge.go_function(gokernels.Saxpy)


class Array:
    """A device array as a framework describes it: only the interface, never dereferenced."""

    def __init__(self, ptr=0x10000, shape=(4,), typestr="<f4", strides=None, version=3, stream=None, readonly=False):
        self.__cuda_array_interface__ = dict(version=version, data=(ptr, readonly), shape=shape, typestr=typestr,
                                             strides=strides, stream=stream)


def test_ext_lists_the_packages_built_in():
    assert "gokernels" in dir(streambridge.ext)
    with pytest.raises(AttributeError, match="no Go package 'nothere'.*STREAMBRIDGE_GO_PACKAGES"):
        streambridge.ext.nothere


def test_a_go_package_lists_its_go_functions_not_gopys_loader():
    """dir() of a package module names what the Go package exports (examples/gokernels:
    Describe, Saxpy, Tallies and Tally), not the modules and paths gopy's loader leaves at its top."""
    assert dir(gokernels) == ["Describe", "Saxpy", "Tallies", "Tally"]


def test_importing_a_go_package_leaves_the_working_directory_alone():
    """gopy's loader changed the process's working directory for the import and back
    (os.chdir): another thread's relative paths meanwhile went to the package's folder, and
    from a directory since removed the import failed (FileNotFoundError from os.getcwd).
    scripts/gopy-fixups.py's sixth fix takes the changes out."""
    program = """if True:
        import os, sys, tempfile
        gone = tempfile.mkdtemp()
        os.chdir(gone)
        os.rmdir(gone)
        changes = []
        sys.addaudithook(lambda event, args: changes.append(args) if event == "os.chdir" else None)
        from streambridge.ext import gokernels
        print(sorted(dir(gokernels)), changes)
    """
    r = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == "['Describe', 'Saxpy', 'Tallies', 'Tally'] []\n", r.stdout + r.stderr[-2000:]


def test_pointer_dtype_shape_and_strides_reach_go():
    s = streambridge.Stream()
    got = describe(s, Array(0x7000, (2, 3), "<f8"))  # no strides: C-contiguous ones filled in
    assert got == f"stream {s.ptr:#x} on device {s.device_id}; 6 elements of <f8 at 0x7000 on device -1, " \
                  "shape [2 3], strides [24 8]"
    got = describe(s, Array(0x7000, (3, 2), "<i4", strides=(4, 12)))
    assert got.endswith("6 elements of <i4 at 0x7000 on device -1, shape [3 2], strides [4 12]")
    s.close()


@pytest.mark.parametrize("array, error, says", [
    (Array(ptr=-5), ValueError, "data pointer -5 is out of range"),
    (Array(ptr=2**64), ValueError, "data pointer 18446744073709551616 is out of range"),
    (Array(ptr=True), TypeError, "data pointer must be ints, not bool"),
    (Array(shape=(True,)), TypeError, "shape must be ints, not bool"),
    (Array(shape=(2**63,)), ValueError, "shape 9223372036854775808 is out of range"),
    (Array(strides=("a",)), TypeError, "strides must be ints, not str"),
    (Array(strides=(2**63,)), ValueError, "strides 9223372036854775808 is out of range"),
    (Array(typestr="<f99999"), ValueError, 'dtype "<f99999" is not the NumPy type string of a GPU scalar'),
    (Array(typestr="<x4"), ValueError, 'dtype "<x4" is not the NumPy type string of a GPU scalar'),
])
def test_an_array_interface_field_that_is_no_array_is_a_typed_error_naming_it(array, error, says):
    s = streambridge.Stream()
    with pytest.raises(error, match=re.escape(says)):
        describe(s, array)
    s.close()


def test_a_dlpack_device_that_is_no_pair_is_a_type_error():
    class Broken:
        def __dlpack__(self, stream=None):
            raise AssertionError("not asked: its device was never said")

        def __dlpack_device__(self):
            return 2

    s = streambridge.Stream()
    with pytest.raises(TypeError, match=re.escape("__dlpack_device__ must return (device_type, device_id), not 2")):
        describe(s, Broken())
    s.close()


@pytest.mark.parametrize("stream_like", ["streambridge", "int", "protocol"])
def test_any_stream_like_reaches_go_as_its_handle(stream_like, foreign_stream):
    handle, device = foreign_stream

    class Protocol:
        def __cuda_stream__(self):
            return (0, handle)

    arg = {"streambridge": streambridge.ExternalStream(handle), "int": handle, "protocol": Protocol()}[stream_like]
    assert describe(arg, Array()).startswith(f"stream {handle:#x} on device {device};")


def test_bad_arguments_raise_typed_errors(driver_name):
    s = streambridge.Stream()
    with pytest.raises(streambridge.InvalidHandleError, match="not a live CUDA stream"):
        saxpy(0xDEADBEEF, 2.0, Array(), Array())  # a garbage handle, refused in Go
    with pytest.raises(TypeError, match="not stream-like"):
        saxpy(object(), 2.0, Array(), Array())
    with pytest.raises(RuntimeError, match="array is <i4, not <f4"):
        saxpy(s, 2.0, Array(typestr="<i4"), Array())
    with pytest.raises(RuntimeError, match="not C-contiguous"):
        saxpy(s, 2.0, Array(shape=(2, 2), strides=(4, 8)), Array(shape=(2, 2)))
    with pytest.raises(RuntimeError, match="read-only"):
        saxpy(s, 2.0, Array(), Array(readonly=True))
    with pytest.raises(ValueError, match="x has 3 elements, y 4"):
        saxpy(s, 2.0, Array(shape=(3,)), Array())
    with pytest.raises(ValueError, match="stream 0 is not allowed"):
        saxpy(s, 2.0, Array(stream=0), Array())
    with pytest.raises(ValueError, match="no stream argument"):
        describe(12345, Array(stream=s.ptr))  # an int is not taken for a stream
    with pytest.raises(TypeError, match="takes a function"):
        streambridge.go_function("Saxpy")
    if driver_name == "sim":  # everything checks out, and the software driver runs no kernels
        with pytest.raises((streambridge.NoDriverError, streambridge.CUDAError)):
            saxpy(s, 2.0, Array(), Array())
    s.close()


def test_the_call_waits_for_the_arrays_producer(driver_name):
    producer, consumer = streambridge.Stream(), streambridge.Stream()
    gate = threading.Event()
    producer.launch_host_func(lambda _: gate.wait(10), None)  # the producer is still writing
    describe(consumer, Array(stream=producer.ptr))
    waiting = consumer.query()
    gate.set()
    consumer.synchronize()
    assert not waiting and consumer.query()
    control = streambridge.Stream()
    describe(control, Array(stream=None))  # no producer stream named: nothing to wait for
    assert control.query()
    for s in (producer, consumer, control):
        s.close()


class DLPackToo(Array):
    """An array whose interface (version 2) names no stream, speaking DLPack too, as torch's
    tensors: the consumer stream DLPack is asked with is kept."""

    def __init__(self):
        super().__init__(0x7000, (4,), "<f4", version=2)
        from test_dlpack import Producer

        self._dlpack, self.given = Producer(shape=(4,)), []

    def __dlpack_device__(self):
        return self._dlpack.__dlpack_device__()

    def __dlpack__(self, stream=None):
        self.given.append(stream)
        return self._dlpack.__dlpack__(stream)


def test_dlpack_is_handed_the_calls_stream_and_no_stream_while_it_captures():
    # A capture cannot depend on work outside it: the driver refuses the producer's
    # ordering there (torch: "dependency created on uncaptured work in another stream").
    s = streambridge.Stream(non_blocking=True)
    a = DLPackToo()
    describe(s, a)
    s.begin_capture("relaxed")
    describe(s, a)
    s.end_capture().close()
    legacy = streambridge.ExternalStream(0)
    describe(legacy, a)
    assert a.given == [s.ptr, -1, 1]


@pytest.mark.parametrize("shape", [(2**32, 2**32), (2**62,)])
def test_a_shape_whose_element_count_overflows_is_a_value_error(shape):
    """An array whose element count (in bytes) does not fit in 63 bits is refused by Go's
    parser with a ValueError (it overflowed, to 0 for some shapes)."""
    s = streambridge.Stream()
    with pytest.raises(ValueError, match="do not fit in 63 bits"):
        describe(s, Array(shape=shape))
    s.close()
