"""Smoke test of ``benchmarks/cached_checks.py``: a short run with a check at every few steps
tells the checks apart from the structure's own count, and writes its files. Timings are never
asserted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _benchmark_loader import load_benchmark


@pytest.fixture(scope="module")
def bench() -> Any:
    return load_benchmark("cached_checks")


def test_the_rows_count_the_structures_checks(bench: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []
    real = bench.scg.Cached

    def recorded(*args: Any, **kwargs: Any) -> Any:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(bench.scg, "Cached", recorded)
    data = bench.main(
        ["--steps", "40", "--check-every", "4", "--warm", "3", "--workloads", "toy", "--out", str(tmp_path)]
    )
    (row,) = data["rows"]
    (cached,) = made
    # the warm-up's checks are not counted: the timed steps' checks are the structure's last ones
    assert row["checks"] == cached.stats["tracked"] - row["warm_checks"]
    assert 0 < row["checks"] < 40  # 1 in 4 on average: some steps are checks, most are not
    assert row["check_over_tracked"] is not None and row["after_over_untracked"] is not None
    saved = json.loads((tmp_path / "cached_checks.json").read_text())
    assert saved["rows"][0]["checks"] == row["checks"]
    md = (tmp_path / "cached_checks.md").read_text()
    assert "| toy: Categorical(5), then 3 Bernoulli, 4 costs | 40 |" in md


def test_bad_arguments_are_refused(bench: Any) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--steps", "1"])
