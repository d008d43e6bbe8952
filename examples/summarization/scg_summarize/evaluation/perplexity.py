"""Teacher-forced scoring of reference targets through the step protocol: perplexity.

The decoder is fed the reference ``<s> w1 ... wT`` one word at a time and scored on
``w1 ... wT </s>``, so the perplexity of any :class:`~scg_summarize.decoding.protocol.StepDecoder`
is measured the same way -- for hard-attention models with their test-time choice of chunks
(argmax, or top-k). Perplexity is ``exp`` of the summed negative log-likelihood over the summed
number of predicted tokens (``</s>`` included), pooled over the corpus.

A decoder may score a reference word as another id through the optional hook
``scored_targets(tgt, src, src_mask) -> (B, T)`` (its model's): a family with an output
vocabulary smaller than the corpus's scores a reference word it can neither generate nor copy as
``<unk>``, as in training, so the perplexity stays finite and comparable. Such words are counted
(:attr:`TeacherForced.unk_scored`, :attr:`Perplexity.unk_scored`) and reported beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from ..data.batching import Batch, SourceBatch
from ..decoding.protocol import StepDecoder, check_step_output, request_extras

__all__ = ["Perplexity", "TeacherForced", "teacher_forced"]


@dataclass
class TeacherForced:
    """Teacher-forced scores of one batch.

    Attributes:
        nll: per example, the summed negative log-likelihood of its target (nats).
        tokens: per example, the number of predicted tokens (target words + ``</s>``).
        extras: per example, when asked: each extra stacked over its predicted tokens.
        unk_scored: per example, the reference words scored as ``<unk>`` because the model can
            neither generate nor copy them (``scored_targets``); zeros when it has no such hook.
    """

    nll: list[float]
    tokens: list[int]
    extras: list[dict[str, torch.Tensor]] = field(default_factory=list)
    unk_scored: list[int] = field(default_factory=list)


@torch.no_grad()
def teacher_forced(
    decoder: StepDecoder[Any], batch: SourceBatch, *, keep_extras: tuple[str, ...] = ()
) -> TeacherForced:
    """Score ``batch.tgt`` (``(B, T)``, ``<s> ... </s>`` right-padded, with ``tgt_mask``).

    Raises ``ValueError`` when the batch has no targets.
    """
    if not isinstance(batch, Batch) or batch.tgt.dim() != 2 or batch.tgt.shape[1] < 2:
        raise ValueError("teacher forcing needs batch targets: a Batch with tgt of shape (B, T >= 2), <s> ... </s>")
    tgt, mask = batch.tgt, batch.tgt_mask.bool()
    rows = tgt.shape[0]
    mapping = getattr(decoder, "scored_targets", None)  # e.g. Paulus, ABS: words it cannot produce -> <unk>
    gold_ids = mapping(tgt, batch.src, batch.src_mask) if callable(mapping) else tgt
    unk_scored = ((gold_ids[:, 1:] != tgt[:, 1:]) & mask[:, 1:]).sum(1).tolist()
    request_extras(decoder, keep_extras, "teacher_forced(keep_extras=...)")
    state = decoder.init_state(batch)
    nll = torch.zeros(rows, dtype=torch.float64, device=tgt.device)
    steps: dict[str, list[torch.Tensor]] = {}
    for t in range(tgt.shape[1] - 1):
        log_probs, state, extras = check_step_output(decoder.step(state, tgt[:, t]), rows, "decoder.step()")
        gold = log_probs.gather(1, gold_ids[:, t + 1 : t + 2]).squeeze(1).double()
        live = mask[:, t + 1]
        nll -= torch.where(live, gold, torch.zeros_like(gold))
        for key in keep_extras:
            if key in extras:
                steps.setdefault(key, []).append(extras[key])
    counts = (mask[:, 1:].sum(1)).tolist()
    per_example: list[dict[str, torch.Tensor]] = []
    if keep_extras:
        stacked = {key: torch.stack(values, dim=1) for key, values in steps.items()}  # (B, T - 1, ...)
        per_example = [{k: v[i, : counts[i]].cpu() for k, v in stacked.items()} for i in range(rows)]
    return TeacherForced(nll.tolist(), [int(c) for c in counts], per_example, [int(c) for c in unk_scored])


@dataclass
class Perplexity:
    """Pools teacher-forced scores over batches (``unk_scored``: reference words scored as ``<unk>``)."""

    nll: float = 0.0
    tokens: int = 0
    examples: int = 0
    unk_scored: int = 0

    def add(self, scored: TeacherForced) -> None:
        """Add one batch's scores."""
        self.nll += sum(scored.nll)
        self.tokens += sum(scored.tokens)
        self.examples += len(scored.nll)
        self.unk_scored += sum(scored.unk_scored)

    @property
    def value(self) -> float:
        """``exp(nll / tokens)`` (``inf`` when a reference token had probability 0)."""
        if self.tokens == 0:
            raise ValueError("no target tokens were scored")
        mean = self.nll / self.tokens
        return math.exp(mean) if mean < 700 else math.inf
