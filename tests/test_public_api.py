"""The example uses only scg's public API, and the core does not import viz or testing."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import scg

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_MODULES = {"scg", "scg.baselines", "scg.estimators", "scg.testing", "scg.viz"}
#: text that every source importing scg or reading ``scg.attr`` contains (``scg.x``, ``import scg``,
#: ``from scg``, ``import a, scg``): a superset, so that only those sources are parsed and walked
_MENTIONS_SCG = re.compile(r"(?<![\w.])scg\.\w|\b(import|from)\s+scg\b|\bimport\b[^\n]*,\s*scg\b")


@dataclass(kw_only=True, slots=True)
class ExampleUses:
    """What the example's sources use of scg, from one parse of each file (one walk finds both)."""

    imports: list[tuple[str, int, str, list[str]]]  # (file, line, absolute module, imported names)
    attributes: list[tuple[str, int, str]]  # (file, line, attr) of every ``scg.attr``


@pytest.fixture(scope="module")
def example_uses() -> ExampleUses:
    files = sorted((ROOT / "examples").rglob("*.py"))
    assert files, "no example sources found"
    uses = ExampleUses(imports=[], attributes=[])
    for f in files:
        rel, text = str(f.relative_to(ROOT)), f.read_text()
        if not _MENTIONS_SCG.search(text):  # no import of scg nor scg.attr: most sources, not walked
            continue
        for node in ast.walk(ast.parse(text, filename=str(f))):
            if isinstance(node, ast.Import):
                uses.imports += [(rel, node.lineno, a.name, []) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                uses.imports.append((rel, node.lineno, node.module, [a.name for a in node.names]))
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "scg":
                uses.attributes.append((rel, node.lineno, node.attr))
    return uses


def test_example_imports_only_public_scg(example_uses: ExampleUses) -> None:
    bad = []
    for f, line, module, names in example_uses.imports:
        if module.split(".")[0] != "scg":
            continue
        if module not in PUBLIC_MODULES:
            bad.append(f"{f}:{line}: import of private module {module}")
        elif module == "scg":
            bad += [
                f"{f}:{line}: scg.{n} is not public" for n in names if n not in scg.__all__ and n not in PUBLIC_MODULES
            ]
    assert not bad, "\n".join(bad)


def test_example_attribute_access_is_public(example_uses: ExampleUses) -> None:
    """``scg.graph.x`` style attribute chains in the example must stay in the public namespace."""
    bad = [f"{f}:{line}: scg.{attr}" for f, line, attr in example_uses.attributes if attr not in scg.__all__]
    assert not bad, "\n".join(bad)


def test_core_never_imports_viz_or_testing() -> None:
    bad = []
    for f in sorted((ROOT / "scg").rglob("*.py")):
        rel = f.relative_to(ROOT / "scg").parts
        text = f.read_text()
        if rel[0] in ("viz", "testing") or not ("scg.viz" in text or "scg.testing" in text):
            continue
        tree = ast.parse(text)
        for node in tree.body:  # module level only: lazy imports inside methods (Graph.draw) are fine
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods = [node.module]
            bad += [f"{f}: {m}" for m in mods if m.startswith(("scg.viz", "scg.testing"))]
    assert not bad, bad


def test_public_names_exist() -> None:
    for name in scg.__all__:
        assert hasattr(scg, name), name
    for mod in (scg.baselines, scg.estimators):
        for name in mod.__all__:
            assert hasattr(mod, name), f"{mod.__name__}.{name}"


def test_api_reference_names_exist() -> None:
    """Every ``Name(`` in the tables of docs/api.md is exported where the table says."""
    import scg.testing

    text = (ROOT / "docs" / "api.md").read_text()
    sections = {"## Estimators": scg.estimators, "## Baselines": scg.baselines, "## Testing": scg.testing}
    checked = 0
    for header, module in sections.items():
        body = text.split(header, 1)[1].split("\n## ", 1)[0]
        for name in re.findall(r"^\| `([A-Za-z_]+)[(`]", body, flags=re.M):
            assert hasattr(module, name), f"{module.__name__}.{name} is documented but missing"
            checked += 1
    assert checked >= 15
