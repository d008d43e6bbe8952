"""Smoke test of ``benchmarks/small_models.py``: each workload's hand-written twin
(``benchmarks/small_workloads.py``) computes scg's gradient in every mode for the same draws
(what makes its ratios a like-for-like comparison), the peers' versions
(``benchmarks/small_models_peers.py``) reach every parameter, and the ``--quick`` run writes its
files. Timings are never asserted."""

from __future__ import annotations

import functools
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
    if str(BENCHMARKS) not in sys.path:  # small_models imports its neighbours by name
        sys.path.insert(0, str(BENCHMARKS))
    return load_benchmark("small_models")


@pytest.fixture(scope="module")
def work(bench: Any) -> Any:
    return sys.modules["small_workloads"]


@pytest.fixture(scope="module")
def report(bench: Any) -> Any:
    return sys.modules["small_models_report"]


def _grads(loss: Any, params: list[torch.Tensor], seed: int) -> list[torch.Tensor]:
    for p in params:
        p.grad = None
    torch.default_generator.manual_seed(seed)  # (torch.manual_seed also formats the stack for lazy CUDA seeding)
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


@pytest.mark.parametrize("workload", ["sbn", "ram", "sequence", "mixed", "toy", "attention"])
def test_hand_written_twin_has_scg_gradient_in_every_mode(work: Any, workload: str) -> None:
    """Two steps with the same seeds (the second sees the EMA / learned baselines' state after
    one update): the twin's gradient equals scg's in each mode (the attention and sequence loops
    at T = 6, not 30 and 20: the same program, a fifth and a third of the test's time)."""
    full = work.WORKLOADS[workload].make

    def make(batch: int, hidden: int) -> Any:
        return full(batch, hidden, steps=6) if workload in ("attention", "sequence") else full(batch, hidden)

    hand = make(4, 8)
    ref = [_grads(hand.hand_loss, hand.params, s) for s in (0, 1)]
    assert all(float(g.abs().sum()) > 0 for g in ref[1])  # every parameter is reached
    for mode, structure in STRUCTURES.items():
        model = make(4, 8)  # fresh baselines: the same state as the twin's
        loss = model.scg_loss(structure())
        for s in (0, 1):
            _assert_equal(_grads(loss, model.params, s), ref[s], f"{workload} {mode} step {s}")


def test_the_equality_check_catches_a_different_estimator(work: Any) -> None:
    """Not vacuous: another draw, or credit with the whole sum instead of the reward-to-go,
    gives a gradient the check refuses."""
    model = work.make_sequence(4, 8, steps=5)
    ref = _grads(model.hand_loss, model.params, 0)
    with pytest.raises(AssertionError):
        _assert_equal(_grads(model.scg_loss(scg.Declared()), model.params, 1), ref, "seed")
    per_cost, one_cost = work.chain(6, True, batch=4).model, work.chain(6, False, batch=4).model
    one_cost.params[0].data.copy_(per_cost.params[0].data)
    with pytest.raises(AssertionError):
        _assert_equal(
            _grads(one_cost.hand_loss, one_cost.params, 0),
            _grads(per_cost.scg_loss(scg.Declared()), per_cost.params, 0),
            "credit",
        )


