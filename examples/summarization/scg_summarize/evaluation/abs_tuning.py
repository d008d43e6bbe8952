"""Tune ABS+'s weights α with MERT on a validation set (Rush et al. 2015, Section 5).

The decode-tune loop of Och (2003): decode the tuning set with the current α (beam search over
:class:`~scg_summarize.decoding.abs_features.LogLinearDecoder`, keeping the ``n_best`` finished
hypotheses), compute every hypothesis's summed features
(:func:`~scg_summarize.decoding.abs_features.feature_totals`) and its ROUGE against the
references, add the lists to those of the earlier iterations
(:func:`~scg_summarize.evaluation.mert.merge_nbest`), and let :func:`~.mert.mert` move α; stop
when an iteration adds no new hypothesis or after ``iterations``. ``α_0`` (the weight of log p)
stays 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data.batching import SourceBatch
from ..decode_options import DecodeOptions
from ..decoding.abs_features import LogLinearDecoder, feature_totals
from ..decoding.beam import beam_search
from ..decoding.protocol import StepDecoder
from .mert import NBest, corpus_metric, merge_nbest, mert
from .rouge import Rouge

__all__ = ["TuningResult", "tune_weights"]


@dataclass
class TuningResult:
    """The tuned weights, the corpus metric MERT reached on the merged n-best lists (in [0, 1]),
    and one record per iteration."""

    weights: list[float]
    metric: float
    history: list[dict[str, Any]] = field(default_factory=list)


def tune_weights(
    inner: StepDecoder[Any],
    tuning: Sequence[tuple[SourceBatch, Sequence[Sequence[str]]]],
    detokenize: Callable[[list[int]], str],
    options: DecodeOptions,
    *,
    init: Sequence[float] = (1.0, 0.0, 0.0, 0.0, 0.0),
    rouge: Rouge | None = None,
    metric: str = "rouge1",
    iterations: int = 5,
    extractive: bool = False,
) -> TuningResult:
    """MERT of α for ``metric`` on ``tuning``: pairs of a batch and its examples' references.

    Args:
        inner: the model (e.g. an ABS run's :class:`~scg_summarize.decoding.adapters.ModelStepDecoder`).
        tuning: ``(batch, references per example)`` pairs.
        detokenize: token ids -> summary text (as scored).
        options: the search (``n_best`` hypotheses per example enter the lists).
        init: the starting α (``init[0] > 0``; it is kept).
        rouge: the scorer (default: ``Rouge()``, F1 with stemming).
        metric: the ROUGE metric maximized.
        iterations: the most decode-tune rounds.
        extractive: decode in the extractive mode.
    """
    rouge = rouge or Rouge()
    if metric not in rouge.options.metrics:
        raise ValueError(f"metric {metric!r} is not computed by the scorer ({rouge.options.metrics})")
    weights = [float(w) for w in init]
    pool: list[NBest] | None = None
    history: list[dict[str, Any]] = []
    value = 0.0
    for it in range(iterations):
        decoder = LogLinearDecoder(inner, weights, extractive=extractive)
        lists: list[NBest] = []
        for batch, references in tuning:
            nbest = beam_search(decoder, batch, options)
            tokens = [[h.tokens for h in hyps] for hyps in nbest]
            feats = feature_totals(inner, batch, tokens)
            for hyps, f, refs in zip(tokens, feats, references):
                scores = tuple(rouge.score(detokenize(h), refs)[metric] for h in hyps)
                lists.append(
                    NBest(
                        tuple(tuple(float(x) for x in row) for row in f.tolist()), scores, tuple(tuple(h) for h in hyps)
                    )
                )
        size_before = sum(len(n.metric) for n in pool) if pool is not None else 0
        pool = lists if pool is None else merge_nbest(pool, lists)
        added = sum(len(n.metric) for n in pool) - size_before
        before = corpus_metric(weights, pool)
        weights, value = mert(pool, weights, fixed=(0,))
        history.append(
            {
                "iteration": it + 1,
                "hypotheses": size_before + added,
                "added": added,
                "metric_before": before,
                "weights": list(weights),
                "metric": value,
            }
        )
        if added == 0:
            break
    return TuningResult(weights, value, history)
