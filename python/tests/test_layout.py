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
