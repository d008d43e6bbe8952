"""Minimum error rate training (Och 2003) of log-linear weights on n-best lists.

ABS+ (Rush et al. 2015, Section 5) scores a summary by ``α · F(y)`` with ``F(y) = Σ_i f`` the
summed features of :mod:`scg_summarize.decoding.abs_features`, and tunes α for ROUGE on held-out
data. Given, for every tuning sentence ``s``, an n-best list of hypotheses with feature vectors
``F_sh`` and metric values ``m_sh`` (for example ROUGE-1 F1 of the hypothesis against its
references), the corpus metric of weights ``α`` is the mean over sentences of ``m`` of the
hypothesis ``argmax_h α · F_sh`` (the first on ties). This is piecewise constant in α.

Och's line search maximizes it exactly along a line ``α + γ d``: every hypothesis's score is a
line ``a + γ b`` in γ (``a = α · F``, ``b = d · F``); the upper envelope of a sentence's lines
(:func:`upper_envelope`, a convex-hull sweep over the lines sorted by slope) says which
hypothesis wins on which interval of γ; the change points of all sentences, swept in order,
give the corpus metric on every interval, and the best interval's midpoint is taken
(:func:`line_search`; among equally good intervals the one nearest γ = 0, so ties do not move α).
:func:`mert` repeats line searches along the coordinate axes of the free weights until none
improves (coordinate ascent); fixed weights (ABS+ fixes ``α_0 = 1``, the weight of log p: the
scale of α is free, and ``α_0 > 0`` keeps the search's early stop exact) never move.

The outer loop of MERT (decode with α, add the new n-best lists to the old ones, tune again)
needs a decoder: :func:`merge_nbest` merges the lists, deduplicating identical hypotheses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["NBest", "corpus_metric", "line_search", "merge_nbest", "mert", "upper_envelope"]


@dataclass(frozen=True)
class NBest:
    """One sentence's hypotheses.

    Attributes:
        features: one feature vector per hypothesis (all of the same length).
        metric: the metric value of each hypothesis (higher is better).
        keys: optional identities of the hypotheses (e.g. token tuples) for :func:`merge_nbest`.
    """

    features: tuple[tuple[float, ...], ...]
    metric: tuple[float, ...]
    keys: tuple[object, ...] = ()

    def __post_init__(self) -> None:
        if not self.features or len(self.features) != len(self.metric):
            raise ValueError(
                f"an n-best list needs one metric value per hypothesis (got {len(self.features)} "
                f"feature vectors, {len(self.metric)} values)"
            )
        if len({len(f) for f in self.features}) != 1:
            raise ValueError("every hypothesis needs the same number of features")
        if self.keys and len(self.keys) != len(self.features):
            raise ValueError("keys must be empty or one per hypothesis")


def _dot(u: Sequence[float], v: Sequence[float]) -> float:
    return sum(a * b for a, b in zip(u, v))


def _choose(weights: Sequence[float], nbest: NBest) -> int:
    scores = [_dot(weights, f) for f in nbest.features]
    return max(range(len(scores)), key=lambda h: (scores[h], -h))


def corpus_metric(weights: Sequence[float], nbests: Sequence[NBest]) -> float:
    """The mean metric of the hypotheses chosen by ``weights`` (first on ties)."""
    if not nbests:
        raise ValueError("no n-best lists")
    return sum(n.metric[_choose(weights, n)] for n in nbests) / len(nbests)


def upper_envelope(lines: Sequence[tuple[float, float]]) -> list[tuple[float, int]]:
    """The upper envelope of lines ``a + γ b``: ``[(γ_start, index), ...]`` with ``γ_start``
    increasing (the first is ``-inf``); line ``index`` is the maximum on ``[γ_start, next)``.
    Among equal lines the first wins."""
    order = sorted(range(len(lines)), key=lambda i: (lines[i][1], lines[i][0], -i))
    hull: list[tuple[float, int]] = []
    for i in order:
        a, b = lines[i]
        if hull and lines[hull[-1][1]][1] == b:
            hull.pop()  # same slope, a no smaller (sorted): the new line dominates
        while hull:
            start, j = hull[-1]
            aj, bj = lines[j]
            cross = (aj - a) / (b - bj)  # b > bj
            if cross <= start:
                hull.pop()
                continue
            hull.append((cross, i))
            break
        else:
            hull.append((-math.inf, i))
    return hull


def _inside(lo: float, hi: float) -> tuple[float, float]:
    """A point of the open interval ``(lo, hi)`` (0 when inside, else the midpoint, or one unit
    beyond a finite end) and the interval's distance from 0."""
    if lo < 0.0 < hi:
        return 0.0, 0.0
    if math.isinf(lo):
        return hi - 1.0, abs(hi)
    if math.isinf(hi):
        return lo + 1.0, abs(lo)
    return (lo + hi) / 2, min(abs(lo), abs(hi))


