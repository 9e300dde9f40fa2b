"""Bad arguments around the handles get a typed error that names the argument, before any
work is done (issue 27): never a bare TypeError from inside, an AttributeError, or a
silent accept."""

import functools

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


# The three ways a constructor is called: the class itself (the core's vectorcall of its
# constructor, readers.inc), type's own call of the class (tp_new, then the core type's
# tp_init with a tuple and a dict), and a subclass (Python's call, the same tp_init).
_WAYS = {
    "class": lambda cls: cls,
    "type-call": lambda cls: functools.partial(type.__call__, cls),
    "subclass": lambda cls: type("Sub" + cls.__name__, (cls,), {}),
}


@pytest.fixture(params=sorted(_WAYS))
def made(request):
    return _WAYS[request.param]


@pytest.mark.parametrize("cls, args, kwargs, match", [
    ("Event", (), {"foo": 1}, r"Event\(\) got an unexpected keyword argument 'foo'"),
    ("Event", (False,), {"block": True}, r"Event\(\) got multiple values for argument 'block'"),
    ("Event", (False, False, False, None), {}, r"Event\(\) takes at most 3 positional arguments \(4 given\)"),
    ("Stream", (), {"bogus": 1}, r"Stream\(\) got an unexpected keyword argument 'bogus'"),
    ("Stream", (False,), {"null": False}, r"Stream\(\) got multiple values for argument 'null'"),
    ("Stream", (False, False, False, None, 0), {}, r"Stream\(\) takes at most 4 positional arguments \(5 given\)"),
], ids=["event-unknown", "event-twice", "event-device-by-position", "stream-unknown", "stream-twice",
        "stream-device-by-position"])
def test_a_constructors_arguments_are_read_as_its_signature_says(made, cls, args, kwargs, match):
    # the core reads them itself (readers.inc), whichever way the class is called: what
    # Python's own signatures refuse, it refuses
    with pytest.raises(TypeError, match=match):
        made(getattr(sb, cls))(*args, **kwargs)


def test_every_argument_of_the_constructors_is_taken_by_position_or_name(made):
    e = made(sb.Event)(False, True, False, enable_timing=False, blocking=False, options=None, device=0)
    assert isinstance(e, sb.Event) and "timing=False" in repr(e)
    e.close()
    e = made(sb.Event)(disable_timing=True)
    assert not e._timing and e._open
    e.close()
    # a keyword made at run time is no interned string: found by its characters
    e = made(sb.Event)(**{"".join(["disable_", "timing"]): True, "".join(["dev", "ice"]): 0})
    assert not e._timing and e._open
    e.close()
    s = made(sb.Stream)(False, True, False, None, device=0)
    assert isinstance(s, sb.Stream) and "owned" in repr(s)
    s.close()
    s = made(sb.Stream)(null=False, non_blocking=True, ptds=False, priority=None)
    assert "owned" in repr(s)
    s.close()
    s = made(sb.Stream)(ptds=True)
    assert s.ptr == 2
    s.close()
    # and the classes themselves are still made by the core's vectorcall (no call above
    # gave them back to Python's call, which would be as right, and slower)
    assert _core.core.constructed(sb.Event) and _core.core.constructed(sb.Stream)


def test_an_initializer_given_to_the_class_later_is_called(monkeypatch):
    # the core's vectorcall gives the call back to Python where the class's __init__ is no
    # longer the core's (and keeps giving it back: constructs installs it again)
    seen = []

    def init(self, *args, **kwargs):
        seen.append((args, kwargs))
        _core.core.EventCore.__init__(self, *args, **kwargs)

    try:
        monkeypatch.setattr(sb.Event, "__init__", init, raising=False)
        e = sb.Event(disable_timing=True)
        assert seen == [((), {"disable_timing": True})] and not e._timing
        assert not _core.core.constructed(sb.Event)
        e.close()
        monkeypatch.undo()
        e = sb.Event(disable_timing=True)
        assert len(seen) == 1 and not e._timing
        e.close()
    finally:
        monkeypatch.undo()
        _core.core.constructs(sb.Event)
    assert _core.core.constructed(sb.Event)
    assert not _core.core.constructed(type("SubEvent", (sb.Event,), {}))


def test_constructs_takes_only_the_core_types_classes():
    for cls in (object, int, sb.ExternalStream, 5):
        with pytest.raises(TypeError, match="EventCore or OwnedCore"):
            _core.core.constructs(cls)


def test_consistent_event_arguments_are_taken():
    e = sb.Event(disable_timing=True, enable_timing=False, block=False, blocking=False)
    assert "timing=False" in repr(e)
    e.close()


@pytest.mark.parametrize("keyword, option", [("enable_timing", "timing_enabled"), ("blocking", "blocking_sync"),
                                             ("interprocess", "ipc_enabled")])
