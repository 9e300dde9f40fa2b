"""Bad arguments around the handles get a typed error that names the argument, before any
work is done (issue 27): never a bare TypeError from inside, an AttributeError, or a
silent accept."""

import pytest

import streambridge as sb
from streambridge import _core


class _NoModule:
    pass


_NoModule.__module__ = None  # type: ignore[assignment]


@pytest.mark.parametrize("call, error, match", [
    (lambda: sb.Stream(device="cuda:²"), ValueError, "cuda:N"),
    (lambda: sb.Event(disable_timing=True, enable_timing=True), ValueError, "contradict"),
    (lambda: sb.Event(disable_timing=False, enable_timing=False), ValueError, "contradict"),
    (lambda: sb.Event(block=True, blocking=False), ValueError, "contradict"),
    (lambda: sb.Event(enable_timing="yes"), TypeError, "enable_timing"),
    (lambda: sb.Module("x", options="-O3"), TypeError, "options"),
    (lambda: sb.Module("x", options=5), TypeError, "options"),
    (lambda: sb.Module("x", name_expressions="f"), TypeError, "name_expressions"),
    (lambda: sb.Module("x", include_paths=[5]), TypeError, "include_paths"),
    (lambda: sb.Module("x", defines=[("A", 1)]), TypeError, "defines"),
    (lambda: sb.Module("x", arch=5), TypeError, "arch"),
    (lambda: sb.Module("x", ptx=1), TypeError, "ptx"),
    (lambda: sb.Kernel("x", "y"), TypeError, "Module"),
    (lambda: sb.get_elapsed_time(1, 2), TypeError, "start"),
], ids=lambda v: getattr(v, "__name__", str(v))[:40])
def test_a_bad_argument_is_a_typed_error_naming_it(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_consistent_event_arguments_are_taken():
    e = sb.Event(disable_timing=True, enable_timing=False, block=False, blocking=False)
    assert "timing=False" in repr(e)
    e.close()


def test_a_device_the_driver_does_not_have_is_a_value_error_with_the_count():
    n = _core.device_count()
    with pytest.raises(ValueError, match=rf"device {n}\b.*has {n}"):
        sb.Stream(device=n)
    with pytest.raises(ValueError, match=rf"device {n}\b"):
        sb.Event(device=n)


def test_explain_takes_a_class_whose_module_is_none():
    text = sb.explain(_NoModule())
    assert "_NoModule" in text
