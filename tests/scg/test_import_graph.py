"""No import circles in ``scg``: the module graph, built from every import statement (top-level,
lazy inside functions, and under ``TYPE_CHECKING``), has no cycle."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, whether it is a package's ``__init__``)."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted((root / "scg").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if package else parts)] = (path, package)
    return out


def _statements(tree: ast.Module) -> Iterator[ast.AST]:
    """Every statement, nested ones included (an import is a statement, wherever it is: top level,
    in a function, under ``if TYPE_CHECKING``, in a ``try``); expressions are not visited (most of
    the nodes: ``ast.walk`` took about as long as parsing)."""
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                stack.extend(inner)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the scg modules it imports. ``from a.b import c`` is an edge to ``a.b.c`` when
    that is a module, else to ``a.b``; relative imports are resolved."""
    modules = _modules(root)
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, (path, package) in modules.items():
        for node in _statements(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
            edges[name].update(t for t in targets if t in modules and t != name)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == 1:
                return [*path[path.index(n) :], n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_scg_has_no_import_cycle() -> None:
    edges = import_graph()
    assert len(edges) > 50 and sum(map(len, edges.values())) > 150  # the walk found the package
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle in scg: " + " -> ".join(cycle or [])


def test_the_checker_names_a_cycle(tmp_path: Path) -> None:
    """A lazy import and a TYPE_CHECKING import that close a circle are caught and named."""
    pkg = tmp_path / "scg"
    (pkg / "graph").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "graph" / "__init__.py").write_text("")
    (pkg / "graph" / "a.py").write_text("def f():\n    from scg.graph.b import g\n")
    (pkg / "graph" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\ng = 1\n"
    )
    assert find_cycle(import_graph(tmp_path)) == ["scg.graph.a", "scg.graph.b", "scg.graph.a"]