def test_an_event_option_given_twice_must_agree(keyword, option):
    """A keyword and the same option in ``options`` (a dict, or cuda.core's EventOptions'
    shape): contradicting each other is a ValueError naming both, never one silently kept."""
    with pytest.raises(ValueError, match=rf"{keyword}=True and options' {option}=False contradict each other"):
        sb.Event(**{keyword: True}, options={option: False})

    class Options:  # cuda.core's EventOptions' fields
        timing_enabled, blocking_sync, ipc_enabled = None, None, None

    shaped = Options()
    setattr(shaped, option, True)
    with pytest.raises(ValueError, match=rf"{keyword}=False and options' {option}=True contradict each other"):
        sb.Event(**{keyword: False}, options=shaped)


def test_event_options_fill_what_the_keywords_leave():
    e = sb.Event(enable_timing=True, options={"blocking_sync": True})  # timing from the keyword, not the options' default
    assert "timing=True" in repr(e)
    e.close()
    e = sb.Event(options={"blocking_sync": True})  # cuda.core's default: timing off
    assert "timing=False" in repr(e)
    e.close()
    e = sb.Event(enable_timing=True, options={"timing_enabled": True})
    assert "timing=True" in repr(e)
    e.close()


def test_an_unknown_event_option_names_the_options():
    with pytest.raises(TypeError, match=r"unknown event options \['bad'\] \(the options are timing_enabled, "
                                        r"blocking_sync, ipc_enabled\)"):
        sb.Event(options={"bad": 1})


def test_an_index_that_answers_a_bool_is_no_device():
    class Index:
        def __index__(self):
            return True  # operator.index warns and takes it as 1; a device is an ordinal

    s = sb.Stream()
    for make in (lambda: sb.Stream(device=Index()), lambda: sb.Event(device=Index()),
                 lambda: sb.ExternalStream(s.ptr, Index())):
        with pytest.raises(TypeError, match="device must be"):
            make()
    s.close()


@pytest.mark.learned_layout
def test_a_stated_device_the_driver_does_not_have_is_said_to_be_none():
    n = _core.device_count()
    s = sb.Stream()
    with pytest.raises(ValueError, match=rf"no such device: device {n} was stated for stream {s.ptr:#x}, where "
                                         rf"the driver has {n}"):
        sb.ExternalStream(s.ptr, n)
    s.close()


def test_a_device_the_driver_does_not_have_is_a_value_error_with_the_count():
    n = _core.device_count()
    with pytest.raises(ValueError, match=rf"device {n}\b.*has {n}"):
        sb.Stream(device=n)
    with pytest.raises(ValueError, match=rf"device {n}\b"):
        sb.Event(device=n)


def test_explain_takes_a_class_whose_module_is_none():
    text = sb.explain(_NoModule())
    assert "_NoModule" in text


def test_wait_stream_of_a_protocol_object_points_to_as_stream():
    class Proto:
        def __init__(self, handle):
            self.handle = handle

        def __cuda_stream__(self):
            return (0, self.handle)

    s, other = sb.Stream(non_blocking=True), sb.Stream(non_blocking=True)
    with pytest.raises(TypeError, match=r"as_stream\(obj\)"):
        s.wait_stream(Proto(other.ptr))
    s.wait(Proto(other.ptr))  # the spelling that takes it
    s.wait_stream(sb.as_stream(Proto(other.ptr)))
    s.synchronize()


def test_the_driver_setting_is_read_once_and_the_error_says_so():
    """After a first call failed for want of a driver, setting STREAMBRIDGE_DRIVER=sim in
    os.environ cannot help that process; the error says it is read once, and what to do (it
    told the user to set it). In a child with no driver to load, so it runs on a GPU too."""
    import os
    import subprocess
    import sys

    child = """
import os, streambridge as sb
try:
    sb.Stream()
except sb.NoDriverError as e:
    assert "read once" not in str(e), e
os.environ["STREAMBRIDGE_DRIVER"] = "sim"
try:
    sb.Stream()
except sb.NoDriverError as e:
    assert 'read once, at the first call, and was "" then, "sim" now' in str(e), e
    print("ok")
"""
    env = {k: v for k, v in os.environ.items() if k != "STREAMBRIDGE_DRIVER"}
    env["STREAMBRIDGE_LIBCUDA"] = "/nonexistent/libcuda.so.1"
    out = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_a_kernels_function_is_set_once_and_read_only():
    """A kernel's function, context, device and module are set when it is made and cannot
    be written after, so no forged handle reaches cuLaunchKernel."""
    from streambridge._core import core

    module, kernel = core.ModuleCore(), core.KernelCore()
    kernel._bind(0x1000, 0, 0, module)
    for name in ("_fn", "_ctx", "_device", "_module"):
        with pytest.raises(AttributeError):
            setattr(kernel, name, 0xDEAD)
    with pytest.raises(TypeError, match="set once"):
        kernel._bind(0xDEAD, 0, 0, module)
    with pytest.raises(TypeError):
        core.KernelCore()._bind(0xDEAD, 0, 0, object())
    with pytest.raises(sb.ClosedError):  # a module never loaded: nothing reaches the driver
        kernel._launch(sb.Stream(), (1, 1, 1), (1, 1, 1), 0, ())


