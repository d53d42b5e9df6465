"""No import circles among the modules of simrl/, envs/ and tasks/.

The graph is read from the source with ast, not by importing: every `import` and `from ...
import` of a file counts, at any depth (inside a function too: a circle that only a
function-local import closes still ties the two modules together), relative imports resolved
against the file's package. `from pkg import name` is an edge to the module pkg.name when there
is one (a package importing its own submodules counts), else to pkg. An import of one of the
module's own ancestor packages is not an edge: Python imports those before the module anyway.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("simrl", "envs", "tasks")


def modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """{dotted name: path} of the .py files under root/<package> (a package is its __init__)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _owner(name: str, known) -> str | None:
    """The module of `name`: itself, else its nearest enclosing module of `known` (None: outside)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path, packages=PACKAGES) -> dict[str, set[str]]:
    """{module: the modules of `packages` it imports}."""
    known = modules(root, packages)
    graph = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.add(sub if sub in known else base)
        edges = set()
        for target in targets:
            owner = _owner(target, known)
            if owner and owner != name and not name.startswith(owner + "."):
                edges.add(owner)
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_import_circles():
    found = circles(import_graph(ROOT))
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_graph_holds_every_kind_of_import():
    """The walk sees absolute, function-local and package-to-submodule imports (what the test
    above relies on)."""
    graph = import_graph(ROOT)
    assert "simrl.sim.forward" in graph["simrl.sim.sim"]  # from simrl.sim import forward
    assert "simrl.sim.sim" in graph["simrl"]  # a package's own submodule
    assert "simrl.sim.sim" in graph["simrl.diff"]  # a function-local import
    assert "simrl.deps" in graph["simrl.sim.by_reference"]  # from simrl import deps: the submodule
    assert "simrl" not in graph["simrl.sim.by_reference"]  # an ancestor package is no edge


def test_a_circle_is_found(tmp_path):
    """A circle closed by a relative, function-local import is named."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n    return a\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    assert circles(import_graph(tmp_path, ("pkg",))) == [["pkg.a", "pkg.sub.b"]]
