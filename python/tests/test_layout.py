import ast
import pathlib

import streambridge

PACKAGE = pathlib.Path(streambridge.__file__).parent


def _imports(path):
    """The package's modules a module imports, at top level or inside functions alike."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                names.add(node.module.split(".")[0])
            else:
                names.update(alias.name for alias in node.names)
    return {n for n in names if (PACKAGE / f"{n}.py").exists()}


def test_modules_import_one_another_without_cycles():
    graph = {p.stem: _imports(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert graph["_stream"] >= {"_event", "_graph"}, "the graph is read from the sources"
    done, path = set(), []

    def visit(m):
        assert m not in path, f"import cycle: {' -> '.join(path[path.index(m):] + [m])}"
        if m in done:
            return
        path.append(m)
        for n in sorted(graph[m]):
            visit(n)
        path.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)


def _stub_names():
    """What _coretypes.pyi (the C core as type checkers see it) declares: {class: names},
    with the module's functions under None."""
    declared = {}
    for node in ast.parse((PACKAGE / "_coretypes.pyi").read_text()).body:
        if isinstance(node, ast.ClassDef):
            declared[node.name] = {n.name if isinstance(n, ast.FunctionDef) else n.target.id
                                   for n in node.body if isinstance(n, (ast.FunctionDef, ast.AnnAssign))}
        elif isinstance(node, ast.FunctionDef):
            declared.setdefault(None, set()).add(node.name)
    return declared


def test_the_core_stub_names_what_the_core_has():
    # The stub is written by hand beside core.c; this fails when they part.
    from streambridge._core import core

    declared = _stub_names()
    functions = {n for n, v in vars(core).items() if callable(v) and not isinstance(v, type) and n[:2] != "__"}
    assert declared.pop(None) == functions
    for name, names in declared.items():
        cls = getattr(core, name)
        own = {n for n in vars(cls) if n[:2] != "__"} | ({"__call__"} if "__call__" in vars(cls) else set())
        assert names - {"__init__"} == own, name


def test_the_typed_user_script_runs():
    import typed_use

    assert typed_use.main()[0] == "callback ran"


def test_the_go_exports_answer_and_write_to_no_address():
    """The Go exports the C core asks (reachable from Python too) return their answers;
    none takes an address to write to, so no Python call can make Go write anywhere."""
    import inspect

    import pytest

    import streambridge as sb
    from streambridge._native import pyshim

    owner = sb.Stream(non_blocking=True)
    sb.ExternalStream(owner.ptr)  # a wrap: the layout is learned
    assert all(w.isdigit() for w in pyshim.StreamMemory().split())
    device, ident = map(int, pyshim.CheckStream(owner.ptr, -1, 0, False).split())
    assert device == owner.device_id and ident != 0
    with pytest.raises(sb.InvalidHandleError):
        pyshim.CheckStream(0xDEADBEEF, -1, 0, False)
    for name, fn in vars(pyshim).items():
        if inspect.isfunction(fn) and not name.startswith("_"):
            params = set(inspect.signature(fn).parameters)
            assert not params & {"idOut", "out", "outAt"}, name
            assert "addr" not in params or name == "ReadWords", name  # ReadWords reads, fault-safely
    owner.close()


def test_the_python_the_core_calls_is_named_once_and_found():
    """The core calls a few Python readers (python.inc's table, looked up on first use):
    each name there is a callable of its module, and no import hands the core anything (no
    set_* hook is left to forget)."""
    from streambridge._core import core

    found = core.python_names()
    assert found, "python.inc names the Python the core calls"
    for name, obj in found.items():
        assert callable(obj) or type(obj).__name__ == "module", f"{name} is {obj!r}"
    kinds = [obj for name, obj in found.items() if name.startswith("kind ")]
    assert streambridge.CaptureError in kinds and streambridge.CUDAError in kinds and ValueError in kinds
    assert all(issubclass(k, BaseException) for k in kinds), "every error kind's class, found by its name"
    assert not [n for n in dir(core) if n.startswith("set_")], "import-time hooks are gone"


def test_record_and_wait_cross_into_python_only_to_read_an_argument():
    """Every form of record and wait has one body, in the core: no call comes back into
    Python for the operation (once Stream.record() went C -> Python _record -> C, and
    Stream.wait was Python). Python runs only where an argument is read: the current stream
    for None, an EventOptions, another framework's stream object."""
    import sys

    from streambridge._core import core

    readers = {name.rsplit(".", 1)[-1] for name in core.python_names()} | {"of", "default_stream"}
    s, e = streambridge.Stream(non_blocking=True), streambridge.Event()
    other = streambridge.Stream(non_blocking=True)
    forms = {
        "s.record()": lambda: s.record(),
        "s.record(e)": lambda: s.record(e),
        "s.record(event=e)": lambda: s.record(event=e),
        "s.record(None, options)": lambda: s.record(None, {"timing_enabled": False}),
        "s.record(options=options)": lambda: s.record(options={"timing_enabled": True}),
        "s.record_event()": lambda: s.record_event(),
        "e.record()": lambda: e.record(),
        "e.record(s)": lambda: e.record(s),
        "e.record(stream=s)": lambda: e.record(stream=s),
        "e.wait()": lambda: e.wait(),
        "e.wait(None)": lambda: e.wait(None),
        "e.wait(stream=s)": lambda: e.wait(stream=s),
        "s.wait(e)": lambda: s.wait(e),
        "s.wait(other)": lambda: s.wait(other),
        "s.wait(event_or_stream=other)": lambda: s.wait(event_or_stream=other),
    }
    for form, call in forms.items():
        calls = []

        def profile(frame, event, arg):
            if event == "call" and "streambridge" in frame.f_code.co_filename:
                calls.append(frame.f_code.co_name)

        sys.setprofile(profile)
        try:
            call()
        finally:
            sys.setprofile(None)
        outside = [c for c in calls if c not in readers and c != "record_event"]
        assert not outside, f"{form} ran Python {outside}"
    made = s.record(options={"timing_enabled": True})
    assert type(made) is streambridge.Event and made.is_timing_enabled and made.device_id == s.device_id
    s.synchronize()