def test_a_graphs_state_cannot_be_written():
    """A Graph's key and device are its own: set when end_capture makes it, never from
    outside (a forged key would name another graph of this process)."""
    s = sb.Stream(non_blocking=True)
    s.begin_capture()
    s.record()
    g = s.end_capture()
    for name in ("_key", "_device", "anything"):
        with pytest.raises(AttributeError):
            setattr(g, name, 1)
    with pytest.raises(AttributeError):
        del g._key
    g.launch(s)
    s.synchronize()
    g.close()
    g.close()  # idempotent


def test_graphs_and_modules_do_not_pickle():
    """A Graph's or Module's key names this process's object: pickled and loaded elsewhere,
    it would name another one (a Graph pickled, and launched another process's graph)."""
    import pickle

    from streambridge._core import core

    s = sb.Stream(non_blocking=True)
    s.begin_capture()
    s.record()
    g = s.end_capture()
    for obj in (g, core.ModuleCore(), core.KernelCore(), s, sb.Event()):
        with pytest.raises(TypeError):
            pickle.dumps(obj)
    g.close()


def test_a_kernel_is_made_through_bind(monkeypatch):
    """Kernel.__init__ on the CPU, the Go calls it makes stood in for (a module needs a GPU
    to compile): the function, context, device and module it binds are the kernel's."""
    from streambridge import _kernel

    monkeypatch.setattr(_kernel._core, "module_function", lambda key, name: 7)
    monkeypatch.setattr(_kernel._core, "function_handle", lambda key: 0x1234)
    monkeypatch.setattr(_kernel._core, "module_context", lambda key: 0x5678)
    module = _kernel.Module.__new__(_kernel.Module)
    module._device = 0
    k = _kernel.Kernel(module, "k")
    assert (k._fn, k._ctx, k._device, k._module, k._key, k.name) == (0x1234, 0x5678, 0, module, 7, "k")
    with pytest.raises(sb.ClosedError):  # the module has no key: never loaded
        k((1,), (1,), ())
    module.close()
    with pytest.raises(sb.ClosedError):
        _kernel.Kernel(module, "k")


@pytest.mark.parametrize("name", ["STREAMBRIDGE_DRIVER", "STREAMBRIDGE_LIBCUDA", "CUDA_HOME"])
def test_a_setting_that_is_not_utf8_is_a_value_error_naming_it(name):
    """A setting whose bytes are not UTF-8 is a ValueError that names it (it was a
    UnicodeEncodeError from inside); in a child, as settings are read at the first call."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environb.items() if k != name.encode()}
    env[name.encode()] = b"sim\xff"
    child = "import streambridge as sb\ntry:\n    sb.Stream()\nexcept ValueError as e:\n    print(e)\n"
    out = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"bad setting: {name}=" in out.stdout and "not UTF-8" in out.stdout, out.stdout


@pytest.mark.parametrize("grid, block, shared", [
    ((2**33, 1, 1), (1, 1, 1), 0),
    ((1, 1, 1), (1, 0, 1), 0),
    ((1, 1, 1), (1, 1, 1), 2**40),
    ((1, 1, 1), (1, 1, 1), -1),
])
def test_launch_dimensions_are_checked_not_truncated(grid, block, shared):
    """The core's _launch refuses grid and block dimensions and shared memory that do not
    fit cuLaunchKernel's unsigned ints (it truncated them), before looking at the module."""
    from streambridge._core import core

    kernel = core.KernelCore()
    kernel._bind(0x1000, 0, 0, core.ModuleCore())
    with pytest.raises(ValueError, match="grid|block|shared_mem"):
        kernel._launch(sb.Stream(), grid, block, shared, ())


def test_a_modules_key_is_set_once():
    """A module's key names its Go module: written again, it would name another one."""
    from streambridge._core import core

    m = core.ModuleCore()
    with pytest.raises(TypeError, match="set once"):
        m._key = "7"
    m._key = 0x7FFFFFFF00  # a key that names nothing: it is closed as such
    with pytest.raises(TypeError, match="set once"):
        m._key = 8
    assert m._key == 0x7FFFFFFF00
