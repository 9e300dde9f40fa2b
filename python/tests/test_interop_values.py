"""What other frameworks hand over as values: NumPy integers (anything with __index__) as
handles, devices and priorities, as CuPy and PyTorch take them; bools refused. And what a
closed object says (issue 12, items 3 and 7)."""

import pytest

import streambridge


class Index:
    """An integer-like that is not an int, as NumPy's integers are."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def _integer_kinds():
    kinds = [Index]
    try:
        import numpy
    except ImportError:
        print("NumPy is not installed: its integers are not tried (Index stands for them)")
    else:
        kinds += [numpy.int64, numpy.uint64, numpy.intp]
    return kinds


@pytest.mark.parametrize("kind", _integer_kinds(), ids=lambda k: k.__name__)
def test_integer_likes_are_taken_as_handles_devices_and_priorities(kind):
    owner = streambridge.Stream(non_blocking=True, priority=kind(0), device=kind(0))
    for s in (streambridge.ExternalStream(kind(owner.ptr)), streambridge.ExternalStream(kind(owner.ptr), kind(0)),
              streambridge.ExternalStream(stream_ptr=kind(owner.ptr), device=kind(0)),
              streambridge.as_stream(kind(owner.ptr))):
        assert s == owner and s.device_id == 0 and s.query()
    assert streambridge.Event(device=kind(0)).device_id == 0


def test_bools_are_still_refused():
    owner = streambridge.Stream()
    with pytest.raises(TypeError, match="must be an int, not bool"):
        streambridge.ExternalStream(True)
    with pytest.raises(TypeError, match="priority must be an int, not bool"):
        streambridge.Stream(priority=False)
    with pytest.raises(TypeError, match="device must be"):
        streambridge.ExternalStream(owner.ptr, True)
    try:
        import numpy
    except ImportError:
        return
    with pytest.raises(TypeError, match="must be an int, not bool"):
        streambridge.ExternalStream(numpy.bool_(True))
    with pytest.raises(TypeError, match="priority must be an int"):
        streambridge.Stream(priority=numpy.bool_(False))


def test_a_closed_stream_says_so_and_cannot_be_made_current():
    s = streambridge.Stream()
    s.close()
    assert "closed" in repr(s) and "closed" not in repr(streambridge.Stream())
    for use in (s.use, s.__enter__, s.__cuda_stream__):
        with pytest.raises(streambridge.ClosedError):
            use()
    assert streambridge.current_stream().ptr == 0, "still the default stream"
    with pytest.raises(streambridge.ClosedError):
        with s:
            pass


def test_events_carry_their_handle():
    e = streambridge.Event()
    assert e.ptr == e.handle == e._eptr != 0  # CuPy's and cuda.core's names
    e.close()
    assert "closed" in repr(e)
    with pytest.raises(streambridge.ClosedError):
        e.ptr
