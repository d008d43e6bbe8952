"""The README's example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    namespace: dict[str, object] = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)
    theta = namespace["theta"]
    assert theta.grad is not None  # type: ignore[attr-defined]


def test_getting_started_examples_run() -> None:
    doc = README.parent / "docs" / "getting-started.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)
    assert len(blocks) == 2
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block.replace("range(100)", "range(3)"), str(doc), "exec"), namespace)
    assert "g" in namespace
