"""ROUGE-1/2/L F1 (×100) with stemming, max over references (a small wrapper over ``rouge-score``).

Private stand-in until ``scg_summarize.evaluation`` provides the shared wrapper. Each metric is
the maximum F1 over an example's references, averaged over examples (the convention of the
SciTLDR numbers quoted in the task: FIRST = 31.3 ROUGE-1 on SciTLDR-A test).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["METRICS", "rouge"]

METRICS: tuple[str, ...] = ("rouge1", "rouge2", "rougeL")


def rouge(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> dict[str, float]:
    """Mean over examples of max-over-references ROUGE F1, in percent."""
    from rouge_score import rouge_scorer

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists")
    scorer = rouge_scorer.RougeScorer(list(METRICS), use_stemmer=True)
    totals = dict.fromkeys(METRICS, 0.0)
    for hyp, refs in zip(hypotheses, references):
        best = dict.fromkeys(METRICS, 0.0)
        for ref in refs:
            scores = scorer.score(ref, hyp)
            for m in METRICS:
                best[m] = max(best[m], scores[m].fmeasure)
        for m in METRICS:
            totals[m] += best[m]
    n = max(len(hypotheses), 1)
    return {m: 100.0 * totals[m] / n for m in METRICS}
