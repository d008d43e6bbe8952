"""Validation during training: perplexity and attention statistics under teacher forcing.

(Decoding, ROUGE and the attention metrics of *generated* summaries are
:func:`scg_summarize.evaluation.evaluate_model`'s job; :func:`evaluate_nll` is the cheap,
DDP-sharded check the training loop runs every epoch.)

Attention statistics are measured with teacher forcing at test-time behaviour (C2F reads its
argmax / top-k chunks), over real target steps:

* coarse accuracy: the chunk given the most weight (C2F: the chunk read; HIER: argmax α^s;
  flat models: the chunk whose words get the most attention) is the salient chunk (synthetic
  data, where it is known);
* attention entropy: H(α^s) in nats of the model's distribution over chunks (flat models: the
  word attention summed per chunk);
* fraction of words read: real words whose states enter the context c̃_t, over the document's
  real words (1 for soft attention; for C2F the words of the chunks read).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..data import SummarizationDataset
from ..models.common.attention import Mode
from ..models.family import SummarizerFamily
from .config import Config
from .data import batch_to, make_loader
from .ddp import DistContext
from .progress import PhaseProgress
from .selection import validation_rouge

__all__ = ["AttentionStats", "evaluate_nll"]


@dataclass
class AttentionStats:
    """Running sums of the attention statistics (see the module docstring)."""

    steps: float = 0.0
    salient_steps: float = 0.0
    correct: float = 0.0
    entropy: float = 0.0
    read: float = 0.0

    def add(self, out: Any, salient: torch.Tensor, src_mask: torch.Tensor) -> None:
        """Add the real steps of ``out`` (its ``attention``, one record a step, and ``step_mask``), all
        steps at once: the records stacked along a step dimension, one device-to-host copy."""
        if not out.attention:
            return
        total_words = src_mask.sum((1, 2)).to(torch.float64).clamp(min=1.0)  # (B,)
        real = out.step_mask[:, : len(out.attention)].T  # (T, B)
        p = torch.stack([att.chunk_probs for att in out.attention]).to(torch.float64)  # (T, B, M)
        ent = -(p * torch.log(p.clamp(min=1e-30))).sum(2)  # (T, B)
        choice = torch.stack([att.chunk_weights.argmax(1) for att in out.attention])  # (T, B)
        read = torch.stack([att.words_read for att in out.attention]).to(torch.float64) / total_words  # (T, B)
        both = real & (salient >= 0)
        counts = [real.sum(), ent[real].sum(), read[real].sum(), both.sum(), (choice == salient)[both].sum()]
        sums = torch.stack([c.to(torch.float64) for c in counts]).tolist()
        self.steps += sums[0]
        self.entropy += sums[1]
        self.read += sums[2]
        self.salient_steps += sums[3]
        self.correct += sums[4]

    def as_list(self) -> list[float]:
        return [self.steps, self.salient_steps, self.correct, self.entropy, self.read]

    def summary(self) -> dict[str, float | None]:
        steps = max(self.steps, 1.0)
        acc = self.correct / self.salient_steps if self.salient_steps else None
        return {"coarse_acc": acc, "attn_entropy": self.entropy / steps, "read_frac": self.read / steps}


@torch.no_grad()
def evaluate_nll(
    model: SummarizerFamily[Any, Any],
    dataset: SummarizationDataset,
    config: Config,
    device: torch.device,
    dist: DistContext | None = None,
    mode: Mode = "greedy",
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Perplexity and attention statistics of ``dataset``, and the family's own terms per document
    (`SummarizerFamily.output_terms`; a term no batch reported is left out), sharded over ranks,
    sums all-reduced; ``progress`` is called with the examples of every batch, this rank's or not."""
    dist = dist or DistContext()
    was_training = model.training
    model.eval()
    nll, tokens = 0.0, 0.0
    stats = AttentionStats()
    names = model.output_terms
    term_sums = dict.fromkeys(names, 0.0)  # Σ over documents
    term_docs = dict.fromkeys(names, 0.0)  # the documents of the batches that reported it
    loader = make_loader(dataset, config, train=False)
    for i, batch in enumerate(loader):
        if progress is not None:
            progress(int(batch.src.shape[0]))
        if i % dist.world != dist.rank:
            continue
        batch = batch_to(batch, device, config)
        out = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode=mode, lengths=batch.lengths)
        nll += float(out.total_nll())
        tokens += int(out.tokens())
        unknown = torch.full_like(batch.tgt_lengths, -1)
        stats.add(out, batch.salient if batch.salient is not None else unknown, batch.src_mask)
        terms = out.document_terms() if names else {}
        if terms:
            for name, value in zip(terms, torch.stack([v.to(torch.float64) for v in terms.values()]).tolist()):
                term_sums[name] += value
                term_docs[name] += int(batch.src.shape[0])
    head = [nll, tokens, *stats.as_list()]
    sums = dist.all_reduce([*head, *term_sums.values(), *term_docs.values()], device)
    nll, tokens = sums[0], sums[1]
    stats = AttentionStats(*sums[2 : len(head)])
    totals, docs_seen = sums[len(head) : len(head) + len(names)], sums[len(head) + len(names) :]
    reported = dict(zip(names, zip(totals, docs_seen)))
    model.train(was_training)
    return {
        "nll": nll / max(tokens, 1.0),
        "ppl": math.exp(min(nll / max(tokens, 1.0), 50.0)),
        "tokens": int(tokens),
        **stats.summary(),
        **{name: total / docs for name, (total, docs) in reported.items() if docs},
    }


def validation_metrics(
    model: SummarizerFamily[Any, Any],
    valid_set: SummarizationDataset,
    config: Config,
    device: torch.device,
    dist: DistContext,
    phase: Callable[[str, int], PhaseProgress],
) -> dict[str, Any]:
    """The validation after an epoch: perplexity and attention statistics (teacher forcing), and the
    ROUGE of greedy summaries when ``train.select_metric`` picks ``best.pt`` by one; ``phase(name,
    total)`` reports each part's progress. The global random state is left as it was."""
    tc = config.train
    with torch.random.fork_rng(devices=[]):
        progress = phase("validation (perplexity)", len(valid_set))
        metrics = evaluate_nll(model, valid_set, config, device, dist, mode="greedy", progress=progress)
        progress.done()
        if tc.select_metric != "ppl":
            progress = phase(
                f"validation ({tc.select_metric} of greedy summaries, picks best.pt)",
                min(tc.select_examples, len(valid_set)),
            )
            metrics.update(validation_rouge(model, valid_set, config, device, tc.select_examples, progress=progress))
            progress.done()
    return metrics
