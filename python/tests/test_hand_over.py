"""hand_over(array, stream): the array object lives until the stream reaches the point where
it was handed over, and not longer (a torch tensor as any other array:
interop_test/test_hand_over_gpu.py shows both on the GPU)."""

import gc
import threading
import weakref

import pytest

import streambridge as sb


class DeviceArray:
    """Stands for a CuPy or Numba array: its memory is the pool's again once it is collected."""


def test_the_array_lives_until_the_stream_reaches_the_hand_over(released):
    s = sb.Stream(non_blocking=True)
    gate = threading.Event()
    s.launch_host_func(lambda _: gate.wait(5), None)  # the consumer's work, still running
    array = DeviceArray()
    ref = weakref.ref(array)
    sb.hand_over(array, s)
    del array
    gc.collect()
    assert ref() is not None, "the stream has not reached the hand-over"
    gate.set()
    s.synchronize()
    assert released(ref), "released once the stream passed it (on the main thread, soon after)"
    assert sb.callback_errors() == []


def test_any_stream_like_is_taken_and_anything_else_refused():
    owner = sb.Stream()
    sb.hand_over(DeviceArray(), owner.ptr)
    owner.synchronize()
    with pytest.raises(sb.NotStreamLikeError):
        sb.hand_over(DeviceArray(), "stream")


def test_during_capture_the_array_lives_as_long_as_the_graph(released):
    s = sb.Stream(non_blocking=True)
    s.begin_capture()
    array = DeviceArray()
    ref = weakref.ref(array)
    sb.hand_over(array, s)
    del array
    graph = s.end_capture()
    for _ in range(2):
        graph.launch(s)
    s.synchronize()
    gc.collect()
    assert ref() is not None, "each replay reads it"
    graph.close()
    assert released(ref), "released with the graph"


class _Array:
    """A device array as a framework describes it; Go only reads the description."""

    __cuda_array_interface__ = dict(version=3, data=(0x10000, False), shape=(4,), typestr="<f4", strides=None,
                                    stream=None)


def test_a_go_function_hands_its_arrays_over_when_asked():
    from streambridge.ext import gokernels

    describe = sb.go_function(gokernels.Describe, hand_over=True)
    s, gate = sb.Stream(non_blocking=True), threading.Event()
    s.launch_host_func(lambda _: gate.wait(10), None)  # the stream's work is not done yet
    array = _Array()
    alive = weakref.ref(array)
    describe(s, array)
    del array
    gc.collect()
    assert alive() is not None  # held: the stream has not reached the hand-over
    gate.set()
    s.synchronize()
    gc.collect()
    assert alive() is None  # and not longer
    with pytest.raises(ValueError, match="needs a stream argument"):
        describe(_Array())
    with pytest.raises(TypeError, match="hand_over must be a bool"):
        sb.go_function(gokernels.Describe, hand_over="yes")
