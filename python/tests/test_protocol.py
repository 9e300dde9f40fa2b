import gc
import weakref

import pytest

import streambridge
from streambridge import _core


class Protocol:
    """A stream-like object, as cuda.core's streams are."""

    def __init__(self, handle, version=0, shape=None):
        self.handle, self.version, self.shape = handle, version, shape

    def __cuda_stream__(self):
        return self.shape if self.shape is not None else (self.version, self.handle)


class TorchLike:
    def __init__(self, handle):
        self.cuda_stream = handle


class CupyLike:
    def __init__(self, handle):
        self.ptr = handle


class NumbaLike:
    class _Handle:
        def __init__(self, value):
            self.value = value

    def __init__(self, handle):
        self.handle = NumbaLike._Handle(handle)


def test_from_external_borrows_and_keeps_the_object_alive(foreign_stream):
    handle, device = foreign_stream
    obj = Protocol(handle)
    ref = weakref.ref(obj)
    s = streambridge.Stream.from_external(obj)
    del obj
    gc.collect()
    assert ref() is not None, "the stream keeps its owner alive"
    assert s.ptr == handle and s.device_id == device
    assert s._owner is ref()
    s.close()
    del s
    gc.collect()
    assert ref() is None, "a dropped stream releases its owner"


def test_a_stream_and_an_owner_that_refers_back_are_collected(foreign_stream):
    handle, _ = foreign_stream
    obj = Protocol(handle)
    obj.wrapper = streambridge.Stream.from_external(obj)  # a cycle through the C core's _owner
    ref = weakref.ref(obj)
    del obj
    gc.collect()
    assert ref() is None, "the collector sees the owner the stream holds"


@pytest.mark.parametrize(
    "bad, error, match",
    [
        (Protocol(0, version=1), ValueError, "version 1 is not supported"),
        (Protocol(0, shape=(0,)), ValueError, "must return \\(version, handle\\)"),
        (Protocol(0, shape=[0, 5]), ValueError, "must return \\(version, handle\\)"),
        (Protocol(0, shape=(0, "5")), TypeError, "must be an int"),
        (Protocol(0xDEADBEEF), streambridge.InvalidHandleError, "not a live CUDA stream"),
        (object(), TypeError, "does not speak the __cuda_stream__ protocol"),
    ],
)
def test_from_external_refuses_bad_protocol_objects(bad, error, match):
    with pytest.raises(error, match=match):
        streambridge.Stream.from_external(bad)


@pytest.mark.parametrize("wrap", [int, Protocol, TorchLike, CupyLike, NumbaLike], ids=lambda w: w.__name__)
def test_as_stream_takes_anything_stream_like(foreign_stream, stated_elsewhere, wrap):
    handle, device = foreign_stream
    s = streambridge.as_stream(wrap(handle))
    assert s.ptr == handle and s.device_id == device
    assert streambridge.as_stream(s) is s
    other, error, match = stated_elsewhere
    with pytest.raises(error, match=match):
        streambridge.as_stream(wrap(handle), device=other)


def test_as_stream_refuses_what_is_not_stream_like():
    for bad in ("7", 1.5, None, [1], TorchLike("x")):
        with pytest.raises(TypeError, match="not stream-like"):
            streambridge.as_stream(bad)