def line_search(weights: Sequence[float], direction: Sequence[float], nbests: Sequence[NBest]) -> tuple[float, float]:
    """The step ``γ`` maximizing :func:`corpus_metric` of ``weights + γ direction``, and that
    maximum (exact: every interval between change points is considered)."""
    base = 0.0
    events: list[tuple[float, float]] = []  # (γ, change of the metric sum)
    for nbest in nbests:
        lines = [(_dot(weights, f), _dot(direction, f)) for f in nbest.features]
        hull = upper_envelope(lines)
        base += nbest.metric[hull[0][1]]
        for (start, h), (_, prev) in zip(hull[1:], hull[:-1]):
            events.append((start, nbest.metric[h] - nbest.metric[prev]))
    events.sort()
    points = sorted({g for g, _ in events})
    # interval k is (points[k-1], points[k]); k = 0 is (-inf, points[0]), k = len is (points[-1], inf)
    total, best_total, best_gamma, best_dist = base, -math.inf, 0.0, math.inf
    e = 0
    for k in range(len(points) + 1):
        if k > 0:
            while e < len(events) and events[e][0] <= points[k - 1]:
                total += events[e][1]
                e += 1
        lo = points[k - 1] if k > 0 else -math.inf
        hi = points[k] if k < len(points) else math.inf
        gamma, dist = _inside(lo, hi)
        if total > best_total + 1e-12 or (abs(total - best_total) <= 1e-12 and dist < best_dist):
            best_total, best_gamma, best_dist = total, gamma, dist
    return best_gamma, best_total / len(nbests)


def mert(
    nbests: Sequence[NBest],
    init: Sequence[float],
    *,
    fixed: Sequence[int] = (0,),
    max_sweeps: int = 20,
) -> tuple[list[float], float]:
    """Coordinate ascent with exact line searches; returns the weights and their corpus metric.

    Args:
        nbests: the tuning sentences' n-best lists.
        init: the starting weights.
        fixed: indices of weights that never move (default: ``α_0``, the weight of log p).
        max_sweeps: the most sweeps over the free coordinates.
    """
    weights = [float(w) for w in init]
    free = [k for k in range(len(weights)) if k not in set(fixed)]
    if not free:
        raise ValueError("mert: every weight is fixed")
    current = corpus_metric(weights, nbests)
    for _ in range(max_sweeps):
        improved = False
        for k in free:
            direction = [1.0 if i == k else 0.0 for i in range(len(weights))]
            gamma, value = line_search(weights, direction, nbests)
            if value > current + 1e-12:
                weights[k] += gamma
                current, improved = value, True
        if not improved:
            break
    return weights, corpus_metric(weights, nbests)


def merge_nbest(old: Sequence[NBest], new: Sequence[NBest]) -> list[NBest]:
    """Per sentence, the union of two iterations' n-best lists (hypotheses with the same key,
    or the same features when there are no keys, are kept once)."""
    if len(old) != len(new):
        raise ValueError(f"merge_nbest: {len(old)} and {len(new)} sentences")
    out = []
    for a, b in zip(old, new):
        seen: set[object] = set()
        feats, metric, keys = [], [], []
        for lst in (a, b):
            for i, (f, m) in enumerate(zip(lst.features, lst.metric)):
                key = lst.keys[i] if lst.keys else f
                if key in seen:
                    continue
                seen.add(key)
                feats.append(f)
                metric.append(m)
                keys.append(key)
        out.append(NBest(tuple(feats), tuple(metric), tuple(keys)))
    return out
