"""Paired bootstrap comparison of two systems' per-example ROUGE (Efron & Tibshirani 1993;
Koehn 2004; Berg-Kirkpatrick et al. 2012).

Corpus ROUGE F1 as reported here is the mean of per-example scores, so the difference between
two systems A and B on the same n examples is the mean of the paired differences
d_i = s_A(i) − s_B(i). The bootstrap resamples the n examples with replacement R times,

    d̄*_r = (1/n) Σ_i w_ri d_i,     w_r ~ Multinomial(n, 1/n),

and reports the percentile interval [q_{(1−level)/2}, q_{(1+level)/2}] of the d̄*_r and the
one-sided p-value of "A is better than B",

    p = (1 + #{r : d̄*_r − d̄ ≥ d̄}) / (R + 1),

which takes the centred resamples d̄*_r − d̄ as draws from the null distribution of d̄
(Berg-Kirkpatrick et al. 2012, Section 3; the +1 keeps p > 0 with finitely many resamples).
Per-example scores come from the ``*.summaries.jsonl`` files that ``evaluate`` and
``baseline --summaries`` write (``{"id", "summary", "rouge": {metric: F1}}`` per line).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..jsonlines import json_objects

__all__ = ["BootstrapResult", "paired_bootstrap", "read_per_example"]


@dataclass(frozen=True)
class BootstrapResult:
    """The comparison of A with B on one metric (all values in the scores' unit).

    Attributes:
        n: paired examples.
        mean_a, mean_b: the two systems' means.
        diff: mean_a − mean_b.
        low, high: the percentile interval of the difference at ``level``.
        p_value: one-sided bootstrap p-value of "A is not better than B".
        level: the interval's coverage.
        samples: bootstrap resamples R.
    """

    n: int
    mean_a: float
    mean_b: float
    diff: float
    low: float
    high: float
    p_value: float
    level: float
    samples: int


def paired_bootstrap(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    samples: int = 10_000,
    level: float = 0.95,
    seed: int = 0,
    chunk: int = 1_000,
) -> BootstrapResult:
    """Paired bootstrap of mean(a) − mean(b) (see the module docstring).

    Args:
        a, b: per-example scores of the two systems, in the same example order.
        samples: resamples R.
        level: coverage of the percentile interval, in (0, 1).
        seed: the resampling seed (results are reproducible).
        chunk: resamples drawn per batch (bounds memory at ``chunk × n`` indices).
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"a and b must be 1-d with the same length, got shapes {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("the scores must be finite (a NaN or infinity makes every resample undefined)")
    n = x.shape[0]
    if n == 0:
        raise ValueError("no examples to compare")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if samples < 1:
        raise ValueError(f"samples must be positive, got {samples!r}")
    d = x - y
    rng = np.random.default_rng(seed)
    means = np.empty(samples)
    for start in range(0, samples, chunk):
        stop = min(start + chunk, samples)
        idx = rng.integers(0, n, size=(stop - start, n))  # (R_chunk, n)
        means[start:stop] = d[idx].mean(axis=1)
    diff = float(d.mean())
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    as_extreme = int(np.count_nonzero(means - diff >= diff))  # centred resamples at least d̄
    p = (1 + as_extreme) / (samples + 1)
    return BootstrapResult(n, float(x.mean()), float(y.mean()), diff, float(low), float(high), p, level, samples)


def _score(value: object, path: Path, lineno: int, metric: str) -> float:
    """A per-example ROUGE score: a finite number in [0, 1] (else a ``ValueError`` naming the line;
    a NaN would otherwise poison the bootstrap into a meaningless "significant" p-value)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "null" if value is None else type(value).__name__
        raise ValueError(f"{path}:{lineno}: 'rouge'.{metric} must be a number in [0, 1], got {kind} {value!r:.40}")
    score = float(value)
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        raise ValueError(
            f"{path}:{lineno}: 'rouge'.{metric} must be a number in [0, 1], got {value!r} "
            "(scores are F1/recall/precision fractions, not percentages)"
        )
    return score


def read_per_example(path: str | Path, metrics: Sequence[str]) -> dict[str, dict[str, float]]:
    """``{metric: {id: rouge[metric]}}`` from a ``*.summaries.jsonl`` file, read once (errors
    name the file and line)."""
    path = Path(path)
    out: dict[str, dict[str, float]] = {metric: {} for metric in metrics}
    seen: set[str] = set()
    if path.suffix == ".json":  # (the result file beside the per-example one)
        raise ValueError(
            f"{path}: a result file (.json) holds the averages; compare reads the per-example scores of "
            f"its .summaries.jsonl (written by evaluate, or baseline --summaries)"
        )
    for lineno, record in json_objects(path):
        rouge = record.get("rouge")
        if "id" not in record or not isinstance(rouge, Mapping):
            raise ValueError(
                f"{path}:{lineno}: expected an object with 'id' and 'rouge' "
                "(write per-example scores with evaluate, or baseline --summaries)"
            )
        missing = [m for m in metrics if m not in rouge]
        if missing:
            raise ValueError(
                f"{path}:{lineno}: no metric {', '.join(map(repr, missing))} in 'rouge' "
                f"(it has {', '.join(sorted(rouge)) or 'none'}; --metrics names them)"
            )
        key = str(record["id"])
        if key in seen:
            raise ValueError(f"{path}:{lineno}: example id {key!r} appears twice")
        seen.add(key)
        assert isinstance(rouge, Mapping)
        for metric in metrics:
            out[metric][key] = _score(rouge[metric], path, lineno, metric)
    if not seen:
        raise ValueError(f"{path}: no examples")
    return out
