"""ROUGE ``refs="pool"``: multi-reference pooling as ROUGE-1.5.5 (``-f A``)."""

from __future__ import annotations

import pytest
from scg_summarize.evaluation import Rouge, RougeOptions


def test_pool_mode_sums_hits_and_counts_over_references_like_rouge155() -> None:
    """ROUGE-1.5.5 ``-f A``: R = Σ hits / Σ reference counts, P = Σ hits / (n_refs × prediction count)."""
    refs = ["the cat sat on the mat", "a cat was sitting"]
    pred = "the cat sat"
    metrics = ("rouge1", "rouge2", "rougeL")
    pooled = {
        m: Rouge(RougeOptions(metrics=metrics, stemming=False, refs="pool", measure=m2)).score(pred, refs)
        for m, m2 in (("r", "recall"), ("p", "precision"), ("f", "f"))
    }
    # ROUGE-1: hits 3 (the, cat, sat) + 1 (cat); reference unigrams 6 + 4; prediction 3 per reference
    assert pooled["r"]["rouge1"] == pytest.approx(4 / 10)
    assert pooled["p"]["rouge1"] == pytest.approx(4 / 6)
    assert pooled["f"]["rouge1"] == pytest.approx(2 * 0.4 * (4 / 6) / (0.4 + 4 / 6))
    # ROUGE-2: hits 2 (the cat, cat sat) + 0; reference bigrams 5 + 3; prediction bigrams 2 per reference
    assert pooled["r"]["rouge2"] == pytest.approx(2 / 8)
    assert pooled["p"]["rouge2"] == pytest.approx(2 / 4)
    # ROUGE-L: LCS 3 and 1 ("cat")
    assert pooled["r"]["rougeL"] == pytest.approx(4 / 10)
    # the max mode takes the best reference instead: 3 / 6
    best = Rouge(RougeOptions(metrics=("rouge1",), stemming=False, refs="all", measure="recall")).score(pred, refs)
    assert best["rouge1"] == pytest.approx(0.5)
    # with a single reference, pooling is the ordinary score
    single = Rouge(RougeOptions(stemming=False, refs="pool")).score(pred, refs[:1])
    assert single == pytest.approx(Rouge(RougeOptions(stemming=False)).score(pred, refs[:1]))


def test_pool_mode_with_the_duc_byte_limit() -> None:
    opts = RougeOptions(metrics=("rouge1",), stemming=False, refs="pool", measure="recall", limit_bytes=7)
    # "the cat sat" is cut to "the cat": hits 2 + 1 over 6 + 4 reference words
    assert Rouge(opts).score("the cat sat", ["the cat sat on the mat", "a cat was sitting"])["rouge1"] == (
        pytest.approx(3 / 10)
    )
