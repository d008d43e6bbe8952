"""BM25 / IR / Ext. % against hand computation; MERT's exact line search and coordinate ascent."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scg_summarize.evaluation.bm25 import BM25Index, IRBaseline, extractive_percent
from scg_summarize.evaluation.mert import NBest, corpus_metric, line_search, merge_nbest, mert, upper_envelope

DOCS = [["a", "b", "c"], ["a", "a", "d"], ["e", "f"]]


def test_bm25_scores_by_hand() -> None:
    index = BM25Index(DOCS)  # k1 = 1.2, b = 0.75, N = 3, avgdl = 8 / 3
    idf_a, idf_d = math.log(1 + 1.5 / 2.5), math.log(1 + 2.5 / 1.5)
    norm3 = 1.2 * (0.25 + 0.75 * 3 / (8 / 3))  # = 1.3125 for both 3-word documents
    scores = index.scores(["a", "d"])
    assert set(scores) == {0, 1}
    assert scores[0] == pytest.approx(idf_a * 2.2 / (1 + norm3))
    assert scores[1] == pytest.approx(idf_a * 2 * 2.2 / (2 + norm3) + idf_d * 2.2 / (1 + norm3))
    # a repeated query word counts twice
    assert index.scores(["a", "a"])[0] == pytest.approx(2 * scores[0])
    assert index.best(["a", "d"]) == 1 and index.best(["zzz"]) == 0


def test_ir_baseline_returns_the_nearest_training_title() -> None:
    ir = IRBaseline(DOCS, ["title zero", "title one", "title two"])
    assert ir(["f", "x"]) == "title two"
    assert ir(["b", "c"]) == "title zero"
    with pytest.raises(ValueError, match="titles"):
        IRBaseline(DOCS, ["only one"])


def test_extractive_percent() -> None:
    assert extractive_percent([["a", "x"], ["b", "b", "c"]], [["a", "b"], ["b"]]) == pytest.approx(100 * 3 / 5)
    assert extractive_percent([[]], [["a"]]) == 0.0


# --------------------------------------------------------------------------- MERT


def _nbest(rows: list[tuple[float, ...]]) -> NBest:
    return NBest(tuple(r[:-1] for r in rows), tuple(r[-1] for r in rows))


def test_mert_finds_the_known_optimum_interval() -> None:
    # scores with α = (1, w): h0 = 0, h1 = -1 + w, h2 = -3 + 2w: h1 wins exactly for 1 < w < 2
    sentence = _nbest([(0.0, 0.0, 0.2), (-1.0, 1.0, 0.5), (-3.0, 2.0, 0.1)])
    weights, value = mert([sentence] * 3, [1.0, 0.0])
    assert weights[0] == 1.0 and 1.0 < weights[1] < 2.0
    assert value == pytest.approx(0.5)


def test_mert_reaches_a_planted_optimum_in_two_free_weights() -> None:
    # every sentence's best hypothesis wins exactly when w1 > 1 (sentence kind A) or w2 < -2 (kind B),
    # and the two conditions are independent: coordinate ascent reaches the optimum
    a = _nbest([(0.0, 0.0, 0.0, 0.0), (-1.0, 1.0, 0.0, 1.0)])
    b = _nbest([(0.0, 0.0, 0.0, 0.0), (-2.0, 0.0, -1.0, 1.0)])
    weights, value = mert([a, a, b], [1.0, 0.0, 0.0])
    assert value == pytest.approx(1.0)
    assert weights[1] > 1.0 and weights[2] < -2.0
    assert corpus_metric(weights, [a, a, b]) == pytest.approx(1.0)


def test_line_search_is_exact_against_a_dense_grid() -> None:
    rng = random.Random(0)
    for _ in range(20):
        nbests = []
        for _ in range(rng.randint(1, 8)):
            n = rng.randint(1, 6)
            nbests.append(
                NBest(
                    tuple(tuple(rng.gauss(0, 1) for _ in range(3)) for _ in range(n)),
                    tuple(rng.random() for _ in range(n)),
                )
            )
        w = [rng.gauss(0, 1) for _ in range(3)]
        d = [rng.gauss(0, 1) for _ in range(3)]
        gamma, best = line_search(w, d, nbests)
        assert corpus_metric([wi + gamma * di for wi, di in zip(w, d)], nbests) == pytest.approx(best)
        assert best >= _grid_best(w, d, nbests) - 1e-9


def _grid_best(w: list[float], d: list[float], nbests: list[NBest]) -> float:
    """The best mean metric over the weights ``w + γ d``, γ on a grid of step 1/20 in [-20, 20]
    (all grid points at once: each hypothesis's score at every γ; argmax picks the first on ties)."""
    weights = np.asarray(w)[None, :] + (np.arange(-400, 401) / 20)[:, None] * np.asarray(d)[None, :]
    total = np.zeros(len(weights))
    for nbest in nbests:
        chosen = (weights @ np.asarray(nbest.features).T).argmax(axis=1)
        total += np.asarray(nbest.metric)[chosen]
    return float(total.max()) / len(nbests)


def test_upper_envelope_by_hand() -> None:
    # lines 0, -1 + γ, -3 + 2γ, 5 - γ: 5 - γ wins until it meets -3 + 2γ at γ = 8/3, which wins after
    hull = upper_envelope([(0.0, 0.0), (-1.0, 1.0), (-3.0, 2.0), (5.0, -1.0)])
    assert [i for _, i in hull] == [3, 2]
    assert hull[1][0] == pytest.approx(8 / 3)  # 5 - γ = -3 + 2γ
    # equal lines: the first wins
    assert [i for _, i in upper_envelope([(1.0, 1.0), (1.0, 1.0)])] == [0]


def test_merge_nbest_deduplicates() -> None:
    a = [NBest(((0.0, 1.0),), (0.3,), (("x",),))]
    b = [NBest(((0.0, 1.0), (1.0, 0.0)), (0.3, 0.6), (("x",), ("y",)))]
    merged = merge_nbest(a, b)
    assert merged[0].metric == (0.3, 0.6) and merged[0].keys == (("x",), ("y",))
    with pytest.raises(ValueError):
        NBest(((0.0,),), ())
