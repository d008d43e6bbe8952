"""Smoke test of ``benchmarks/estimators.py``: the scg part on small sizes, in-process.

The peers (Storchastic, Pyro) run only in worker processes (``import storch`` patches torch
globally, so it must never be imported into the test process); that part is covered by one short
run, marked slow (``pytest -m slow``) and skipped when they are not installed.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from _benchmark_loader import load_benchmark
from _estimators_util import exact_gradient_batched

SMALL = {
    "toy": {"bias": {}, "full": {}},
    "dvae": {"bias": {"D": 16, "K": 3, "B": 1}, "full": {"D": 16, "K": 8, "B": 8}},
    "attention": {"bias": {"T": 2, "B": 1, "M": 3, "H": 4}, "full": {"T": 4, "B": 4, "M": 5, "H": 8}},
}


@pytest.fixture(scope="module")
def bench() -> Any:
    module = load_benchmark("estimators")
    # every run_benchmark call enumerates its problems' exact gradient; a problem is a function of its
    # name and size (seed 0), so the tests of this module share them. The toy's 40 runs, one graph each
    # in scg.testing (~0.3 s of CPU), are enumerated as the rows of one graph by the particle-batched
    # oracle (checked against scg.testing's in test_core_unbiased.py); dvae and attention (nodes of
    # several elements per run) still go through the benchmark's own exact_gradient
    exact = module.exact_gradient
    known: dict[tuple[str, str], torch.Tensor] = {}

    def toy_exact_gradient(prob: Any) -> torch.Tensor:
        program = module.scg_program(prob, "sf")
        sizes = [p.numel() for p in prob.params]
        flat = torch.cat([p.detach().reshape(-1) for p in prob.params]).requires_grad_()

        def batched(rows: torch.Tensor) -> None:  # (runs, d): each run's parameters, flattened
            program(*[x.reshape(-1, *p.shape) for x, p in zip(rows.split(sizes, dim=1), prob.params)])

        return exact_gradient_batched(batched, flat)

    def shared_exact_gradient(prob: Any) -> torch.Tensor:
        key = (prob.name, json.dumps(prob.size, sort_keys=True))
        if key not in known:
            known[key] = toy_exact_gradient(prob) if prob.name == "toy" else exact(prob)
        return known[key]

    module.exact_gradient = shared_exact_gradient
    return module


@pytest.fixture(autouse=True)
def one_thread() -> Any:
    """One intra-op thread, as the benchmark's workers use (tiny ops on a loaded machine crawl with more)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _config(bench: Any, libs: tuple[str, ...], **kw: Any) -> Any:
    base = dict(
        n_bias=2000,
        n_var={"toy": 500, "dvae": 250, "attention": 64},
        warmup=2,
        rounds=1,  # timed rounds: the rows need a finite time, not a precise one
        chunk_seconds=0.01,
        libs=libs,
        sizes=SMALL,
        particles={"toy": 500, "dvae": 250, "attention": 128},
        n_same=5,
    )
    base.update(kw)
    return bench.Config(**base)


def _check_rows(rows: list[dict[str, Any]], cfg: Any) -> None:
    for r in rows:
        what = f"{r['problem']}/{r['estimator']}/{r['lib']}"
        assert r["status"] == "ok" and not r["errors"], (what, r["errors"])
        assert math.isfinite(r["sec_per_1000"]) and r["sec_per_1000"] > 0, what
        assert math.isfinite(r["var_trace"]) and r["var_trace"] > 0, what
        assert r["n_var"] == cfg.n_var[r["problem"]], what
        assert r["bias"]["n"] == cfg.n_bias and r["bias"]["p_value"] > 1e-3, (what, r["bias"])
        assert abs(r["bias"]["scale"] - 1.0) < 5 * r["bias"]["scale_se"], (what, r["bias"])  # mean ≈ exact