def test_the_empty_mode_sees_every_call_and_changes_nothing(work: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The floor column's step (``under_empty_mode``) is the hand-written step with its torch calls
    routed through a Python function mode: the mode is entered for the step's calls, and the
    gradient is the hand-written one to the bit."""
    model = work.make_sbn(4, 8)
    hand, _ = work.steps(model)
    ref = _grads(model.hand_loss, model.params, 3)
    seen: list[object] = []
    plain = work.EmptyMode.__torch_function__

    def counting(self: Any, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        seen.append(func)
        return plain(self, func, types, args, kwargs)

    monkeypatch.setattr(work.EmptyMode, "__torch_function__", counting)
    for p in model.params:
        p.grad = None
    torch.default_generator.manual_seed(3)
    work.under_empty_mode(hand)()  # (forward and backward, as `_grads` runs them)
    assert len(seen) > 20 and torch.Tensor.backward in seen
    assert all(torch.equal(p.grad, r) for p, r in zip(model.params, ref))


@pytest.mark.parametrize("per_node_costs", [True, False])
def test_per_node_chain_twin(work: Any, per_node_costs: bool) -> None:
    """The per-node scan compares like with like: the chain's twin has scg's gradient."""
    model = work.chain(5, per_node_costs, batch=3).model
    ref = _grads(model.hand_loss, model.params, 2)
    for mode, structure in STRUCTURES.items():
        _assert_equal(_grads(model.scg_loss(structure()), model.params, 2), ref, mode)


def test_quick_run_writes_its_files(
    bench: Any, work: Any, report: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("attention", "sequence"):  # their loops at T = 6, as above: the rows' code, not their timings
        looped = work.WORKLOADS[name]
        monkeypatch.setitem(work.WORKLOADS, name, looped._replace(make=functools.partial(looped.make, steps=6)))
    page = tmp_path / "page.md"
    page.write_text(f"# Page\n\nbefore\n{report.BEGIN}\nold numbers\n{report.END}\nafter\n")
    data = bench.main(["--quick", "--profile", "--out", str(tmp_path), "--docs", str(page)])
    names = {p.name for p in tmp_path.iterdir()}
    assert {"small_models.json", "small_models.md", "small_models.png"} <= names
    saved = json.loads((tmp_path / "small_models.json").read_text())
    assert saved["meta"]["quick"] and len(saved["rows"]) == len(bench.WORKLOADS) == len(data["rows"])
    assert {r["workload"] for r in saved["rows"]} == set(bench.WORKLOADS)
    assert all(r["repeats"] == 1 for r in saved["rows"])
    for r in saved["rows"]:
        for m in (*bench.MODES, "empty_mode"):
            assert r[f"{m}_ms"] > 0 and r[f"{m}_ratio"] > 0
        assert r["tracked_over_empty_mode"] > 0
    assert [p["N"] for p in saved["per_node"]] == [1, 2, 4]
    fits = report.slopes(saved["per_node"])
    assert set(fits) == set(bench.MODES) and all(len(f) == 9 for f in fits.values())
    assert set(saved["profile"]) == {"declared", "tracked"}
    assert saved["profile"]["declared"]["entry_points"]["scg.sample"]["calls"] == 2
    text = (tmp_path / "small_models.md").read_text()
    assert "sigmoid belief net" in text and "Per-node cost" in text and "cProfile" in text
    assert "Fit extra(N) = fixed + slope" in text
    docs = page.read_text()
    assert docs.startswith("# Page\n\nbefore\n") and docs.endswith(f"{report.END}\nafter\n")
    assert "old numbers" not in docs and "Per-node cost" in docs and "Top entries" not in docs
    (tmp_path / "small_models.md").unlink()
    page.write_text(f"{report.BEGIN}\n{report.END}\n")
    # the report again, from the JSON alone; its figure is the one drawn above from the same points (about
    # 1 s of CPU per drawing): here only that --render draws it again, from the saved points, to the same file
    drawn: list[tuple[Any, Path]] = []
    monkeypatch.setattr(bench, "plot", lambda points, path: drawn.append((points, path)))
    bench.main(["--render", "--out", str(tmp_path), "--docs", str(page)])
    assert drawn == [(saved["per_node"], tmp_path / "small_models.png")]
    assert (tmp_path / "small_models.md").read_text() == text
    assert report.report(saved, level="####", top=False)[0] in page.read_text()


def test_docs_without_markers_are_refused(report: Any, tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# no markers\n")
    with pytest.raises(SystemExit, match="markers"):
        report.write_docs({}, page)
    assert page.read_text() == "# no markers\n"


@pytest.mark.slow  # three worker processes importing Pyro and Storchastic: about 2 min on a busy machine
def test_peers_reach_every_parameter_and_time_each_workload(bench: Any) -> None:
    """Each peer's version of a workload gives every parameter a finite nonzero gradient (in
    its own process: Storchastic patches torch); a workload a peer does not map is reported as
    such, with the reason, not timed; the rows time the rest."""
    peers = bench.peers
    for lib in peers.PEERS:
        worker = peers.PeerWorker(lib, 1, 300.0)
        try:
            for name in bench.WORKLOADS:
                if peers.mapping(name, lib).startswith(peers.NOT_MAPPED):
                    continue
                assert worker.call("build", name, 3, 4)[0] == "ok", (lib, name)
                status, sizes = worker.call("grads")
                assert status == "ok" and sizes and all(g is not None and 0 < g < float("inf") for g in sizes), (
                    lib,
                    name,
                    sizes,
                )
        finally:
            worker.stop()
    rows = peers.peer_rows(1, [2], 4, ["sbn", "mixed"], floor_s=0.0)
    by = {r["workload"]: r for r in rows}
    assert {f"{lib}_ratio" for lib in peers.PEERS} <= set(by["sbn"])
    assert "storch_ratio" in by["mixed"] and "pyro_ratio" not in by["mixed"]
    assert by["mixed"]["pyro_mapping"].startswith(peers.NOT_MAPPED)
    text = "\n".join(peers.peer_lines(rows))
    assert "n/a" in text and "Pyro JitTraceGraph / hand" in text


@pytest.mark.slow  # two dynamo captures, ~2 s
def test_compiled_steps_compute_the_eager_gradient(work: Any) -> None:
    """The compiled row compares like with like: captured whole with ``fullgraph=True`` (dynamo's
    eager backend keeps torch's draws), the hand-written and the declared step give the eager
    hand-written gradient."""
    model = work.make_sequence(4, 8, steps=5)
    ref = _grads(model.hand_loss, model.params, 0)
    for what, loss in (("hand", model.hand_loss), ("declared", model.scg_loss(scg.Declared()))):
        compiled = torch.compile(loss, fullgraph=True, dynamic=False, backend="eager")
        _assert_equal(_grads(compiled, model.params, 0), ref, f"compiled {what}")
