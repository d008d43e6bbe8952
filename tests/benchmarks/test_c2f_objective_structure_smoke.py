"""Smoke test of ``benchmarks/c2f_objective_structure.py`` at tiny sizes: the three graphs' steps run
and give the same gradient for the same draws, and the report renders. (Timings are never asserted.)"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _benchmark_loader import load_benchmark

import scg


@pytest.fixture(scope="module")
def bench() -> Any:
    return load_benchmark("c2f_objective_structure")


def test_every_graph_gives_one_gradient_and_the_report_renders(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "SIZES", {"B": 2, "M": 3, "N": 4, "T": 4, "V": 20, "H": 8})
    model, batch = bench.make_model_and_batch()
    grads = []
    for structure in (None, scg.Cached(), scg.Declared()):
        model.zero_grad()
        torch.manual_seed(1)
        bench.make_step(structure, model, batch)()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    assert grads[0].abs().max() > 0
    for g in grads[1:]:
        torch.testing.assert_close(g, grads[0])
    result = bench.run(repeats=1)
    assert set(result["ms"]) == {"tracked", "Cached", "Declared"}
    assert "| Declared |" in bench.to_markdown(result, "cmd")
