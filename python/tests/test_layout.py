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
