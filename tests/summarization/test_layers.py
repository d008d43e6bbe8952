"""The example's layers form a one-way chain: every import (module level or inside a function)
goes from a subpackage to itself or to an earlier layer, never back.

    base (jsonlines, dirlock, choices, devices, decode_options, typed) -> data -> kernels -> models -> decoding
        -> evaluation -> viz -> train -> demo / commands / cli

So a model can be loaded and decoded without the trainer (``models.load_model``), and evaluation
does not depend on training code (``evaluation.evaluate_run`` reads a run's ``config.json`` as
JSON). The scan reads the source with :mod:`ast`; nothing is imported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "examples" / "summarization" / "scg_summarize"

#: Layer of each top-level module or subpackage of ``scg_summarize`` (lower = earlier).
LAYERS: dict[str, int] = {
    "__init__": 0, "jsonlines": 0, "dirlock": 0, "choices": 0, "devices": 0, "decode_options": 0, "typed": 0,
    "data": 1,
    "kernels": 2,
    "models": 3,
    "decoding": 4,
    "evaluation": 5,
    "viz": 6,
    "train": 7,
    "demo": 8, "commands": 8, "cli": 8,
}  # fmt: skip


def _unit(module: str) -> str:
    """``scg_summarize.models.loading`` -> ``models``; ``scg_summarize`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every ``scg_summarize`` import in ``path``."""
    return _imports_in(path.read_text(encoding="utf-8"), _module_name(path), path.name == "__init__.py")


#: The first line of an import statement (``ruff format`` puts every statement on its own lines)
_IMPORT_START = re.compile(r"[ \t]*(?:from[ \t]+\.*[\w.]*[ \t]+import\b|import[ \t]+\w)")


def _import_statements(source: str) -> Iterator[tuple[int, ast.stmt]]:
    """``(line, statement)`` of every import statement in ``source``: its lines that start one,
    each parsed with its continuation lines: ~10x cheaper than parsing the whole file, and the
    same imports (a docstring line that is not a whole statement fails to parse and is skipped;
    one that is would be counted)."""
    lines = source.splitlines()
    for i, line in enumerate(lines):
        if not _IMPORT_START.match(line):
            continue
        statement, j = line.strip(), i
        while (statement.count("(") > statement.count(")") or statement.endswith("\\")) and j + 1 < len(lines):
            j += 1
            statement += "\n" + lines[j].strip()
        try:
            tree = ast.parse(statement)
        except SyntaxError:
            continue
        for node in tree.body:
            yield i + 1, node


def _imports_in(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every ``scg_summarize`` import in ``source``, the text of
    ``module`` (a package's ``__init__`` when ``is_package``)."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for line, node in _import_statements(source):
        if isinstance(node, ast.Import):
            found += [(line, a.name) for a in node.names if a.name.split(".")[0] == "scg_summarize"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "scg_summarize":
                continue
            if node.module is None or target == "scg_summarize":  # from . import x: x may be a module
                found += [(line, f"{target}.{a.name}") for a in node.names]
            else:
                found.append((line, target))
    return found


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_part_of_the_package_has_a_layer() -> None:
    units = {_unit(_module_name(p)) for p in _sources()}
    assert units <= set(LAYERS), f"give these a layer in LAYERS: {sorted(units - set(LAYERS))}"


def test_imports_go_one_way() -> None:
    wrong = []
    for path in _sources():
        here = _unit(_module_name(path))
        for line, target in _imports(path):
            there = _unit(target)
            if there not in LAYERS:  # e.g. "from . import __version__" resolved to a name
                there = "__init__"
            if there != here and LAYERS[there] > LAYERS[here]:
                wrong.append(f"{path.relative_to(PACKAGE)}:{line}: {here} imports {target} ({there} is a later layer)")
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


def test_the_scan_sees_function_level_and_relative_imports() -> None:
    # the check itself: a function-level relative import of a later layer is found and resolved
    source = "import os\n\ndef f():\n    from ..train.loop import load_model\n    from . import beam\n"
    found = _imports_in(source, "scg_summarize.decoding.adapters", is_package=False)
    assert found == [(4, "scg_summarize.train.loop"), (5, "scg_summarize.decoding.beam")]
    assert LAYERS[_unit(found[0][1])] > LAYERS["decoding"]  # would be reported
    in_init = _imports_in("from .loading import load_model\n", "scg_summarize.models", is_package=True)
    assert in_init == [(1, "scg_summarize.models.loading")]
    wrapped = '"""Docs.\n\nimport nothing else\n"""\nfrom ..train import (\n    Trainer,\n    load_config,\n)\n'
    assert _imports_in(wrapped, "scg_summarize.decoding.adapters", is_package=False) == [(5, "scg_summarize.train")]
