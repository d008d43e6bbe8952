"""The examples of docs/estimators.md run as written (in order, sharing one namespace)."""

from __future__ import annotations

import re
from pathlib import Path

import torch

DOC = Path(__file__).resolve().parents[3] / "docs" / "estimators.md"


def test_estimator_guide_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 6
    namespace: dict[str, object] = {}
    with torch.random.fork_rng():
        torch.manual_seed(0)
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), namespace)
    assert namespace["report"].passed  # type: ignore[attr-defined]
    assert namespace["hessian_row"].shape == (3,)  # type: ignore[attr-defined]
