"""The stream behaviours CuPy's and cuda.core's own tests state
(CuPy: tests/cupy_tests/cuda_tests/test_stream.py; cuda.core: cuda_core/tests/test_stream.py),
checked on streambridge's classes, so code written against either behaves the same here.
Where streambridge differs on purpose, the test says so and docs/python.md's "Where streambridge
differs" lists it. interop_test/test_mirrors_gpu.py runs the same scenarios on CuPy and
cuda.core themselves beside ours on the GPU machine."""

import gc
import threading
import weakref

import pytest

import streambridge as sb


# ---- Equality and hashing (CuPy: test_eq, test_hash; cuda.core: the equality and hash tests)


def test_null_and_per_thread_streams_compare_as_in_cupy():
    null0, null1 = sb.Stream(null=True), sb.Stream(null=True)
    ptds0, ptds1 = sb.Stream(ptds=True), sb.Stream(ptds=True)
    fresh = sb.Stream()
    assert null0 == null1 and ptds0 == ptds1
    assert null0 != ptds0 and null0 != fresh and ptds0 != fresh
    assert len({null0: 1, null1: 2, ptds0: 3, fresh: 4, sb.Stream(): 5}) == 4
    assert hash(null0) != hash(ptds0), "the legacy and per-thread streams hash apart, as in cuda.core"


def test_wrappers_of_one_handle_are_one_key_as_in_cuda_core():
    s1, other = sb.Stream(), sb.Stream()
    s2 = sb.Stream.from_handle(int(s1.handle))
    assert s1 == s2 and s2 == s1 and s1 == s1
    assert s1 != other and hash(s1) == hash(s2)
    cache = {s1: "value1"}
    assert cache[s2] == "value1"
    cache[s2] = "value2"
    assert cache == {s1: "value2"}
    assert {s1, s2, other} == {s1, other}
    for stranger in ("not a stream", 123, None, sb.Device(0)):
        assert (s1 == stranger) is False and (s1 != stranger) is True


# ---- Current streams (CuPy: test_del, test_with_statement, test_use, test_mix_use_context,
# test_per_device, test_stream_thread)


def test_the_current_stream_is_the_default_one_until_one_is_made_current():
    assert sb.current_stream().ptr == 0 and sb.current_stream() == sb.Stream(null=True)
    assert sb.current_stream(0) is sb.current_stream(), "one object per device, as CuPy's Stream.null"


def test_a_current_stream_outlives_its_last_name():
    s = sb.Stream().use()
    assert s is sb.current_stream()
    ptr = s.ptr
    del s
    gc.collect()
    assert sb.current_stream().ptr == ptr and sb.current_stream().query() is True
    null = sb.Stream(null=True).use()
    assert sb.current_stream() is null


def test_use_makes_a_stream_current_until_another_use():
    s1 = sb.Stream().use()
    assert sb.current_stream() is s1
    s2 = sb.Stream(ptds=True)
    assert s2.use() is s2 and sb.current_stream() is s2


def test_with_blocks_nest_and_the_stream_used_before_is_forgotten():
    sb.Stream(ptds=True).use()
    s1, s2 = sb.Stream(), sb.Stream()
    with s1:
        assert sb.current_stream() is s1
        with s2 as entered:
            assert entered is s2 and sb.current_stream() is s2
        assert sb.current_stream() is s1
    assert sb.current_stream().ptr == 0, "CuPy: the end of the outermost with makes the default stream current"


def test_use_inside_with_lasts_until_the_block_ends():  # cupy/cupy#5143
    s1, s2, s3 = sb.Stream(), sb.Stream(), sb.Stream()
    with s1:
        assert sb.current_stream() is s1
        s2.use()
        assert sb.current_stream() is s2
        with s3:
            assert sb.current_stream() is s3
            del s2
        assert sb.current_stream() is s1, "the enclosing with's stream, not the one use() set"
    assert sb.current_stream().ptr == 0


