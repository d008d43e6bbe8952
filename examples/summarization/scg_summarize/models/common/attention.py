"""Attention over the chunked source: STANDARD / Model 1 (flat), HIER (Model 2), C2F (Model 3).

Notation (Ling & Rush 2017, Section 4): word states h_ij ∈ R^H (chunk i ≤ M, word j ≤ N), chunk
vectors u_i ∈ R^D, decoder state h_t ∈ R^H. All scores are bilinear:

    β_ij = h_ijᵀ W_a h_t,        β^s_i = u_iᵀ W_s h_t.

* flat (STANDARD and Model 1):   α_ij = softmax over all real (i, j) of β_ij.
* HIER (Model 2):                 α^s = softmax_i β^s_i,  α^w_ij = softmax_j β_ij (within chunk i),
                                  α_ij = α^s_i α^w_ij.
* C2F (Model 3):                  draw chunks ℓ_1..ℓ_k ~ α^s (i.i.d.; k > 1 is +MULTI, i.e.
                                  μ ~ Multinomial(k, α^s) and α̃ = μ / k), then
                                  α_ij = α̃_i α^w_ij, computed for the drawn chunks only.

The context is c̃_t = Σ_ij α_ij h_ij. C2F's draws are stochastic nodes of an scg graph
(``scg.sample(Categorical(α^s), name="coarse", step=t)``); they are trained by the score-function
estimator through ``Graph.surrogate_loss``. At test time C2F reads the argmax chunk (or the
top-``test_k``, weighted by their renormalized α^s).

Cost per decoder step (B examples): flat and HIER touch all M·N word states, O(B·M·N·H); C2F
touches the M chunk vectors and the k·N states of the drawn chunks, O(B·(M·D + k·N·H)). The
per-step computations are plain functions (:func:`flat_step`, :func:`hier_step`, and
:func:`~.c2f.c2f_step` in :mod:`.c2f`, which holds C2F's step functions and
:class:`~.c2f.C2FAttention`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, get_args

import torch
from torch import nn

from .rows import repeat_rows, select_rows

__all__ = [
    "MODES",
    "AttentionOut",
    "FlatAttention",
    "HierAttention",
    "Memory",
    "Mode",
    "SourceAttention",
    "autocast_states",
    "flat_step",
    "hier_step",
    "masked_softmax",
    "per_query_row",
]

#: How a C2F attention chooses chunks: draw (training, an scg node), argmax/top-k (test), or
#: soft HIER attention (the +ALTERNATE soft minibatches); the soft attentions read every chunk in
#: every mode. The ``mode`` of the family interface (`SummarizerFamily.advance`, ...).
Mode = Literal["sample", "greedy", "soft"]
MODES: tuple[Mode, ...] = get_args(Mode)


@dataclass
class Memory:
    """The encoded source the decoder attends to (one row per example, or per hypothesis).

    Attributes:
        words: ``(B, M, N, H)`` word states, zero at padding.
        word_mask: ``(B, M, N)`` True at real words.
        chunks: ``(B, M, D)`` chunk vectors u_i (hierarchical models), else None.
        chunk_mask: ``(B, M)`` True at chunks with at least one real word.
        chunk_sizes: ``(B, M)`` real words per chunk (float; for the "words read" statistic).
        ids: ``(B, M, N)`` the source word ids (for generators that copy), else None.
        extra: any other per-document tensors a model family keeps (first dimension B), e.g. the
            extended-vocabulary ids of :mod:`.extended_vocab`; reordered with the rows like the
            rest (:mod:`.rows`), so search never drops them.
        rows: ``(R,)`` when R query rows read this memory of B examples through an index (query
            row r reads example ``rows[r]``: beam search's hypotheses, without a copy of the
            states per hypothesis; only attentions that declare ``reads_rows``, C2F's, accept it),
            else None (one memory row per query row). See :meth:`read_through`.

    Subclasses may add fields too; :meth:`index_select` and :meth:`repeat` keep them.
    """

    words: torch.Tensor
    word_mask: torch.Tensor
    chunks: torch.Tensor | None
    chunk_mask: torch.Tensor
    chunk_sizes: torch.Tensor
    ids: torch.Tensor | None = None
    extra: dict[str, torch.Tensor] = field(default_factory=dict)
    rows: torch.Tensor | None = None

    @classmethod
    def build(
        cls,
        words: torch.Tensor,
        word_mask: torch.Tensor,
        chunks: torch.Tensor | None,
        ids: torch.Tensor | None = None,
        extra: dict[str, torch.Tensor] | None = None,
    ) -> Memory:
        """A memory from word states, their mask, (optional) chunk vectors, source ids, extras.

        Under ``torch.autocast`` the word states and chunk vectors are cast to autocast's dtype here,
        once (`autocast_states`): every decoder step's products read them, and autocast would cast
        any other floating dtype at each product, keeping every copy for the backward pass. On CUDA
        the states come in float16 whatever autocast's dtype: cuDNN's LSTM under autocast runs in
        float16. A bf16 STANDARD step kept two copies of the states per decoder step that way, and
        ran out of an H100's 80 GB at M = 1000."""
        sizes = word_mask.sum(-1).to(words.dtype)  # (B, M) real words per chunk, in the incoming dtype
        chunks = None if chunks is None else autocast_states(chunks)
        return cls(autocast_states(words), word_mask, chunks, word_mask.any(-1), sizes, ids, dict(extra or {}))

    def index_select(self, index: torch.Tensor) -> Memory:
        """Rows ``index`` of every tensor (beam search: one row per hypothesis); a memory read
        through ``rows`` composes the index instead (nothing copied)."""
        if self.rows is not None:
            return replace(self, rows=self.rows.index_select(0, index.to(self.rows.device)))
        return select_rows(self, index)

    def read_through(self, rows: torch.Tensor) -> Memory:
        """This memory read by ``len(rows)`` query rows, row r reading example ``rows[r]`` (the
        states are indexed by the attention, never copied)."""
        return self.index_select(rows) if self.rows is not None else replace(self, rows=rows)

    def gathered(self) -> Memory:
        """One memory row per query row: the states read through ``rows`` copied (for parts that
        do not index them); the memory itself when it has no ``rows``."""
        return self if self.rows is None else select_rows(replace(self, rows=None), self.rows)

    def repeat(self, times: int) -> Memory:
        """Each example repeated ``times`` times consecutively (for beam search)."""
        return repeat_rows(self, times)


@dataclass
class AttentionOut:
    """One decoder step's attention.

    Attributes:
        context: ``(B, H)`` c̃_t.
        chunk_probs: ``(B, M)`` the model's distribution over chunks (α^s; for flat models the
            word weights summed per chunk).
        chunk_weights: ``(B, M)`` the weight the context actually gave each chunk (α^s for soft
            models, α̃ = μ/k or the renormalized top-k for C2F).
        words_read: ``(B,)`` real words whose states entered the context.
        selected: ``(B, k)`` the chunks C2F read, else None.
        read_weights: ``(B, K, N)`` the weight α_ij the context gave each word it read: of the
            chunks ``selected`` (K = k) or, when ``selected`` is None, of all M chunks. Copying
            generators use it as the copy distribution; its rows sum to 1 over real words.
        word_probs: ``(B, M, N)`` the word attention to show (``word_attn`` extra), when the
            attention computes it anyway (else the decoding adapter recomputes it).
    """

    context: torch.Tensor
    chunk_probs: torch.Tensor
    chunk_weights: torch.Tensor
    words_read: torch.Tensor
    selected: torch.Tensor | None = None
    read_weights: torch.Tensor | None = None
    word_probs: torch.Tensor | None = None


def autocast_states(x: torch.Tensor) -> torch.Tensor:
    """``x`` in ``torch.autocast``'s dtype when autocast is on for its device and ``x`` is of another
    floating dtype (float32, or float16 from cuDNN's LSTM), as its matrix products would cast it;
    else ``x`` itself."""
    device = x.device.type
    if torch.is_autocast_enabled(device) and x.is_floating_point():
        dtype = torch.get_autocast_dtype(device)
        if x.dtype != dtype and x.dtype != torch.float64:  # (autocast leaves float64 alone)
            return x.to(dtype)
    return x


def per_query_row(x: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    """``x`` (one row per memory row) as one row per query row: ``x[rows]``, or ``x`` itself
    when ``rows`` is None (see :class:`~.c2f.C2FAttention` and :attr:`Memory.rows`)."""
    return x if rows is None else x.index_select(0, rows)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of ``scores`` over the True entries of ``mask`` along ``dim``; rows with no True
    entry give all zeros (never NaN)."""
    filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=dim) * mask.to(scores.dtype)


def masked_logits(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Scores with masked entries at the dtype's minimum (probability exactly 0 after softmax)."""
    return scores.masked_fill(~mask, torch.finfo(scores.dtype).min)


# ----------------------------------------------------------------------------- per-step functions
def flat_step(words: torch.Tensor, word_mask: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat attention over all M·N words. ``q = W_a h_t`` ``(B, H)``.

    Returns the context ``(B, H)`` and the weights α ``(B, M, N)``.
    """
    B, M, N, H = words.shape
    flat = words.reshape(B, M * N, H)  # (B, MN, H)
    scores = torch.bmm(flat, q.unsqueeze(2)).squeeze(2)  # (B, MN)  β_ij
    alpha = masked_softmax(scores, word_mask.reshape(B, M * N))  # (B, MN)
    context = torch.bmm(alpha.unsqueeze(1), flat).squeeze(1)  # (B, H)
    return context, alpha.reshape(B, M, N)


def hier_step(
    words: torch.Tensor, word_mask: torch.Tensor, chunk_probs: torch.Tensor, q: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """HIER: α_ij = α^s_i · α^w_ij with α^w normalized within each chunk.

    Args:
        words: ``(B, M, N, H)``; word_mask ``(B, M, N)``.
        chunk_probs: α^s ``(B, M)``.
        q: ``W_a h_t`` ``(B, H)``.

    Returns the context ``(B, H)`` and α^w ``(B, M, N)``.
    """
    scores = torch.einsum("bmnh,bh->bmn", words, q)  # (B, M, N)
    alpha_w = masked_softmax(scores, word_mask)  # (B, M, N), rows sum to 1 (0 for empty chunks)
    alpha = chunk_probs.unsqueeze(-1) * alpha_w  # (B, M, N)
    context = torch.einsum("bmn,bmnh->bh", alpha, words)  # (B, H)
    return context, alpha_w


# ----------------------------------------------------------------------------- modules
class SourceAttention(nn.Module):
    """Interface: ``forward(memory, h_t (B, H), step, mode) -> AttentionOut``.

    ``hard`` is True for attentions that create stochastic nodes in ``sample`` mode.
    """

    hard: bool = False

    def forward(self, memory: Memory, h: torch.Tensor, step: int, mode: Mode) -> AttentionOut:  # pragma: no cover
        raise NotImplementedError


class FlatAttention(SourceAttention):
    """STANDARD / Model 1: bilinear attention over all words (``mode`` is ignored)."""

    def __init__(self, dec_hidden: int, enc_hidden: int) -> None:
        super().__init__()
        self.w_word = nn.Linear(dec_hidden, enc_hidden, bias=False)  # W_a

    def forward(self, memory: Memory, h: torch.Tensor, step: int, mode: Mode) -> AttentionOut:
        context, alpha = flat_step(memory.words, memory.word_mask, self.w_word(h))
        per_chunk = alpha.sum(-1)  # (B, M)
        read = memory.chunk_sizes.sum(1)
        return AttentionOut(context, per_chunk, per_chunk, read, read_weights=alpha)


class HierAttention(SourceAttention):
    """HIER (Model 2): α^s over chunk vectors times α^w within each chunk (``mode`` ignored)."""

    def __init__(self, dec_hidden: int, enc_hidden: int, chunk_dim: int) -> None:
        super().__init__()
        self.w_word = nn.Linear(dec_hidden, enc_hidden, bias=False)  # W_a
        self.w_chunk = nn.Linear(dec_hidden, chunk_dim, bias=False)  # W_s

    def coarse_logits(self, memory: Memory, h: torch.Tensor) -> torch.Tensor:
        """β^s ``(B, M)`` with padding chunks at the dtype's minimum."""
        assert memory.chunks is not None, "HIER/C2F attention needs chunk vectors"
        scores = torch.bmm(memory.chunks, self.w_chunk(h).unsqueeze(2)).squeeze(2)  # (B, M)
        return masked_logits(scores, memory.chunk_mask)

    def soft(self, memory: Memory, h: torch.Tensor) -> AttentionOut:
        probs = masked_softmax(self.coarse_logits(memory, h), memory.chunk_mask)  # (B, M)  α^s
        context, alpha_w = hier_step(memory.words, memory.word_mask, probs, self.w_word(h))
        read = memory.chunk_sizes.sum(1)
        return AttentionOut(context, probs, probs, read, read_weights=probs.unsqueeze(-1) * alpha_w)

    def forward(self, memory: Memory, h: torch.Tensor, step: int, mode: Mode) -> AttentionOut:
        return self.soft(memory, h)
