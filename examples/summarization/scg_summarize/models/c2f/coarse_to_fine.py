"""C2F (Model 3, Ling & Rush 2017, Section 4.3): hard coarse attention over chunks, soft
attention inside the chunks read.

At decoder step t, with chunk vectors u_i and word states h_ij (see :mod:`.attention`):

    β^s_i = u_iᵀ W_s h_t,   ℓ_1..ℓ_k ~ Categorical(softmax(β^s))   (k > 1 is +MULTI: α̃ = μ / k)
    α_ij  = α̃_i softmax_j(h_ijᵀ W_a h_t)   for the drawn chunks only,   c̃_t = Σ_ij α_ij h_ij.

The draws are stochastic nodes of an scg graph (``scg.sample(Categorical(α^s), name="coarse",
step=t)``), trained by the score-function estimator through ``Graph.surrogate_loss``. At test time
C2F reads the argmax chunk (or the top-``test_k``, weighted by their renormalized α^s).

Cost per step: O(B·M·D) for the coarse scores plus O(B·k·N·H) for the fine read, independent of
the M·N word states that soft attention touches. The step goes through
:mod:`scg_summarize.kernels` (imported lazily): the fine read is ``kernels.fused_c2f_read`` (the
``scg_summarize::c2f_fine_attend`` op: Triton on CUDA tensors, the PyTorch reference otherwise;
``SCG_KERNELS`` forces either), and on the Triton backend the coarse scores and the choice are one
``scg_summarize::c2f_coarse_sample`` kernel too (:func:`c2f_kernel_step`), whose draws enter the graph as the
same ``"coarse"`` node through ``kernels.KernelDraws``. On the reference backend the draws are
``Categorical(α^s).sample()``, so CPU runs are those of :func:`c2f_read` in plain torch.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.distributions import Categorical

import scg

from ...kernels import KernelDraws, c2f_coarse_sample, choose, fused_c2f_read
from ..common.attention import (
    MODES,
    AttentionOut,
    HierAttention,
    Memory,
    Mode,
    masked_logits,
    masked_softmax,
    per_query_row,
)

__all__ = ["C2FAttention", "C2FStep", "c2f_kernel_step", "c2f_read", "c2f_step", "fine_read"]


def c2f_read(
    words: torch.Tensor, word_mask: torch.Tensor, idx: torch.Tensor, weights: torch.Tensor, q: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
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


def fine_read(
    words: torch.Tensor,
    word_mask: torch.Tensor,
    idx: torch.Tensor,
    weights: torch.Tensor,
    q: torch.Tensor,
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`c2f_read` through the kernels' dispatcher (``kernels.fused_c2f_read``): the Triton
    kernel on CUDA tensors, the PyTorch reference (the same math as :func:`c2f_read`) otherwise.

    ``rows`` ``(R,)``: the example (row of ``words``) each query row reads, or None (R = B); the
    selected word states are indexed in place, never copied per row.
    """
    return fused_c2f_read(words, word_mask, idx, weights, q, rows=rows)


def c2f_step(
    chunks: torch.Tensor,
    chunk_mask: torch.Tensor,
    words: torch.Tensor,
    word_mask: torch.Tensor,
    q_chunk: torch.Tensor,
    q_word: torch.Tensor,
    select: Selector,
    rows: torch.Tensor | None = None,
) -> C2FStep:
    """One C2F attention step: coarse scores over M chunk vectors, selection, fine attention in
    the selected chunks.

    Args:
        chunks: u ``(B, M, D)``; chunk_mask ``(B, M)``.
        words: ``(B, M, N, H)``; word_mask ``(B, M, N)`` (only selected rows are read).
        q_chunk: ``W_s h_t`` ``(R, D)``; q_word: ``W_a h_t`` ``(R, H)``.
        select: maps the masked coarse logits to ``(idx, weights)``; training passes a function
            that draws through ``scg.sample``, test time the argmax / top-k.
        rows: ``(R,)`` the example of each query row (beam search: R = B · beam rows share the
            B encoded examples), or None (R = B).

    Cost: O(R·M·D) for the coarse scores plus O(R·k·N·H) for the fine read (:func:`fine_read`).
    """
    chunks, chunk_mask = per_query_row(chunks, rows), per_query_row(chunk_mask, rows)  # (R, M, D), (R, M)
    logits = masked_logits(torch.bmm(chunks, q_chunk.unsqueeze(2)).squeeze(2), chunk_mask)  # (R, M)  β^s
    idx, weights = select(logits)  # (R, k), (R, k)
    context, alpha_w = fine_read(words, word_mask, idx, weights, q_word, rows)  # (R, H), (R, k, N)
    return C2FStep(context, logits, idx, weights, alpha_w)