def test_scg_vectorized_rows_are_finite_and_unbiased(bench: Any, tmp_path: Path) -> None:
    assert "storch" not in sys.modules  # the benchmark must not import the peers into this process
    cfg = _config(bench, ("scg_vec",), estimators=("sf", "ema", "loo4"))
    rows = bench.run_benchmark(cfg, {"scg_vec": bench.InProcess()}, log=lambda _: None)
    assert "storch" not in sys.modules and "pyro" not in sys.modules
    assert len(rows) == 3 * 3
    _check_rows(rows, cfg)
    by = {(r["problem"], r["estimator"]): r for r in rows}
    for problem in ("toy", "dvae", "attention"):  # leave-one-out must beat no baseline clearly
        assert by[(problem, "loo4")]["var_trace"] < 0.5 * by[(problem, "sf")]["var_trace"], problem
        assert by[(problem, "ema")]["var_trace"] < by[(problem, "sf")]["var_trace"], problem

    summary = bench.summarize(rows)
    meta = {
        "torch": torch.__version__,
        "storchastic": "-",
        "pyro": "-",
        "threads": 1,
        "quick": True,
        "config": {
            "rounds": cfg.rounds,
            "n_bias": cfg.n_bias,
            "n_same": cfg.n_same,
            "sizes": cfg.sizes,
            "particles": cfg.particles,
        },
        "notes": ["a note"],
    }
    bench.write_markdown(rows, summary, meta, tmp_path / "e.md")
    # one problem's panel: the plot's code is the same per panel, and matplotlib's layout of three
    # panels cost about as much CPU as the benchmark rows above (issue 28: a fast default suite)
    bench.write_plot([r for r in rows if r["problem"] == "toy"], tmp_path / "e.png")
    text = (tmp_path / "e.md").read_text()
    assert text.count("| scg_vec |") == 9 and text.count("**BIASED**") == 1  # only in the legend
    assert (tmp_path / "e.png").stat().st_size > 1000
    json.dumps(rows)  # the rows are what the JSON file holds


@pytest.mark.slow  # about 10-25 s: seven problem × estimator rows with their bias checks
def test_issue26_estimators_run_where_they_apply_and_are_unbiased(bench: Any) -> None:
    """arm2/disarm2/unordered4/rb3 on the problems whose first node they take (the rest: n/a)."""
    cfg = _config(bench, ("scg_vec",), estimators=bench.ISSUE26, n_var={"toy": 200, "dvae": 100, "attention": 32})
    rows = bench.run_benchmark(cfg, {"scg_vec": bench.InProcess()}, log=lambda _: None)
    na = {(r["problem"], r["estimator"]) for r in rows if r["status"] == "n/a"}
    assert na == {("toy", "arm2"), ("attention", "arm2"), ("dvae", "unordered4"), ("dvae", "rb3")}, na
    _check_rows([r for r in rows if r["status"] != "n/a"], cfg)


