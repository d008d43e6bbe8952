"""ROUGE on word-id sequences: the self-critical reward and the validation selection metric.

Training compares a generated summary with the reference as lists of corpus ids (no detokenizing,
no stemming), which is what Paulus et al. (2018) optimize in spirit: their reward is ROUGE-L F1
(Lin 2004) of the sampled summary,

    LCS(ŷ, y) = length of the longest common subsequence,
    P = LCS / |ŷ|,   R = LCS / |y|,   F1 = 2PR / (P + R)        (0 when LCS = 0),

and ROUGE-N F1 counts clipped n-gram matches the same way. These are *training* signals; the
reported scores come from :mod:`scg_summarize.evaluation` (the official-style scorer on text).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import torch

__all__ = ["METRICS", "lcs_length", "reference_ids", "rouge_f1", "rouge_l_f1", "rouge_n_f1"]

#: metric name -> n (0: ROUGE-L)
METRICS: dict[str, int] = {"rouge1": 1, "rouge2": 2, "rougeL": 0}


def lcs_length(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the longest common subsequence of ``a`` and ``b`` (O(|a|·|b|) time, O(|b|) memory)."""
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def _f1(match: int, n_hyp: int, n_ref: int) -> float:
    if match == 0 or n_hyp == 0 or n_ref == 0:
        return 0.0
    p, r = match / n_hyp, match / n_ref
    return 2 * p * r / (p + r)


def rouge_l_f1(hyp: Sequence[int], ref: Sequence[int]) -> float:
    """ROUGE-L F1 of one pair."""
    return _f1(lcs_length(hyp, ref), len(hyp), len(ref))


def rouge_n_f1(hyp: Sequence[int], ref: Sequence[int], n: int) -> float:
    """ROUGE-N F1 of one pair (clipped n-gram matches)."""
    h = Counter(tuple(hyp[i : i + n]) for i in range(len(hyp) - n + 1))
    r = Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1))
    return _f1(sum((h & r).values()), sum(h.values()), sum(r.values()))


def rouge_f1(hyps: Sequence[Sequence[int]], refs: Sequence[Sequence[int]], metric: str = "rougeL") -> torch.Tensor:
    """Per-example F1 ``(B,)`` (float64) of ``metric`` (``rouge1``, ``rouge2`` or ``rougeL``)."""
    if metric not in METRICS:
        raise ValueError(f"unknown ROUGE metric {metric!r}; known: {', '.join(METRICS)}")
    if len(hyps) != len(refs):
        raise ValueError(f"rouge_f1: {len(hyps)} hypotheses but {len(refs)} references")
    n = METRICS[metric]
    scores = [rouge_l_f1(h, r) if n == 0 else rouge_n_f1(h, r, n) for h, r in zip(hyps, refs)]
    return torch.tensor(scores, dtype=torch.float64)


def reference_ids(tgt: torch.Tensor, tgt_mask: torch.Tensor, eos: int = 3) -> list[list[int]]:
    """The reference words of a batch: ``tgt`` ``(B, T)`` without ``<s>``, ``</s>`` and padding."""
    out = []
    for row, mask in zip(tgt.tolist(), tgt_mask.tolist()):
        words = [w for w, m in zip(row[1:], mask[1:]) if m]
        out.append(words[:-1] if words and words[-1] == eos else words)
    return out
