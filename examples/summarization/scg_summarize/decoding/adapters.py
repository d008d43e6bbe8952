"""The one step adapter: a model of any family as a step decoder for beam and greedy search.

:class:`ModelStepDecoder` wraps a :class:`~scg_summarize.models.family.SummarizerFamily` (C2F with
its STANDARD, MODEL1, HIER and C2F attentions, Paulus, ABS, MAL) in the protocol of
:mod:`~scg_summarize.decoding.protocol`, through the family interface only (``encode``,
``init_state``, ``advance``, ``step_log_probs``, ``generator.output_layer()``, ``word_attention``;
a family with an output space of its own maps it to corpus ids with ``corpus_log_probs``) and its
declared capabilities (``copies``, ``has_own_output_space``, ``reads_rows``, ``markov_window``:
ABS's window makes hypothesis recombination exact; ``coarse_topk``: C2F's chunks read per step,
changed through the view ``with_coarse_topk(k)``, never on the caller's model):

* ``init_state`` encodes the batch once; the encoder memory stays per example and a row ->
  example index follows the beams; ``reorder`` reorders the decoder state and the memory
  field by field (``models.rows``), so a family's own state fields (Paulus's intra-temporal
  sums and past decoder states) and memory extras follow the beams unseen. C2F reads the memory through that index
  (``Memory.read_through``, the kernels' ``rows=``), so no hypothesis copies the encoder states;
  other attentions (and copying generators) get the memory re-gathered when the rows change;
* ``step_topk`` (the protocol's optional top-k step): for a plain softmax generator the output
  projection, log-softmax and top-k are one ``scg_summarize.kernels.logsoftmax_topk`` call
  (``fused_topk`` is True where it runs the Triton kernel); a copying generator's distribution
  depends on the attention, so it falls back to the top k of the family's ``step_log_probs``;
* ``step`` runs one decoder step in ``"greedy"`` attention mode -- C2F reads the argmax chunk,
  or its top ``test_k`` (+MULTI) -- and returns the log-probabilities with the extras
  ``coarse_attn`` (the model's distribution over chunks), ``chunk_read`` (C2F: the chunks
  read) and, when requested through :meth:`ModelStepDecoder.request_extras`, ``word_attn``
  (recomputed from the decoder's top hidden state: the fine attention inside the chunks, scaled
  by the weight the context gave each chunk; flat models: the attention over all words).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import torch

from ..data.batching import SourceBatch
from ..kernels import choose, logsoftmax_topk
from ..models.common.attention import AttentionOut, Memory, per_query_row
from ..models.common.decoder import DecoderState
from ..models.family import SummarizerFamily
from .protocol import TopK, topk_of

__all__ = ["ModelState", "ModelStepDecoder"]


@dataclass(kw_only=True, slots=True)
class ModelState:
    """Rows of :class:`ModelStepDecoder`."""

    dec: DecoderState  # the family's decoder state, R rows
    example: torch.Tensor  # (R,) row -> example
    base: Memory  # the encoder memory, one row per example
    memory: Memory  # base read through ``example`` (``Memory.rows``, or gathered; cached)
    t: int = 0  # the decoder step


class ModelStepDecoder:
    """A model of any family seen through the step protocol (see the module docstring).

    Args:
        model: the trained model (put in eval mode here).
        coarse_topk: if given, chunks C2F reads per step at test time (overrides the
            configuration's ``test_k``; the model itself is not changed).
    """

    def __init__(self, model: SummarizerFamily[Any, Any], coarse_topk: int | None = None) -> None:
        model = model.eval() if coarse_topk is None else model.eval().with_coarse_topk(coarse_topk)  # a view
        self.model = model
        self.want_words = False
        #: chunks read per step at test time (1: the argmax chunk; k > 1: +MULTI; C2F only)
        self.coarse_topk = model.coarse_topk
        # C2F reads the memory through the row -> example index; a copying generator reads the
        # source ids per row, so it gets gathered memories
        self.index_rows = model.reads_rows and not model.copies
        #: C when the family's state is its last C words (ABS): beam search may recombine hypotheses
        self.markov_window = model.markov_window
        #: the corpus ids the model is scored on (ABS, Paulus: words it cannot produce -> <unk>)
        self.scored_targets = model.scored_targets

    @property
    def vocab_size(self) -> int:
        """V, the number of output words (corpus ids)."""
        return int(self.model.config.vocab_size)

    def _projection(self) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """The output layer (W_out, b_out) when p(y_t) = softmax(W_out c_t + b_out) (no copying), else None."""
        if self.model.copies or self.model.has_own_output_space:  # ids need mapping
            return None
        layer: tuple[torch.Tensor, torch.Tensor | None] = self.model.generator.output_layer()
        return layer

    @property
    def fused_topk(self) -> bool:
        """Whether :meth:`step_topk` runs the fused Triton kernel (a plain softmax generator, on
        CUDA or with ``SCG_KERNELS=triton``); beam search then uses it by default."""
        proj = self._projection()
        if proj is None:
            return False
        return choose(proj[0].device) == "triton"

    @property
    def offered_extras(self) -> tuple[str, ...]:
        """The extras the steps return: ``coarse_attn`` and ``word_attn`` for every family, and
        ``chunk_read`` when the model reads chosen chunks (C2F)."""
        return ("coarse_attn", "chunk_read", "word_attn") if self.model.reads_rows else ("coarse_attn", "word_attn")

    def request_extras(self, names: Iterable[str]) -> None:
        """Optional protocol hook: compute ``word_attn`` only when someone records it."""
        names = set(names)
        self.want_words = "*" in names or "word_attn" in names

    @torch.no_grad()
    def init_state(self, batch: SourceBatch) -> ModelState:
        memory, final = self.model.encode(batch.src, batch.src_mask, batch.lengths)
        dec = self.model.init_state(memory, final)
        example = torch.arange(batch.src.shape[0], device=batch.src.device)
        return ModelState(dec=dec, example=example, base=memory, memory=memory)

    def _advance(
        self, state: ModelState, prev_tokens: torch.Tensor
    ) -> tuple[torch.Tensor, AttentionOut, ModelState, dict[str, torch.Tensor]]:
        """One decoder step: c_t ``(R, H)``, the attention, the new state and the extras."""
        out, dec, att = self.model.advance(state.dec, prev_tokens, state.memory, state.t, "greedy")
        extras: dict[str, torch.Tensor] = {"coarse_attn": att.chunk_probs.float()}
        if att.selected is not None:
            read = torch.zeros_like(att.chunk_probs, dtype=torch.bool)
            real = per_query_row(state.memory.chunk_mask, state.memory.rows)  # (R, M)
            extras["chunk_read"] = read.scatter(1, att.selected, True) & real
        if self.want_words:
            words = self.model.word_attention(state.memory.gathered(), dec.h[-1], att)
            if words is not None:
                extras["word_attn"] = words.float()
        return out, att, replace(state, dec=dec, t=state.t + 1), extras

    def _log_probs(self, out: torch.Tensor, att: AttentionOut, memory: Memory) -> torch.Tensor:
        """log p ``(R, V)`` over corpus ids (a family with an extended output space maps it)."""
        log_probs: torch.Tensor = self.model.step_log_probs(out, att, memory)
        return self.model.corpus_log_probs(log_probs, memory).float()

    @torch.no_grad()
    def step(self, state: ModelState, prev_tokens: torch.Tensor) -> tuple[torch.Tensor, ModelState, dict[str, Any]]:
        out, att, new_state, extras = self._advance(state, prev_tokens)
        return self._log_probs(out, att, state.memory), new_state, extras

    @torch.no_grad()
    def step_topk(
        self, state: ModelState, prev_tokens: torch.Tensor, k: int
    ) -> tuple[TopK, ModelState, dict[str, Any]]:
        """The ``min(k, V)`` most probable next words per row (the protocol's optional top-k step).

        A plain softmax generator: log softmax(W_out c_t + b_out) and its top k in one
        ``kernels.logsoftmax_topk`` call (Triton on CUDA: the ``(R, V)`` logits are never written;
        the PyTorch reference on CPU, equal to :meth:`step`'s log-probabilities bit for bit in
        float32). A copying generator: the top k of :meth:`step`'s full distribution.
        """
        out, att, new_state, extras = self._advance(state, prev_tokens)
        proj = self._projection()
        if proj is None:
            return topk_of(self._log_probs(out, att, state.memory), k), new_state, extras
        weight, bias = proj
        values, indices = logsoftmax_topk(out, weight, bias, min(k, weight.shape[0]))  # (R, k'), (R, k')
        return TopK(values.float(), indices), new_state, extras

    def reorder(self, state: ModelState, indices: torch.Tensor) -> ModelState:
        example = state.example[indices]
        same = example.shape == state.example.shape and bool(torch.equal(example, state.example))
        if same:
            memory = state.memory
        elif self.index_rows:
            memory = state.base.read_through(example)  # an index, no copy of the encoder states
        else:
            memory = state.base.index_select(example)
        return ModelState(dec=state.dec.select(indices), example=example, base=state.base, memory=memory, t=state.t)
