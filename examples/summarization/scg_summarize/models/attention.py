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
per-step computations are plain functions (:func:`flat_step`, :func:`hier_step`,
:func:`c2f_step` = coarse scores + selection + :func:`c2f_read`), so that a fused GPU kernel can
replace them one for one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.distributions import Categorical

import scg

__all__ = [
    "MODES",
    "AttentionOut",
    "C2FAttention",
    "C2FStep",
    "FlatAttention",
    "HierAttention",
    "Memory",
    "SourceAttention",
    "build_attention",
    "c2f_read",
    "c2f_step",
    "flat_step",
    "hier_step",
    "masked_softmax",
]

#: How a C2F attention chooses chunks: draw (training, an scg node), argmax/top-k (test), or
#: soft HIER attention (the +ALTERNATE soft minibatches).
MODES: tuple[str, ...] = ("sample", "greedy", "soft")


@dataclass
class Memory:
    """The encoded source the decoder attends to.

    Attributes:
        words: ``(B, M, N, H)`` word states, zero at padding.
        word_mask: ``(B, M, N)`` True at real words.
        chunks: ``(B, M, D)`` chunk vectors u_i (hierarchical models), else None.
        chunk_mask: ``(B, M)`` True at chunks with at least one real word.
        chunk_sizes: ``(B, M)`` real words per chunk (float; for the "words read" statistic).
    """

    words: torch.Tensor
    word_mask: torch.Tensor
    chunks: torch.Tensor | None
    chunk_mask: torch.Tensor
    chunk_sizes: torch.Tensor

    @classmethod
    def build(cls, words: torch.Tensor, word_mask: torch.Tensor, chunks: torch.Tensor | None) -> Memory:
        """A memory from word states, their mask and (optional) chunk vectors."""
        return cls(words, word_mask, chunks, word_mask.any(-1), word_mask.sum(-1).to(words.dtype))

    def repeat(self, times: int) -> Memory:
        """Each example repeated ``times`` times consecutively (for beam search)."""
        def rep(x: torch.Tensor) -> torch.Tensor:
            return x.repeat_interleave(times, dim=0)

        chunks = None if self.chunks is None else rep(self.chunks)
        return Memory(rep(self.words), rep(self.word_mask), chunks, rep(self.chunk_mask), rep(self.chunk_sizes))


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
    """

    context: torch.Tensor
    chunk_probs: torch.Tensor
    chunk_weights: torch.Tensor
    words_read: torch.Tensor
    selected: torch.Tensor | None = None


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


def hier_step(words: torch.Tensor, word_mask: torch.Tensor, chunk_probs: torch.Tensor, q: torch.Tensor
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


def c2f_read(words: torch.Tensor, word_mask: torch.Tensor, idx: torch.Tensor, weights: torch.Tensor,
             q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The fine half of a C2F step: attention inside the selected chunks only.

    Args:
        words: ``(B, M, N, H)`` word states; only the rows ``idx`` are read.
        word_mask: ``(B, M, N)``.
        idx: ``(B, k)`` selected chunk indices (repeats allowed: +MULTI's draws with replacement).
        weights: ``(B, k)`` α̃ of each selected slot (1/k for k draws).
        q: ``W_a h_t`` ``(B, H)``.

    Returns:
        The context ``(B, H)`` = Σ_l weights_l Σ_j α^w_{ℓ_l j} h_{ℓ_l j}, and α^w ``(B, k, N)``.
        Work and memory are O(B·k·N·H), independent of M.
    """
    B, M, N, H = words.shape
    k = idx.shape[1]
    sel = words.gather(1, idx.view(B, k, 1, 1).expand(B, k, N, H))  # (B, k, N, H)
    sel_mask = word_mask.gather(1, idx.view(B, k, 1).expand(B, k, N))  # (B, k, N)
    scores = torch.einsum("bknh,bh->bkn", sel, q)  # (B, k, N)
    alpha_w = masked_softmax(scores, sel_mask)  # (B, k, N)
    alpha = weights.unsqueeze(-1) * alpha_w  # (B, k, N)
    context = torch.einsum("bkn,bknh->bh", alpha, sel)  # (B, H)
    return context, alpha_w


@dataclass
class C2FStep:
    """The result of :func:`c2f_step`: context ``(B, H)``, coarse logits ``(B, M)`` (masked),
    selected chunks ``(B, k)``, their weights ``(B, k)`` and α^w ``(B, k, N)``."""

    context: torch.Tensor
    logits: torch.Tensor
    idx: torch.Tensor
    weights: torch.Tensor
    alpha_w: torch.Tensor


#: ``select(logits (B, M)) -> (idx (B, k), weights (B, k))``
Selector = Callable[[torch.Tensor], "tuple[torch.Tensor, torch.Tensor]"]


