"""scripts/mutants.toml: every mutant still applies to the tree it is run on.

A mutant whose ``old`` text no longer occurs (the code moved or was rewritten) is reported
``invalid`` by ``scripts/mutate.py`` and checks nothing: a test-strength check that cannot fail.
This reads the list as the script does (`load_mutants`, `resolve_tests`) and names every entry
that would not run.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "mutate.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutate", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mutate", module)  # (its dataclasses resolve their module by name)
    spec.loader.exec_module(module)
    return module


mutate = _load_script()


@cache
def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@cache
def _tests(patterns: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(mutate.resolve_tests(ROOT, list(patterns)))


def _problem(m: Any) -> str | None:
    """Why the mutant ``m`` (a `mutate.Mutant`) would not run, as `mutate._one` decides, or None."""
    where = next((f for f in m.files if (ROOT / f).is_file()), None)
    if where is None:
        return f"none of its files exists: {m.files}"
    count = _text(ROOT / where).count(m.old)
    if count != 1:
        return f"'old' occurs {count} times in {where}"
    if m.new == m.old:
        return "'new' is 'old'"
    if not _tests(tuple(m.tests)):
        return f"no test file matches {m.tests}"
    return None


def test_every_mutant_applies() -> None:
    mutants = mutate.load_mutants(ROOT / "scripts" / "mutants.toml")  # (refuses unknown test aliases)
    assert mutants
    stale = [f"{m.id}: {why}" for m in mutants if (why := _problem(m)) is not None]
    assert not stale, "stale mutants in scripts/mutants.toml:\n" + "\n".join(stale)


def test_the_check_sees_a_stale_mutant() -> None:
    """The check itself: a moved file, an ``old`` gone or doubled, ``new == old``, no test file."""
    good = dict(
        id="x",
        family="f",
        what="w",
        files=["scripts/mutate.py"],
        old="def load_mutants(",
        new="def load_mutant(",
        tests=["tests/scripts/test_mutants.py"],
    )
    assert _problem(mutate.Mutant(**good)) is None
    assert _problem(mutate.Mutant(**{**good, "files": ["gone.py", "scripts/mutate.py"]})) is None
    assert _problem(mutate.Mutant(**{**good, "files": ["gone.py"]})) == "none of its files exists: ['gone.py']"
    assert _problem(mutate.Mutant(**{**good, "old": "no such text here"})) == (
        "'old' occurs 0 times in scripts/mutate.py"
    )
    assert str(_problem(mutate.Mutant(**{**good, "old": "import "}))).startswith("'old' occurs ")
    assert _problem(mutate.Mutant(**{**good, "new": good["old"]})) == "'new' is 'old'"
    assert _problem(mutate.Mutant(**{**good, "tests": ["tests/nothing/test_*.py"]})) == (
        "no test file matches ['tests/nothing/test_*.py']"
    )
