"""The paired bootstrap: exact in degenerate cases, against enumeration of all resamples, and
calibrated (interval coverage, p-values under the null) within binomial standard errors."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scg_summarize.cli import main
from scg_summarize.evaluation.significance import paired_bootstrap, read_per_example


def test_a_constant_shift_has_a_degenerate_interval_and_the_smallest_p() -> None:
    b = np.linspace(0.1, 0.6, 40)
    r = paired_bootstrap(b + 0.03, b, samples=500)
    assert r.diff == pytest.approx(0.03) and r.low == pytest.approx(0.03) and r.high == pytest.approx(0.03)
    assert r.p_value == pytest.approx(1 / 501)
    same = paired_bootstrap(b, b, samples=500)
    assert same.diff == 0.0 and same.p_value == 1.0  # every centred resample is >= 0 = d̄


def test_p_value_matches_enumeration_of_all_resamples() -> None:
    d = np.array([0.3, -0.1, 0.05])  # n = 3: 27 equally likely resamples
    mean = d.mean()
    exact = np.mean([np.mean(d[list(idx)]) - mean >= mean - 1e-12 for idx in itertools.product(range(3), repeat=3)])
    R = 40_000
    r = paired_bootstrap(d, np.zeros(3), samples=R, seed=1)
    se = math.sqrt(exact * (1 - exact) / R)
    assert abs(r.p_value - exact) < 4 * se + 1 / R


def _simulate(mu: float, reps: int, n: int = 40, samples: int = 1_000) -> tuple[float, float]:
    """Fraction of 95% intervals covering mu, and of one-sided p-values below 0.05."""
    rng = np.random.default_rng(7)
    covered = rejected = 0
    for rep in range(reps):
        d = rng.normal(mu, 1.0, size=n)
        r = paired_bootstrap(d, np.zeros(n), samples=samples, seed=rep)
        covered += r.low <= mu <= r.high
        rejected += r.p_value < 0.05
    return covered / reps, rejected / reps


def test_interval_coverage_and_null_rejection_rate_are_calibrated() -> None:
    reps = 300
    se = math.sqrt(0.95 * 0.05 / reps)  # binomial standard error of a 5% / 95% rate
    coverage, _ = _simulate(0.2, reps)
    assert abs(coverage - 0.95) < 4 * se, coverage  # percentile intervals at n = 40: ~0.93-0.95
    _, false_alarms = _simulate(0.0, reps)
    assert abs(false_alarms - 0.05) < 4 * se, false_alarms


def test_a_real_difference_is_detected() -> None:
    _, power = _simulate(0.6, 100)  # d̄ / se ~ 3.8 at n = 40
    assert power > 0.9


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="same length"):
        paired_bootstrap([0.1, 0.2], [0.1])
    with pytest.raises(ValueError, match="level"):
        paired_bootstrap([0.1], [0.2], level=1.5)
    with pytest.raises(ValueError, match="no examples"):
        paired_bootstrap([], [])


def _write(path: Path, scores: dict[str, float]) -> Path:
    path.write_text(
        "".join(
            json.dumps({"id": k, "summary": "x", "rouge": {"rouge1": v, "rouge2": v / 2, "rougeL": v}}) + "\n"
            for k, v in scores.items()
        ),
        encoding="utf-8",
    )
    return path


def test_compare_command_pairs_by_id_and_reports_errors(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    a = _write(tmp_path / "a.jsonl", {f"d{i}": 0.4 + 0.01 * (i % 3) for i in range(30)})
    b = _write(tmp_path / "b.jsonl", {f"d{i}": 0.3 for i in reversed(range(30))})
    assert main(["compare", str(a), str(b), "--samples", "200", "--json", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert "| rouge1 | 41.00 | 30.00 | +11.00 |" in out
    record = json.loads((tmp_path / "c.json").read_text())
    assert record["results"]["rouge2"]["diff"] == pytest.approx(0.055)
    c = _write(tmp_path / "c.jsonl", {f"e{i}": 0.3 for i in range(30)})
    assert main(["compare", str(a), str(c)]) == 2
    assert "different examples" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "rouge": {"rouge1": 0.1}}\n{"id": "y"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:2"):
        read_per_example(bad, ["rouge1"])