def c2f_step(chunks: torch.Tensor, chunk_mask: torch.Tensor, words: torch.Tensor, word_mask: torch.Tensor,
             q_chunk: torch.Tensor, q_word: torch.Tensor, select: Selector) -> C2FStep:
    """One C2F attention step: coarse scores over M chunk vectors, selection, fine attention in
    the selected chunks.

    Args:
        chunks: u ``(B, M, D)``; chunk_mask ``(B, M)``.
        words: ``(B, M, N, H)``; word_mask ``(B, M, N)`` (only selected rows are read).
        q_chunk: ``W_s h_t`` ``(B, D)``; q_word: ``W_a h_t`` ``(B, H)``.
        select: maps the masked coarse logits to ``(idx, weights)``; training passes a function
            that draws through ``scg.sample``, test time the argmax / top-k.

    Cost: O(B·M·D) for the coarse scores plus O(B·k·N·H) for :func:`c2f_read`.
    """
    logits = masked_logits(torch.bmm(chunks, q_chunk.unsqueeze(2)).squeeze(2), chunk_mask)  # (B, M)  β^s
    idx, weights = select(logits)  # (B, k), (B, k)
    context, alpha_w = c2f_read(words, word_mask, idx, weights, q_word)
    return C2FStep(context, logits, idx, weights, alpha_w)


# ----------------------------------------------------------------------------- modules
class SourceAttention(nn.Module):
    """Interface: ``forward(memory, h_t (B, H), step, mode) -> AttentionOut``.

    ``hard`` is True for attentions that create stochastic nodes in ``sample`` mode.
    """

    hard: bool = False

    def forward(self, memory: Memory, h: torch.Tensor, step: int, mode: str) -> AttentionOut:  # pragma: no cover
        raise NotImplementedError


class FlatAttention(SourceAttention):
    """STANDARD / Model 1: bilinear attention over all words (``mode`` is ignored)."""

    def __init__(self, dec_hidden: int, enc_hidden: int) -> None:
        super().__init__()
        self.w_word = nn.Linear(dec_hidden, enc_hidden, bias=False)  # W_a

    def forward(self, memory: Memory, h: torch.Tensor, step: int, mode: str) -> AttentionOut:
        context, alpha = flat_step(memory.words, memory.word_mask, self.w_word(h))
        per_chunk = alpha.sum(-1)  # (B, M)
        read = memory.chunk_sizes.sum(1)
        return AttentionOut(context, per_chunk, per_chunk, read)


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
        context, _ = hier_step(memory.words, memory.word_mask, probs, self.w_word(h))
        read = memory.chunk_sizes.sum(1)
        return AttentionOut(context, probs, probs, read)

    def forward(self, memory: Memory, h: torch.Tensor, step: int, mode: str) -> AttentionOut:
        return self.soft(memory, h)


class C2FAttention(HierAttention):
    """C2F (Model 3): hard coarse attention, k chunks drawn per step (+MULTI for k > 1).

    Same parameters as :class:`HierAttention` (so +PRETRAIN loads a HIER checkpoint as is).

    Args:
        k: draws per step during training (μ ~ Multinomial(k, α^s), α̃ = μ / k).
        test_k: chunks read at test time (the top ``test_k`` of α^s, renormalized).
    """

    hard = True

    def __init__(self, dec_hidden: int, enc_hidden: int, chunk_dim: int, k: int = 1, test_k: int = 1) -> None:
        super().__init__(dec_hidden, enc_hidden, chunk_dim)
        self.k = k
        self.test_k = test_k

    def _sampler(self, step: int) -> Selector:
        k = self.k

        def draw(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            B, M = logits.shape
            # k i.i.d. draws ℓ_1..ℓ_k ~ α^s: one stochastic node per step, batch shape (B, k);
            # Σ_l log α^s(ℓ_l) is log Multinomial(μ; k, α^s) up to a constant.
            dist = Categorical(logits=logits.unsqueeze(1).expand(B, k, M), validate_args=False)
            idx = scg.sample(dist, name="coarse", step=step)  # (B, k)
            return idx, torch.full((B, k), 1.0 / k, dtype=logits.dtype, device=logits.device)

        return draw

    def _greedy(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k = min(self.test_k, logits.shape[1])
        top = logits.topk(k, dim=1)  # (B, k)
        weights = torch.softmax(top.values, dim=1)  # α^s renormalized over the top k
        return top.indices, weights

    def forward(self, memory: Memory, h: torch.Tensor, step: int, mode: str) -> AttentionOut:
        if mode == "soft":
            return self.soft(memory, h)
        if mode not in MODES:
            raise ValueError(f"attention mode must be one of {MODES}, got {mode!r}")
        assert memory.chunks is not None, "C2F attention needs chunk vectors"
        select = self._sampler(step) if mode == "sample" else self._greedy
        out = c2f_step(memory.chunks, memory.chunk_mask, memory.words, memory.word_mask, self.w_chunk(h),
                       self.w_word(h), select)
        probs = masked_softmax(out.logits, memory.chunk_mask)  # α^s (B, M)
        used = torch.zeros_like(probs).scatter_add(1, out.idx, out.weights)  # α̃ (B, M)
        read = (memory.chunk_sizes * (used > 0).to(h.dtype)).sum(1)  # real words in the distinct chunks read
        return AttentionOut(out.context, probs, used, read, selected=out.idx)


def build_attention(kind: str, *, dec_hidden: int, enc_hidden: int, chunk_dim: int = 0, k: int = 1,
                    test_k: int = 1) -> SourceAttention:
    """The attention of ``model.attention`` = ``kind``."""
    if kind in ("standard", "model1"):
        return FlatAttention(dec_hidden, enc_hidden)
    if kind == "hier":
        return HierAttention(dec_hidden, enc_hidden, chunk_dim)
    if kind == "c2f":
        return C2FAttention(dec_hidden, enc_hidden, chunk_dim, k, test_k)
    raise ValueError(f"unknown attention {kind!r}")
