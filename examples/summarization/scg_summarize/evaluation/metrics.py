"""Attention metrics of generated summaries: coarse entropy, fraction read, coarse accuracy.

All three are computed from the ``extras`` a decoder returns at every step (see
:mod:`scg_summarize.decoding.protocol`), recorded for each generated summary as tensors with
one row per step (the generated words, then ``</s>``):

* **coarse-attention entropy** (the paper's Table 2): the entropy, in nats, of the coarse
  distribution ``coarse_attn`` at each generated word, averaged over all generated words of
  the corpus (the ``</s>`` step is not a word and is left out). Low entropy means the model
  commits to one chunk per word.
* **fraction read** (``fraction_read``): the source words inside the chunks read at *any* step
  of a summary (``chunk_read``: the argmax, or top-k, chunks of a hard-attention model), over all
  source words of the document -- the union over the summary; averaged over summaries. Models
  without ``chunk_read`` (soft attention) read everything: 1.0.
* **fraction read per word** (``fraction_read_step``): for each generated word, the source
  words inside the chunks read *at that step* over all source words; averaged over all
  generated words of the corpus (``</s>`` left out). Always <= the union above; 1.0 for soft
  attention.
* **coarse accuracy** (synthetic data, where the salient chunk is known): the fraction of
  generated words whose most attended chunk is the salient one (``coarse_accuracy``), and the
  fraction of summaries whose total coarse attention is highest on it
  (``coarse_accuracy_doc``). Examples with ``salient < 0`` are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["AttentionMetrics", "coarse_entropy", "fraction_read", "fraction_read_per_step"]


def coarse_entropy(coarse_attn: torch.Tensor) -> torch.Tensor:
    """The entropy (nats) of every row of ``coarse_attn`` ``(..., M)``; ``0 log 0 = 0``."""
    p = coarse_attn.double().clamp(min=0)
    logp = torch.where(p > 0, p.log(), torch.zeros_like(p))
    return -(p * logp).sum(-1).float()


def fraction_read(chunk_read: torch.Tensor | None, src_mask: torch.Tensor) -> float:
    """The fraction of real source words (``src_mask`` ``(M, N)``) in chunks read at some step
    (``chunk_read`` ``(steps, M)``); 1.0 when ``chunk_read`` is None (soft attention)."""
    total = int(src_mask.sum())
    if total == 0:
        raise ValueError("the document has no source words")
    if chunk_read is None:
        return 1.0
    read_chunks = (
        chunk_read.bool().any(dim=0) if chunk_read.numel() else torch.zeros(src_mask.shape[0], dtype=torch.bool)
    )
    return int((src_mask.bool() & read_chunks.unsqueeze(-1).to(src_mask.device)).sum()) / total


def fraction_read_per_step(chunk_read: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
    """For every step (row of ``chunk_read`` ``(steps, M)``), the fraction of the real source
    words (``src_mask`` ``(M, N)``) inside the chunks read at that step: ``(steps,)`` float64."""
    words = src_mask.bool().sum(-1).double()  # (M,)
    total = float(words.sum())
    if total == 0:
        raise ValueError("the document has no source words")
    return (chunk_read.bool().double().to(words.device) @ words) / total  # (steps,)


@dataclass
class AttentionMetrics:
    """Accumulates the attention metrics over summaries (see the module docstring)."""

    entropy_sum: float = 0.0
    entropy_words: int = 0
    read_sum: float = 0.0
    step_read_sum: float = 0.0
    step_read_words: int = 0
    summaries: int = 0
    correct_words: int = 0
    salient_words: int = 0
    correct_docs: int = 0
    salient_docs: int = 0
    has_coarse: bool = False

    def add(
        self, extras: Mapping[str, torch.Tensor], num_words: int, src_mask: torch.Tensor, salient: int = -1
    ) -> None:
        """Add one summary.

        Args:
            extras: its recorded extras, each ``(steps, ...)`` with ``steps >= num_words``.
            num_words: the number of generated words (``</s>`` excluded).
            src_mask: bool ``(M, N)`` of the document.
            salient: the salient chunk, or -1 when unknown.
        """
        self.summaries += 1
        chunk_read = extras.get("chunk_read")
        self.read_sum += fraction_read(chunk_read, src_mask)
        if chunk_read is None:
            self.step_read_sum += float(num_words)  # soft attention: every word at every step
        else:
            if chunk_read.shape[0] < num_words:
                raise ValueError(f"chunk_read has {chunk_read.shape[0]} steps for a summary of {num_words} words")
            self.step_read_sum += float(fraction_read_per_step(chunk_read[:num_words], src_mask).sum())
        self.step_read_words += num_words
        coarse = extras.get("coarse_attn")
        if coarse is None:
            return
        self.has_coarse = True
        if coarse.shape[0] < num_words:
            raise ValueError(f"coarse_attn has {coarse.shape[0]} steps for a summary of {num_words} words")
        words = coarse[:num_words].float()
        self.entropy_sum += float(coarse_entropy(words).sum())
        self.entropy_words += num_words
        if salient >= 0 and num_words > 0:
            self.correct_words += int((words.argmax(-1) == salient).sum())
            self.salient_words += num_words
            self.correct_docs += int(int(words.sum(0).argmax()) == salient)
            self.salient_docs += 1

    def result(self) -> dict[str, Any]:
        """``coarse_entropy``, ``fraction_read``, ``fraction_read_step``, ``coarse_accuracy``,
        ``coarse_accuracy_doc``
        (``None`` where undefined: no coarse attention, or no salient chunks)."""

        def ratio(num: float, den: int, when: bool = True) -> float | None:
            return num / den if when and den else None

        return {
            "coarse_entropy": ratio(self.entropy_sum, self.entropy_words, self.has_coarse),
            "fraction_read": ratio(self.read_sum, self.summaries),
            "fraction_read_step": ratio(self.step_read_sum, self.step_read_words),
            "coarse_accuracy": ratio(self.correct_words, self.salient_words),
            "coarse_accuracy_doc": ratio(self.correct_docs, self.salient_docs),
        }
