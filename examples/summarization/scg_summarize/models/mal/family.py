"""MAL as a model family of the registry (``model.family = "mal"``): ``scg-summarize train``,
``--resume``, validation-based selection of ``best.pt``, ``evaluate`` and beam search.

:class:`MALFamily` is a :class:`~.model.MALSummarizer` (same parameters, same equations) that
also speaks the family interface of ``docs/summarizer.md`` ("Adding a model family"):

* ``encode(src, src_mask) -> (memory, h0)``: the flat source as a one-chunk
  :class:`~scg_summarize.models.common.attention.Memory` (``words`` = h^e ``(B, 1, L, 2k_h)``) with the
  attention keys and eq. (17)'s constant part W c^s + W c^u + b in ``memory.extra``, so beam
  search reorders them with the rest;
* ``init_state`` / ``advance``: the two cGRU states (eq. 14-16) in a
  :class:`~scg_summarize.models.common.decoder.DecoderState` (``h = [h^{d1}, h^{d2}]``); ``advance``
  returns h^a_t (eq. 17), so the generator is the plain softmax of eq. (18) and beam search may
  fuse it with its top-k;
* ``forward(..., task="teacher")``: a :class:`MALTeacherOutput`, the trainer's per-step NLL
  (L_NLL, eq. 20) plus L_s per document (eq. 19) and the attention entropies, which the ``mal``
  objective (:mod:`scg_summarize.train.mal_objective`) turns into L = L_s + L_NLL (eq. 21);
  ``task="rollout"``: one scg word node per step (:func:`~scg_summarize.models.common.rollout.rollout`).

The model reads which vocabulary words are content words (the saliency labels, the word
graph's vertices) from a buffer; the trainer fills it with :meth:`MALFamily.bind_vocab` before
the first step and a checkpoint carries it, so decoding needs no stopword list.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ...data.saliency_labels import ContentWords, load_stopwords
from ...data.vocab import Vocab
from ..common.attention import AttentionOut, Memory
from ..common.decoder import DecoderState
from ..common.generator import Generator
from ..family import SummarizerFamily, SummarizerOutput
from ..registry import FAMILIES
from .cgru import DecoderMemory
from .config import MALConfig
from .model import MALSummarizer

__all__ = ["MALFamily", "MALTeacherOutput"]


@dataclass
class MALTeacherOutput(SummarizerOutput):
    """The trainer's teacher-forced output plus MAL's other terms.

    Attributes:
        loss_s: L_s per document ``(B,)`` (eq. 19; zeros without +SuAtt).
        entropy_s / entropy_u: mean normalized entropy of a^s / a^u (1 = uniform; None when off).
        label_rate: fraction of source words labelled salient (None without +SuAtt).
    """

    loss_s: torch.Tensor | None = None
    entropy_s: float | None = None
    entropy_u: float | None = None
    label_rate: float | None = None


class _OutputLayer(Generator):
    """Eq. (18) as a generator: softmax(W^d_hy h^a + b^d_hy) over the model's ``out`` layer
    (held by reference, so the state dict keeps MAL's names)."""

    copies = False

    def __init__(self, owner: MALSummarizer) -> None:
        super().__init__()
        self._owner = [owner]  # a list: not a submodule

    def output_layer(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        out = self._owner[0].out
        return out.weight, out.bias

    def forward(self, out: torch.Tensor, att: AttentionOut | None, memory: Memory | None) -> torch.Tensor:
        return F.log_softmax(self.logits(out), dim=-1)


class MALFamily(MALSummarizer, SummarizerFamily[MALConfig, DecoderState]):
    """The ``mal`` family: the Table 1 row is ``model.suatt`` / ``model.unatt``.

    Args:
        config: the ``[model]`` table (``vocab_size`` set; ``emb_dim`` = k_e, ``hidden`` = k_h).
    """

    default_objective = "mal"  # L = L_s + L_NLL

    def __init__(self, config: MALConfig) -> None:
        if config.vocab_size < 5:
            raise ValueError("model.vocab_size must be set (the corpus vocabulary size)")
        super().__init__(config, torch.zeros(config.vocab_size, dtype=torch.bool))
        self.generator = _OutputLayer(self)

    def bind_vocab(self, vocab: Vocab) -> None:
        """Mark the content words of ``vocab`` (stopwords from ``model.stopwords``)."""
        if len(vocab) != self.config.vocab_size:
            raise ValueError(f"model.vocab_size is {self.config.vocab_size} but the vocabulary has {len(vocab)} words")
        self.content.copy_(ContentWords(vocab, load_stopwords(self.config.stopwords)).table.to(self.content.device))

    def _check_bound(self) -> None:
        if self.training and (self.config.suatt or self.config.unatt) and not bool(self.content.any()):
            raise ValueError(
                "MAL: no content words are known (the saliency labels and the word graph need them); "
                "call model.bind_vocab(vocab) before training (scg-summarize train does)"
            )

    # ------------------------------------------------------------------ the family interface
    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> tuple[Memory, torch.Tensor]:
        """The memory (h^e as one chunk, with the keys and eq. 17's constant part) and h0."""
        self._check_bound()
        enc = self.encode_source(src, src_mask)
        states, mask = enc.memory.states, enc.memory.mask  # (B, L, S), (B, L)
        extra = {"keys": enc.memory.keys, "bias": enc.bias}  # (B, L, A), (B, k_h)
        memory = Memory.build(states.unsqueeze(1), mask.unsqueeze(1), None, enc.src.unsqueeze(1), extra)
        return memory, enc.h0

    def init_state(self, memory: Memory, final: torch.Tensor) -> DecoderState:
        """h^{d1}_0 = h^{d2}_0 = the mean encoder state."""
        return DecoderState([final, final], [], final)

    def advance(
        self, state: DecoderState, prev_tokens: torch.Tensor, memory: Memory, t: int, mode: str
    ) -> tuple[torch.Tensor, DecoderState, AttentionOut]:
        """Eq. (14-17) for every row: returns h^a_t ``(B, k_h)``."""
        dec_memory = DecoderMemory(memory.words[:, 0], memory.word_mask[:, 0], memory.extra["keys"])
        y = self.tgt_embedding(prev_tokens)  # (B, k_e)
        h1, h2, weights = self.decoder.step(y, state.h[0], state.h[1], dec_memory)  # (B, S), (B, S), (B, L)
        out = self.integrate(h2, memory.extra["bias"])  # h^a_t (B, k_h)
        return out, DecoderState([h1, h2], [], h2), _attention_out(weights, memory)

    def step_log_probs(self, out: torch.Tensor, att: AttentionOut, memory: Memory) -> torch.Tensor:
        """log p(y_t) ``(B, V)`` (eq. 18)."""
        log_probs: torch.Tensor = self.generator(out, att, memory)
        return log_probs

    forward = SummarizerFamily.forward  # the family's, not MALSummarizer's (L of eq. 21 alone)

    def teacher_forcing(
        self, src: torch.Tensor, src_mask: torch.Tensor, tgt: torch.Tensor, tgt_mask: torch.Tensor, mode: str
    ) -> MALTeacherOutput:
        """A :class:`MALTeacherOutput`: the per-step NLL with L_s and the saliency statistics."""
        self._check_bound()
        terms = self.teacher_terms(src, src_mask, tgt, tgt_mask)
        enc = terms.encoded
        # the per-step attention is for statistics only (validation): no graph behind it
        memory = Memory.build(enc.memory.states.detach().unsqueeze(1), enc.mask.unsqueeze(1), None)
        steps = terms.nll.shape[1]
        weights = terms.attention.detach()  # (B, T-1, L)
        atts = [_attention_out(weights[:, t], memory) for t in range(steps)]
        return MALTeacherOutput(
            [terms.nll[:, t] for t in range(steps)],
            terms.out_mask,
            atts,
            terms.loss_s,
            terms.entropy_s,
            terms.entropy_u,
            terms.label_rate,
        )


def _attention_out(weights: torch.Tensor, memory: Memory) -> AttentionOut:
    """A step's decoder attention a^d_t ``(B, L)`` in the family interface's terms: one chunk,
    read whole (``words_read`` = the document's words), a^d as the word distribution."""
    B = weights.shape[0]
    one = weights.new_ones(B, 1)
    words = weights.view(B, 1, -1)
    context = torch.bmm(weights.unsqueeze(1), memory.words[:, 0]).squeeze(1)  # c^d_t (B, S)
    return AttentionOut(context, one, one, memory.chunk_sizes.sum(1), read_weights=words, word_probs=words)


FAMILIES.register("mal", MALFamily, config=MALConfig)
