"""Smoke test of ``benchmarks/small_models.py``: each workload's hand-written twin computes scg's
gradient in every mode for the same draws (what makes its ratios a like-for-like comparison),
and the ``--quick`` run writes its files. Timings are never asserted."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from _benchmark_loader import BENCHMARKS, load_benchmark

import scg


@pytest.fixture(scope="module")
def bench() -> Any:
    if str(BENCHMARKS) not in sys.path:  # small_models imports surrogate_overhead by name
        sys.path.insert(0, str(BENCHMARKS))
    return load_benchmark("small_models")


def _grads(loss: Any, params: list[torch.Tensor], seed: int) -> list[torch.Tensor]:
    for p in params:
        p.grad = None
    torch.manual_seed(seed)
    loss().backward()
    return [p.grad.clone() for p in params]


def _assert_equal(got: list[torch.Tensor], ref: list[torch.Tensor], what: str) -> None:
    """Equal to 1e-6 relative to each gradient tensor's largest entry."""
    for i, (a, b) in enumerate(zip(got, ref)):
        scale = float(b.abs().max())
        err = float((a - b).abs().max())
        assert err <= 1e-6 * max(scale, 1e-12), f"{what}, parameter {i}: {err:.3g} vs {scale:.3g}"


STRUCTURES = {
    "tracked": lambda: None,
    "cached": lambda: scg.Cached(check_every=100),
    "declared": lambda: scg.Declared(),
}


@pytest.mark.parametrize("workload", ["sbn", "ram", "sequence", "mixed"])
def test_hand_written_twin_has_scg_gradient_in_every_mode(bench: Any, workload: str) -> None:
    """Two steps with the same seeds (the second sees the EMA / learned baselines' state after
    one update): the twin's gradient equals scg's in each mode."""
    make = bench.WORKLOADS[workload][1]
    hand = make(4, 8)
    ref = [_grads(hand.hand_loss, hand.params, s) for s in (0, 1)]
    assert all(float(g.abs().sum()) > 0 for g in ref[1])  # every parameter is reached
    for mode, structure in STRUCTURES.items():
        model = make(4, 8)  # fresh baselines: the same state as the twin's
        loss = model.scg_loss(structure())
        for s in (0, 1):
            _assert_equal(_grads(loss, model.params, s), ref[s], f"{workload} {mode} step {s}")


def test_the_equality_check_catches_a_different_estimator(bench: Any) -> None:
    """Not vacuous: another draw, or credit with the whole sum instead of the reward-to-go,
    gives a gradient the check refuses."""
    model = bench.make_sequence(4, 8, steps=5)
    ref = _grads(model.hand_loss, model.params, 0)
    with pytest.raises(AssertionError):
        _assert_equal(_grads(model.scg_loss(scg.Declared()), model.params, 1), ref, "seed")
    per_cost, _ = bench.chain(6, True, batch=4)
    one_cost, _ = bench.chain(6, False, batch=4)
    one_cost.params[0].data.copy_(per_cost.params[0].data)
    with pytest.raises(AssertionError):
        _assert_equal(
            _grads(one_cost.hand_loss, one_cost.params, 0),
            _grads(per_cost.scg_loss(scg.Declared()), per_cost.params, 0),
            "credit",
        )


@pytest.mark.parametrize("per_node_costs", [True, False])
def test_per_node_chain_twin(bench: Any, per_node_costs: bool) -> None:
    """The per-node scan compares like with like: the chain's twin has scg's gradient."""
    model, _ = bench.chain(5, per_node_costs, batch=3)
    ref = _grads(model.hand_loss, model.params, 2)
    for mode, structure in STRUCTURES.items():
        _assert_equal(_grads(model.scg_loss(structure()), model.params, 2), ref, mode)


def test_quick_run_writes_its_files(bench: Any, tmp_path: Path) -> None:
    data = bench.main(["--quick", "--profile", "--out", str(tmp_path)])
    names = {p.name for p in tmp_path.iterdir()}
    assert {"small_models.json", "small_models.md", "small_models.png"} <= names
    saved = json.loads((tmp_path / "small_models.json").read_text())
    assert saved["meta"]["quick"] and len(saved["rows"]) == 4 == len(data["rows"])
    assert {r["workload"] for r in saved["rows"]} == set(bench.WORKLOADS)
    for r in saved["rows"]:
        for m in bench.MODES:
            assert r[f"{m}_ms"] > 0 and r[f"{m}_ratio"] > 0
    assert [p["N"] for p in saved["per_node"]] == [2, 4]
    assert set(saved["profile"]) == {"declared", "tracked"}
    assert saved["profile"]["declared"]["entry_points"]["scg.sample"]["calls"] == 2
    text = (tmp_path / "small_models.md").read_text()
    assert "sigmoid belief net" in text and "Per-node cost" in text and "cProfile" in text
    assert "Slopes against N" in text
    (tmp_path / "small_models.md").unlink()
    bench.main(["--render", "--out", str(tmp_path)])  # the report again, from the JSON alone
    assert (tmp_path / "small_models.md").read_text() == text


@pytest.mark.slow  # two dynamo captures, ~2 s
def test_compiled_steps_compute_the_eager_gradient(bench: Any) -> None:
    """The compiled row compares like with like: captured whole with ``fullgraph=True`` (dynamo's
    eager backend keeps torch's draws), the hand-written and the declared step give the eager
    hand-written gradient."""
    model = bench.make_sequence(4, 8, steps=5)
    ref = _grads(model.hand_loss, model.params, 0)
    for what, loss in (("hand", model.hand_loss), ("declared", model.scg_loss(scg.Declared()))):
        compiled = torch.compile(loss, fullgraph=True, dynamic=False, backend="eager")
        _assert_equal(_grads(compiled, model.params, 0), ref, f"compiled {what}")
