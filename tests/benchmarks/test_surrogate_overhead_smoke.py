"""Smoke test of ``benchmarks/surrogate_overhead.py`` at tiny sizes: every implementation of a
row computes the same gradient for the same draws, and the report renders from the JSON.
(The timings themselves are never asserted: they live in ``benchmarks/results``.)"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from _benchmark_loader import load_benchmark


@pytest.fixture(scope="module")
def bench() -> Any:
    return load_benchmark("surrogate_overhead")


def _grads(step: Any, params: list[torch.Tensor], seed: int) -> list[torch.Tensor]:
    for p in params:
        p.grad = None
    torch.manual_seed(seed)
    step()
    return [p.grad.clone() for p in params]


def test_every_mode_computes_the_hand_written_gradient(bench: Any) -> None:
    """The modes time the same estimator: with the same draws their gradients are equal (the
    Declared step without the finiteness checks too, which ``--device cuda`` adds)."""
    hand, modes, params = bench.make_attention(8, batch=4, chunks=3, steps=5, unchecked=True)
    assert set(modes) == {*bench.MODES, bench.UNCHECKED}
    ref = _grads(hand, params, 0)
    assert any(float(g.abs().sum()) > 0 for g in ref)
    for name, step in modes.items():
        for a, b in zip(_grads(step, params, 0), ref):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=name)
    hand_toy, modes_toy, params_toy = bench.make_toy(unchecked=True)
    assert set(modes_toy) == {*bench.MODES, bench.UNCHECKED}
    ref = _grads(hand_toy, params_toy, 1)
    for name, step in modes_toy.items():
        for a, b in zip(_grads(step, params_toy, 1), ref):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)


def test_rows_scan_and_report(bench: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the rows' code, not their timings: the attention row's model at T=5, B=4 (its T=30, B=32 step
    # cost most of this test's CPU; the test above checks that model's modes at this size)
    monkeypatch.setattr(bench, "make_attention", functools.partial(bench.make_attention, batch=4, steps=5))
    rows = bench.overhead(1, [8], toy=True, warm=0, unchecked=True)  # (the column --device cuda adds)
    assert [r["workload"] for r in rows] == [bench.attention_label(8), bench.TOY]
    for r in rows:
        for m in (*bench.MODES, bench.UNCHECKED):
            assert math.isfinite(r[f"{m}_ratio"]) and r[f"{m}_ms"] > 0
    pts = bench.scan(1, steps=(2, 3))
    assert [p["T"] for p in pts] == [2, 3] and "declared_ms" in pts[0]
    data = {"meta": {**bench.machine(bench.CPU), "repeats": 1}, "rows": rows, "scan": pts}
    (tmp_path / "s.json").write_text(json.dumps(data))
    bench.render(json.loads((tmp_path / "s.json").read_text()), tmp_path / "s.md")
    text = (tmp_path / "s.md").read_text()
    assert bench.TOY in text and "| 3 |" in text and "Declared, `check_finite=False` / hand" in text
    cpu_rows = [{k: v for k, v in r.items() if not k.startswith(bench.UNCHECKED)} for r in rows]
    bench.render({**data, "rows": cpu_rows}, tmp_path / "cpu.md")
    assert "check_finite" not in (tmp_path / "cpu.md").read_text()
    bench.plot(pts, tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 0


@pytest.mark.slow  # two inductor compilations per T: ~20 s
def test_scan_with_compiled_steps(bench: Any) -> None:
    pts = bench.scan(1, steps=(2,), compiled=True)
    assert pts[0]["compiled_declared_ms"] > 0 and pts[0]["compiled_hand_ms"] > 0
