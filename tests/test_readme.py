"""The README's example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    # n=2000 draws as written are run by the slow test_python_blocks_run_as_written
    # (tests/summarization/commands/test_newcomer_docs.py); here n=200 (issue 28: a fast default suite)
    code, count = re.subn(r"\bn=2000\b", "n=200", blocks[0])
    assert count == 1, "the README example no longer calls assert_unbiased with n=2000: update this test"
    namespace: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), namespace)
    theta = namespace["theta"]
    assert theta.grad is not None  # type: ignore[attr-defined]


def test_getting_started_examples_run() -> None:
    doc = README.parent / "docs" / "getting-started.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)
    assert len(blocks) == 2
    # the training loop trimmed to 3 iterations and the unbiasedness check to n=200 (the slow tests of
    # test_newcomer_docs.py run both as written and check that the loop learns); the trims must match
    trimmed = [re.subn(r"for it in range\(\d+\)", "for it in range(3)", block)[0] for block in blocks]
    trimmed = [re.subn(r"\bn=2000\b", "n=200", block)[0] for block in trimmed]
    assert "range(3)" in trimmed[0] and "n=200" in trimmed[1], "getting-started.md changed: update this test"
    namespace: dict[str, object] = {}
    for code in trimmed:
        exec(compile(code, str(doc), "exec"), namespace)
    assert "g" in namespace
