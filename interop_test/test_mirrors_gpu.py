"""The mirrored classes beside the frameworks they mirror, on the GPU: one scenario run on
CuPy's (or cuda.core's) streams and on streambridge's gives the same answers, and a bad
object raises there an exception that ours is an instance of. python/tests/test_mirrored.py
states the same behaviours on both drivers; this shows they are the peers' own."""

import pytest
from _interop import framework

import streambridge as sb


class Mock:
    def __init__(self, answer):
        self.answer = answer

    def __cuda_stream__(self):
        return self.answer


BAD = [object(), Mock(123), Mock((0,)), Mock(("not_an_int", 0)), Mock((0, "not_an_int")), Mock((1, 12345))]
BAD_IDS = ["no-protocol", "not-a-tuple", "one-element", "version-type", "handle-type", "version-1"]


def raised(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return e
    raise AssertionError("no exception")


@pytest.mark.parametrize("bad", BAD, ids=BAD_IDS)
def test_a_bad_protocol_object_raises_what_cupy_and_cuda_core_raise(bad):
    cupy = framework("cupy")
    core = framework("cuda.core")
    core.Device(0).set_current()
    ours = raised(lambda: sb.Stream.from_external(bad))
    theirs = {"CuPy": raised(lambda: cupy.cuda.Stream.from_external(bad)),
              "cuda.core": raised(lambda: core.Device(0).create_stream(bad))}
    print(f"ours {type(ours).__name__}: {ours}; " + "; ".join(f"{k} {type(v).__name__}" for k, v in theirs.items()))
    for peer, e in theirs.items():
        assert isinstance(ours, type(e)), f"{peer} raises {type(e).__name__}: {e}"


def current_stream_scenario(Stream, current, null):
    """CuPy's test_mix_use_context and test_with_statement as a trace of which stream is
    current: the same trace from CuPy's classes and from ours."""
    s1, s2, s3 = Stream(), Stream(), Stream()
    names = {s1.ptr: "s1", s2.ptr: "s2", s3.ptr: "s3", null.ptr: "default"}
    trace = [names[current().ptr]]
    with s1:
        trace.append(names[current().ptr])
        s2.use()
        trace.append(names[current().ptr])
        with s3:
            trace.append(names[current().ptr])
        trace.append(names[current().ptr])
    trace.append(names[current().ptr])
    s2.use()
    trace.append(names[current().ptr])
    null.use()
    trace.append(names[current().ptr])
    return trace


def test_with_and_use_trace_the_current_stream_as_cupy_does():
    cupy = framework("cupy")
    theirs = current_stream_scenario(cupy.cuda.Stream, cupy.cuda.get_current_stream, cupy.cuda.Stream.null)
    ours = current_stream_scenario(sb.Stream, sb.current_stream, sb.Stream(null=True))
    print("CuPy", theirs, "ours", ours)
    assert ours == theirs == ["default", "s1", "s2", "s3", "s1", "default", "s2", "default"]


def test_priorities_as_cupy_reads_them_and_out_of_range_as_cuda_core_refuses_them():
    cupy = framework("cupy")
    core = framework("cuda.core")
    dev = core.Device(0)
    dev.set_current()
    from cuda.bindings import driver

    err, least, greatest = driver.cuCtxGetStreamPriorityRange()  # the current context's: device 0's
    assert err == driver.CUresult.CUDA_SUCCESS
    for p in range(greatest, least + 1):
        assert sb.Stream(priority=p).priority == cupy.cuda.Stream(priority=p).priority == p
    for p in (greatest - 1, least + 1):
        theirs = raised(lambda: dev.create_stream(options=core.StreamOptions(priority=p)))
        ours = raised(lambda: sb.Stream(priority=p))
        print(f"priority {p}: cuda.core {type(theirs).__name__}: {theirs}; ours {type(ours).__name__}: {ours}")
        assert isinstance(ours, type(theirs))


def test_waiting_on_what_is_no_event_or_stream_raises_what_cuda_core_raises():
    core = framework("cuda.core")
    dev = core.Device(0)
    dev.set_current()
    theirs = raised(lambda: dev.create_stream().wait(event_or_stream="invalid_event"))
    ours = raised(lambda: sb.Stream().wait(event_or_stream="invalid_event"))
    assert isinstance(ours, type(theirs)), f"cuda.core raises {type(theirs).__name__}: {theirs}"


def test_cuda_core_and_streambridge_streams_of_one_handle_are_equal_each_in_its_own_kind():
    core = framework("cuda.core")
    dev = core.Device(0)
    dev.set_current()
    cs = dev.create_stream()
    ours = sb.as_stream(cs)
    back = core.Stream.from_handle(int(ours.handle))
    assert back == cs and hash(back) == hash(cs), "cuda.core: equal by handle"
    assert ours == sb.Stream.from_handle(int(cs.handle)) and hash(ours) == hash(sb.ExternalStream(int(cs.handle)))
    print("cuda.core's stream == ours:", cs == ours)
    assert (ours == cs) is False, "as CuPy's and cuda.core's, ours compares equal to its own kind only"