def test_scg_looped_and_compiled_match_vectorized(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The looped, declared, compiled and vectorized rows of one estimator agree; ``scg_comp`` (the
    declared step captured whole, ``fullgraph=True``) is ``n/a`` for an estimator with a baseline (the
    traced surrogate refuses baselines). Here ``torch.compile`` is asked for the whole step and hands
    it back uncompiled: this checks the row's wiring (seeds, flattened gradients, the refusal) without
    dynamo's ~2.5 s of CPU per capture. The capture itself is checked by ``test_compile.py`` (a declared
    step with categorical and Bernoulli nodes over steps, compiled ``fullgraph=True``, equals eager)
    and, for this row, by the slow ``test_scg_compiled_rows_with_inductor`` below."""
    asked: list[dict[str, Any]] = []

    def whole_step_uncompiled(fn: Any, **kw: Any) -> Any:
        asked.append(kw)
        return fn

    monkeypatch.setattr(torch, "compile", whole_step_uncompiled)
    shared = bench.InProcess()
    rows = []
    # the declared row of loo4 is left out: scg_decl's wiring does not depend on the estimator (the
    # looped row's program in a Declared structure), and sf checks it draw for draw
    for estimator, libs in (
        ("sf", ("scg_loop", "scg_decl", "scg_comp", "scg_vec")),
        ("loo4", ("scg_loop", "scg_comp", "scg_vec")),
    ):
        # 60 estimates per row: the variance's standard error is ~8% (sf's trace ~37, loo4's ~2.2)
        cfg = _config(bench, libs, problems=("toy",), estimators=(estimator,), n_bias=60, n_var={"toy": 60})
        rows += bench.run_benchmark(cfg, {lib: shared for lib in libs}, log=lambda _: None)
    by = {(r["estimator"], r["lib"]): r for r in rows}
    assert len(by) == 7
    assert by[("loo4", "scg_comp")]["status"] == "n/a", by[("loo4", "scg_comp")]
    _check_rows([r for r in rows if r is not by[("loo4", "scg_comp")]], cfg)
    same = by[("sf", "scg_decl")]["same_draws"]  # declared structure: the same estimator, draw for draw
    assert same["max_abs_diff"] <= 1e-6 * same["max_abs"], same
    assert asked and all(kw == {"fullgraph": True, "dynamic": False} for kw in asked), asked
    # the step that would be compiled draws torch's numbers: the same estimates as scg_decl, draw for draw
    decl, comp = by[("sf", "scg_decl")], by[("sf", "scg_comp")]
    assert comp["var_trace"] == pytest.approx(decl["var_trace"], rel=1e-9)
    assert comp["bias"]["scale"] == pytest.approx(decl["bias"]["scale"], rel=1e-9)

    def differ(a: dict[str, Any], b: dict[str, Any]) -> bool:
        return abs(a["var_trace"] - b["var_trace"]) > 4 * math.hypot(a["var_trace_se"], b["var_trace_se"])

    for est in ("sf", "loo4"):  # the same estimator: variances agree within sampling error
        assert not differ(by[(est, "scg_loop")], by[(est, "scg_vec")]), est
    assert differ(by[("sf", "scg_loop")], by[("loo4", "scg_vec")])  # the comparison tells estimators apart


@pytest.mark.slow  # two worker processes: ~10-20 s
@pytest.mark.skipif(
    importlib.util.find_spec("storch") is None or importlib.util.find_spec("pyro") is None,
    reason="storchastic / pyro-ppl not installed (the `bench` extra)",
)
def test_peers_in_workers_agree_with_scg(bench: Any) -> None:
    peers = ("storch", "pyro", "pyro_jit")
    cfg = _config(
        bench,
        ("scg_loop", *peers),
        problems=("toy",),
        estimators=("sf",),
        n_bias=100,
        n_var={"toy": 30},
        timeout=120.0,
    )
    workers = {"scg_loop": bench.InProcess(), **{p: bench.Worker(p, 1, cfg.timeout) for p in peers}}
    try:
        rows = bench.run_benchmark(cfg, workers, log=lambda _: None)
    finally:
        for p in peers:
            workers[p].stop()
    assert "storch" not in sys.modules
    for r in rows:
        assert r["status"] == "ok", r["errors"]
        assert r["bias"]["p_value"] > 1e-3
        if r["lib"] != "scg_loop":  # the same seeds give the same estimates: the same estimator
            assert r["same_draws"]["max_abs_diff"] < 1e-4 * r["same_draws"]["max_abs"]


@pytest.mark.slow  # two inductor compilations: ~30 s
def test_scg_compiled_rows_with_inductor(bench: Any) -> None:
    """The ``scg_comp`` row compiled by inductor (its own random numbers): unbiased, with the variance
    of the same estimator eager; ``n/a`` with a baseline."""
    torch._dynamo.reset()
    libs = ("scg_decl", "scg_comp")
    cfg = _config(bench, libs, problems=("toy",), estimators=("sf", "ema"), n_bias=300, n_var={"toy": 300})
    shared = bench.InProcess()
    rows = bench.run_benchmark(cfg, {lib: shared for lib in libs}, log=lambda _: None)
    by = {(r["estimator"], r["lib"]): r for r in rows}
    a, b = by[("sf", "scg_decl")], by[("sf", "scg_comp")]
    assert b["status"] == "ok", b["errors"]
    assert b["bias"]["p_value"] > 1e-3 and b["sec_per_1000"] > 0
    assert abs(a["var_trace"] - b["var_trace"]) < 4 * math.hypot(a["var_trace_se"], b["var_trace_se"])
    assert by[("ema", "scg_comp")]["status"] == "n/a"
