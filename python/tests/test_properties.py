"""Property tests of the arguments around the handles (Hypothesis): whatever a caller passes
as a device, an event's flags, a module's options or a ``__cuda_stream__`` answer, the
answer is a result or a typed error that says what was wrong (TypeError, ValueError and the
package's own), never an internal one (OverflowError, SystemError, AttributeError, a
UnicodeError) and never a crash."""

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="SKIP: Hypothesis is not installed (scripts/deps.sh installs it)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import streambridge as sb  # noqa: E402
from _unlearnable import UNLEARNABLE, refused_as_unprovable  # noqa: E402
from streambridge._device import device_index  # noqa: E402

TYPED = (TypeError, ValueError, sb.ClosedError, sb.CaptureError, sb.InvalidHandleError, sb.NoDriverError)
CHECKS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Index:
    """An object with __index__, as NumPy's integers have."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


anything = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=12),
    st.binary(max_size=8), st.builds(Index, st.integers()), st.tuples(st.integers()), st.lists(st.integers(), max_size=3),
)
digits = st.characters(whitelist_categories=("Nd", "No", "Nl"))  # '²' and '٣' too, which int() reads or not
devices = st.one_of(anything, st.integers(-3, 3), st.builds(lambda n: f"cuda:{n}", st.integers(-2, 2**33)),
                    st.builds(lambda s: f"cuda:{s}", st.text(max_size=4)),
                    st.builds(lambda s: f"cuda:{s}", st.text(alphabet=digits, min_size=1, max_size=3)))


@CHECKS
@given(devices)
def test_a_device_argument_is_an_ordinal_or_a_typed_error(device):
    try:
        index = device_index(device)
    except (TypeError, ValueError) as e:
        assert "device" in str(e), f"the error names the argument: {e}"
        return
    assert isinstance(index, int) and -1 <= index < 2**31


@CHECKS
@given(devices)
def test_a_stream_on_any_device_argument_is_made_or_refused_with_a_typed_error(device):
    try:
        s = sb.Stream(non_blocking=True, device=device)
    except TYPED:
        return
    assert s.device_id == max(device_index(device), 0)
    s.close()


flags = st.one_of(st.none(), st.booleans(), st.integers(-1, 2), st.text(max_size=2))


@CHECKS
@given(block=flags, blocking=flags, disable=flags, enable=flags, ipc=flags)
def test_event_flags_make_an_event_or_a_typed_error(block, blocking, disable, enable, ipc):
    kwargs = {k: v for k, v in dict(block=block, blocking=blocking, disable_timing=disable, enable_timing=enable,
                                     interprocess=ipc).items() if v is not None}
    try:
        e = sb.Event(**kwargs)
    except TYPED:
        return
    assert (enable, disable) not in [(x, x) for x in (True, False)], "a contradiction is refused"
    assert (block, blocking) not in [(True, False), (False, True)], "a contradiction is refused"
    assert all(type(v) is bool for v in kwargs.values()), f"only bools are flags: {kwargs}"
    timing = "timing=True" in repr(e)
    if enable is not None:
        assert timing == enable
    elif disable is not None:
        assert timing == (not disable)
    e.close()


options = st.one_of(anything, st.lists(st.text(max_size=6), max_size=3), st.dictionaries(st.text(max_size=3), anything))


@CHECKS
@given(opts=options, names=options, paths=options, defines=options, arch=anything, ptx=anything)
def test_module_arguments_compile_or_get_a_typed_error(opts, names, paths, defines, arch, ptx):
    try:
        sb.Module("extern \"C\" __global__ void k() {}", options=opts, name_expressions=names, include_paths=paths,
                  defines=defines, arch=arch, ptx=ptx).close()
    except TYPED:
        pass
    except sb.CUDAError as e:  # the software driver compiles nothing; a GPU may refuse an arch
        assert "runs no device code" in str(e) or e.code != 0


answers = st.one_of(anything, st.tuples(anything, anything), st.tuples(st.integers(), st.integers()),
                    st.tuples(st.integers(2**63 - 2, 2**80), anything),
                    st.tuples(st.just(0), st.integers(0, 2**64 - 1)), st.tuples(anything, anything, anything))


@pytest.mark.parametrize("read", [sb.as_stream, sb.Stream.from_external], ids=["as_stream", "from_external"])
@CHECKS
@given(answer=answers)
def test_a_cuda_stream_answer_is_a_stream_or_a_typed_error(read, answer):
    """as_stream reads the answer in Python, Stream.from_external first in the C core."""

    class Protocol:
        def __cuda_stream__(self):
            return answer

    try:
        s = read(Protocol())
    except TYPED:
        return
    except sb.CUDAError as e:  # a bare handle where no layout was learned: refused by design, and the search goes on
        if not (UNLEARNABLE and refused_as_unprovable(e)):
            raise
        return
    assert answer[0] == 0 and s.ptr in (answer[1], 0) or s.ptr == answer[1]
