"""Smoke test of benchmarks/estimator_zoo.py: every VAE estimator runs on one and two layers, the
unbiased ones agree on the mean gradient, the report renders (tiny sizes; slow: run with -m slow)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from _benchmark_loader import load_benchmark


@pytest.fixture(scope="module")
def zoo() -> Any:
    pytest.importorskip("sklearn")
    return load_benchmark("estimator_zoo")


@pytest.mark.slow
def test_every_estimator_runs_and_the_report_renders(zoo: Any, tmp_path: Path) -> None:
    x = zoo.load_digits_binary()
    assert x.shape == (1797, 64) and set(x.unique().tolist()) == {0.0, 1.0}
    rows = []
    for model, names in zoo.MODELS.items():
        for name in names:
            row = zoo.variance_and_time(model, name, 3, x[:8])
            assert row["variance"] >= 0 and row["seconds_per_estimate"] > 0
            rows.append(row)
    curve = zoo.train_curve("1L", "disarm", 0, 4, 2, x[:100], x[100:140])
    assert len(curve["curve"]) == 3 and all(torch.isfinite(torch.tensor(e)) for _, e in curve["curve"])
    res = {
        "meta": {"command": "test", "when": "now", "torch": torch.__version__, "machine": "x", "steps": 4},
        "variance": rows,
        "training": [curve],
        "bias": zoo.bias_table((1.0,), 200),
        "storchastic": "Storchastic (test)",
        "storch_rows": [dict(next(r for r in rows if r["estimator"] == "relax"), max_z_vs_scg=1.0)],
        "storch_conditional_mismatch": 0.25,
    }
    zoo.write_markdown(res, tmp_path / "zoo.md")
    text = (tmp_path / "zoo.md").read_text()
    assert "| 2L | disarm | yes |" in text and "| cat | unordered4 | yes |" in text and "Gumbel-Rao" in text
    assert "| 1L | relax | yes |" in text and "in 25.0% of draws" in text
    assert "| cat | arsm46 | yes |" in text and "Storchastic 0.3.7 has no ARSM" in text
    docs = tmp_path / "estimators.md"
    docs.write_text(
        "before\n<!-- estimator_zoo.py --docs: variance -->\nold\n<!-- end variance -->\n"
        "<!-- estimator_zoo.py --docs: storchastic -->\n<!-- end storchastic -->\nafter\n"
    )
    zoo.write_docs(res, docs)
    text = docs.read_text()
    assert "old" not in text and text.startswith("before\n") and text.endswith("after\n")
    assert "| cat | `ARSM()`, n=46 (z and its 45 swap pseudo-actions) |" in text
    assert "| cat | `ARSM()`, n=46 (z and its 45 swap pseudo-actions) / none (Storchastic has no ARSM) |" in text


@pytest.mark.slow
def test_unbiased_vae_estimators_agree_in_mean(zoo: Any) -> None:
    """DisARM and RELAX (the zoo's control network) estimate the score function's encoder gradient
    (z-test of the difference of means, 400 estimates each, fixed seeds)."""
    x = zoo.load_digits_binary()[:4]
    means, ses = {}, {}
    for name in ("sf_loo2", "disarm", "relax"):
        model = zoo.VAE.init("1L", 0)
        est = zoo._estimator(name, model, x)[0]
        torch.manual_seed(3)
        grads = []
        for _ in range(400):
            for q in model.params:
                q.grad = None
            zoo.one_step(model, x, name, est)
            grads.append(model.params[1].grad.clone())  # the encoder bias: 16 coordinates
        g = torch.stack(grads).double()
        means[name], ses[name] = g.mean(0), g.std(0) / 20
    for name in ("disarm", "relax"):
        z = (means["sf_loo2"] - means[name]) / (ses["sf_loo2"] ** 2 + ses[name] ** 2).sqrt()
        assert float(z.abs().max()) < 3.9, (name, z)