def test_current_streams_are_per_device(two_devices):
    s0, s1 = sb.Stream(device=0), sb.Stream(device=1)
    with s0:
        assert sb.current_stream(0) is s0 and sb.current_stream(1).ptr == 0
        assert sb.current_stream(1).device_id == 1
        with s1:
            assert sb.current_stream(0) is s0 and sb.current_stream(1) is s1
            e = sb.Event(device=1)
            e.record()  # stream=None: device 1's current stream
            s1.synchronize()
            assert e.query() is True
        assert sb.current_stream(1).ptr == 0 and sb.current_stream(0) is s0
    # Unlike CuPy, which refuses (RuntimeError) a stream of a device other than the current
    # one, streambridge has no current device: a stream is made current on its own device.


def test_current_streams_are_per_thread():
    s = sb.Stream()
    with s:
        seen = []
        t = threading.Thread(target=lambda: seen.append(sb.current_stream()))
        t.start()
        t.join()
        assert seen[0].ptr == 0, "another thread still has the default stream"
        assert sb.current_stream() is s


def test_threads_that_share_a_stream_keep_it_current_after_dropping_it():
    shared = [sb.Stream()]
    barrier = threading.Barrier(2)
    results = {}

    def worker(name):
        barrier.wait()
        shared[0].use()
        barrier.wait()  # both made it current
        shared[0] = None
        gc.collect()
        barrier.wait()  # both dropped their names for it
        current = sb.current_stream()
        results[name] = (current.ptr != 0, current.query())

    threads = [threading.Thread(target=worker, args=(n,)) for n in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"a": (True, True), "b": (True, True)}


# ---- Flags and priorities (CuPy: test_create_with_flags, test_create_with_priority;
# cuda.core: test_stream_priority, test_stream_is_nonblocking)


def test_flags_read_back():
    assert sb.Stream().is_non_blocking is False
    assert sb.Stream(non_blocking=True).is_non_blocking is True
    assert sb.Stream(non_blocking=True).is_nonblocking is True


@pytest.mark.parametrize("priority", [0, -1, -3])
def test_priorities_in_the_devices_range_read_back(priority):
    assert sb.Stream(priority=priority).priority == priority


def test_a_streams_id_tells_a_stream_made_at_a_destroyed_ones_address_apart():
    """id is cuStreamGetId (Go's Stream.ID): a borrowed stream's is its owner's; a stream
    made after another was destroyed has a new id, whatever its address; during a capture
    it is known without asking the driver (which would invalidate the capture)."""
    owner = sb.Stream(non_blocking=True)
    borrowed = sb.ExternalStream(owner.ptr)
    assert borrowed.id == owner.id != 0
    seen = {owner.id}
    borrowed.close()
    owner.close()
    for _ in range(8):  # the driver reuses addresses: the ids stay apart
        s = sb.Stream(non_blocking=True)
        assert s.id not in seen
        seen.add(s.id)
        s.close()
    s = sb.Stream(non_blocking=True)
    watcher, before = sb.ExternalStream(s.ptr), s.id
    s.begin_capture()
    assert watcher.id == before, "a borrowed stream's id is known during a capture"
    assert s.id == before, "and so is ours: its Go side read it when it was first asked"
    assert s.is_capturing(), "the capture goes on"
    s.end_capture().close()


@pytest.mark.parametrize("priority", [1, -1000, 2**31 - 1])
def test_a_priority_outside_the_devices_range_is_a_value_error(priority):
    # cuda.core raises ValueError; CuPy lets the driver clamp it silently.
    with pytest.raises(ValueError, match=rf"priority {priority} is outside device 0's range: -?\d+ \(the highest\)"):
        sb.Stream(priority=priority)


# ---- Host callbacks (CuPy: test_get_and_add_callback, test_launch_host_func, for Stream,
# the null stream and ExternalStream)