def c2f_kernel_step(
    chunks: torch.Tensor,
    chunk_mask: torch.Tensor,
    words: torch.Tensor,
    word_mask: torch.Tensor,
    q_chunk: torch.Tensor,
    q_word: torch.Tensor,
    *,
    k: int,
    mode: Mode,
    step: int,
    rows: torch.Tensor | None = None,
) -> C2FStep:
    """:func:`c2f_step` with the coarse half in one kernel as well (``scg_summarize::c2f_coarse_sample``).

    The kernel computes log α^s = log softmax_i β^s_i over the real chunks and chooses:

    * ``mode="sample"``: k i.i.d. Gumbel-max draws ℓ_d = argmax_i (β^s_i + g_di), i.e.
      ℓ_d ~ α^s, with Philox noise keyed by a seed drawn from torch's generator (so
      ``torch.manual_seed`` makes runs reproducible). The draws become the scg node
      ``scg.sample(Categorical(α^s) over (R, k), name="coarse", step=step)`` through
      ``kernels.KernelDraws``: the node the reference path builds, with the kernel's value; its
      score term is Σ_d ∇ log α^s(ℓ_d) (Ĉ − b). Weights 1/k.
    * ``mode="greedy"``: the top ``min(k, M)`` chunks of α^s, weighted by α^s renormalized over
      them (as :meth:`C2FAttention._greedy`).

    Arguments as :func:`c2f_step` (``k`` draws or chunks read). Returns the logits as log α^s
    with padding chunks at the dtype's minimum, so ``masked_softmax(logits)`` is α^s.
    """
    if mode not in ("sample", "greedy"):
        raise ValueError(f"c2f_kernel_step: mode must be 'sample' or 'greedy', got {mode!r}")
    R, M = q_chunk.shape[0], chunks.shape[1]
    if mode == "sample":
        seed = torch.randint(0, 2**62, (1,), device=q_chunk.device)  # the Philox key of this step's draws
        log_alpha, drawn = c2f_coarse_sample(chunks, q_chunk, chunk_mask, seed, k, "multinomial", rows)
    else:
        seed = torch.zeros(1, dtype=torch.int64, device=q_chunk.device)  # unused: no noise
        log_alpha, drawn = c2f_coarse_sample(chunks, q_chunk, chunk_mask, seed, min(k, M), "greedy", rows)
    logits = masked_logits(log_alpha.to(q_chunk.dtype), per_query_row(chunk_mask, rows))  # (R, M)  log α^s
    if mode == "sample":
        dist = Categorical(logits=logits.unsqueeze(1).expand(R, k, M), validate_args=False)
        idx = scg.sample(dist, name="coarse", step=step, estimator=KernelDraws(drawn))  # (R, k)
        weights = torch.full((R, k), 1.0 / k, dtype=logits.dtype, device=logits.device)
    else:
        idx = drawn  # (R, k')
        weights = torch.softmax(logits.gather(1, idx), dim=1)  # α^s renormalized over the chosen chunks
    context, alpha_w = fine_read(words, word_mask, idx, weights, q_word, rows)  # (R, H), (R, k, N)
    return C2FStep(context, logits, idx, weights, alpha_w)


class C2FAttention(HierAttention):
    """C2F (Model 3): hard coarse attention, k chunks drawn per step (+MULTI for k > 1).

    Same parameters as :class:`HierAttention` (so +PRETRAIN loads a HIER checkpoint as is).

    Args:
        k: draws per step during training (μ ~ Multinomial(k, α^s), α̃ = μ / k).
        test_k: chunks read at test time (the top ``test_k`` of α^s, renormalized).
    """

    hard = True
    #: Hard modes accept a memory with a ``rows`` index (beam search without per-hypothesis copies).
    reads_rows = True

    def __init__(self, dec_hidden: int, enc_hidden: int, chunk_dim: int, k: int = 1, test_k: int = 1) -> None:
        super().__init__(dec_hidden, enc_hidden, chunk_dim)
        self.k = k
        self.test_k = test_k

    def with_test_k(self, test_k: int) -> C2FAttention:
        """This attention (the same parameters) reading the top ``test_k`` chunks at test time;
        ``self`` is unchanged."""
        view = copy.copy(self)  # its own attribute table; parameters and children shared
        view.test_k = test_k
        return view

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

    def forward(self, memory: Memory, h: torch.Tensor, step: int, mode: Mode) -> AttentionOut:
        """One step. A ``memory`` with ``rows`` ``(R,)`` (beam search, see
        ``decoding.adapters``) keeps one row per example; query row r reads example ``rows[r]``
        (hard modes only; the word states are indexed, never copied)."""
        rows = memory.rows
        if mode == "soft":
            if rows is not None:
                raise ValueError("soft attention needs one memory row per query row (no rows index)")
            return self.soft(memory, h)
        if mode not in MODES:
            raise ValueError(f"attention mode must be one of {MODES}, got {mode!r}")
        assert memory.chunks is not None, "C2F attention needs chunk vectors"
        q_chunk, q_word = self.w_chunk(h), self.w_word(h)  # (R, D), (R, H)
        if choose(h.device) == "triton":
            k = self.k if mode == "sample" else self.test_k
            out = c2f_kernel_step(
                memory.chunks,
                memory.chunk_mask,
                memory.words,
                memory.word_mask,
                q_chunk,
                q_word,
                k=k,
                mode=mode,
                step=step,
                rows=rows,
            )
        else:
            select = self._sampler(step) if mode == "sample" else self._greedy
            out = c2f_step(
                memory.chunks, memory.chunk_mask, memory.words, memory.word_mask, q_chunk, q_word, select, rows
            )
        chunk_mask = per_query_row(memory.chunk_mask, rows)  # (R, M)
        chunk_sizes = per_query_row(memory.chunk_sizes, rows)  # (R, M)
        probs = masked_softmax(out.logits, chunk_mask)  # α^s (R, M)
        # (CUDA autocast computes the softmax in float32 while the weights keep the logits' bfloat16)
        used = torch.zeros_like(probs).scatter_add(1, out.idx, out.weights.to(probs.dtype))  # α̃ (R, M)
        read = (chunk_sizes * (used > 0).to(h.dtype)).sum(1)  # real words in the distinct chunks read
        read_weights = out.weights.unsqueeze(-1) * out.alpha_w  # (R, k, N)
        return AttentionOut(out.context, probs, used, read, selected=out.idx, read_weights=read_weights)
