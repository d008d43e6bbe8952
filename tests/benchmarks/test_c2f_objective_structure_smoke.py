"""Smoke test of ``benchmarks/c2f_objective_structure.py`` at tiny sizes: for both objectives the three
graphs' steps give the same gradient for the same draws, and the report renders. (Timings are never
asserted.)"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _benchmark_loader import load_benchmark


@pytest.fixture(scope="module")
def bench() -> Any:
    return load_benchmark("c2f_objective_structure")


def test_every_graph_gives_one_gradient_and_the_report_renders(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "SIZES", {"B": 2, "M": 3, "N": 4, "T": 4, "V": 20, "H": 8})
    model, batch = bench.make_model_and_batch()
    for make in (bench.make_step, bench.make_self_critical_step):
        grads = []
        for structure in bench.STRUCTURES.values():
            model.zero_grad()
            torch.manual_seed(1)
            make(structure(), model, batch)()
            grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
        assert grads[0].abs().max() > 0
        for g in grads[1:]:
            torch.testing.assert_close(g, grads[0])
    result = bench.run(repeats=1)
    assert {(obj, name) for obj, row in result["ms"].items() for name in row} == {
        (obj, name) for obj in ("c2f", "self-critical") for name in ("tracked", "Cached", "Declared")
    }
    assert "| self-critical | Declared |" in bench.to_markdown(result, "cmd")