@pytest.mark.parametrize("kind", ["stream", "null", "external"])
def test_callbacks_run_in_order_with_cupys_arguments(kind):
    owner = sb.Stream(non_blocking=True)  # an ExternalStream's owner, alive throughout
    s = {"stream": sb.Stream, "null": lambda: sb.Stream(null=True), "external": lambda: sb.ExternalStream(owner.ptr)}[kind]()
    out, streams = [], []

    def callback(stream, status, arg):
        out.append(arg[0])
        streams.append((stream, status))

    for i in range(100):
        s.add_callback(callback, (i, object()))
        s.launch_host_func(lambda arg: out.append(arg[0]), (i, object()))
    s.synchronize()
    assert out == [i for i in range(100) for _ in range(2)]
    assert all(stream is s and status == 0 for stream, status in streams)


# ---- The __cuda_stream__ protocol (CuPy: TestCUDAStreamProtocol; cuda.core: test_stream_from_foreign_stream)


class Mock:
    def __init__(self, answer):
        self.answer = answer

    def __cuda_stream__(self):
        return self.answer


@pytest.mark.parametrize("make", [lambda: sb.Stream(), lambda: sb.Stream(null=True)], ids=["stream", "null"])
def test_cuda_stream_answers_version_0_and_the_handle(make):
    s = make()
    version, ptr = s.__cuda_stream__()
    assert type(version) is int and type(ptr) is int
    assert (version, ptr) == (0, s.ptr)


def test_from_external_borrows_a_protocol_object_and_keeps_it_alive():
    real = sb.Stream()
    mock = Mock((0, real.ptr))
    s = sb.Stream.from_external(mock)
    assert s.ptr == real.ptr and s.device_id >= 0 and s._owner is mock
    ref = weakref.ref(mock)
    del mock
    gc.collect()
    assert ref() is s._owner
    del s
    gc.collect()
    assert ref() is None
    again = sb.Stream.from_external(real)
    assert again == real and again._owner is real


def test_a_stream_from_external_is_used_as_any_other():
    owner = sb.Stream()
    s = sb.Stream.from_external(Mock((0, owner.ptr)))
    with s:
        assert sb.current_stream() is s
        sb.Event().record()
    s.synchronize()
    assert s.done is True


@pytest.mark.parametrize(
    "bad, peers",
    [
        (object(), (AttributeError, TypeError)),  # CuPy, cuda.core: no __cuda_stream__
        (Mock(123), (TypeError, RuntimeError)),  # not a 2-tuple
        (Mock((0,)), (TypeError, RuntimeError)),
        (Mock(("not_an_int", 0)), (TypeError, RuntimeError)),
        (Mock((0, "not_an_int")), (TypeError,)),
        (Mock((1, 12345)), (ValueError, RuntimeError)),  # an unsupported version
    ],
    ids=["no-protocol", "not-a-tuple", "one-element", "version-type", "handle-type", "version-1"],
)
def test_bad_protocol_objects_raise_what_cupy_and_cuda_core_raise(bad, peers):
    with pytest.raises(sb.NotStreamLikeError if type(bad) is object else sb.ProtocolError) as info:
        sb.Stream.from_external(bad)
    for peer in peers:
        assert isinstance(info.value, peer), f"an except {peer.__name__} written for CuPy or cuda.core catches it"


# ---- Waiting (cuda.core: test_stream_wait_event, test_stream_wait_invalid_event)


def test_wait_takes_an_event_or_any_stream_object():
    s1, s2 = sb.Stream(), sb.Stream()
    s2.wait(s1.record())
    s2.wait(s1)
    s2.wait(Mock((0, s1.ptr)))
    s2.sync()
    assert isinstance(s1.record(), sb.Event)


@pytest.mark.parametrize("bad", ["invalid_event", 12345, object()])
def test_wait_on_anything_else_is_a_value_error_as_in_cuda_core(bad):
    with pytest.raises(ValueError, match="wait takes an Event or a stream object") as info:
        sb.Stream().wait(event_or_stream=bad)
    assert isinstance(info.value, sb.NotStreamLikeError) and isinstance(info.value, TypeError)


def test_from_handle_of_the_special_handles():  # cuda.core: test_stream_from_handle
    for h in (0, 1, 2):
        s = sb.Stream.from_handle(h)
        assert isinstance(s, sb.ExternalStream) and s.ptr == h and s.device == 0
