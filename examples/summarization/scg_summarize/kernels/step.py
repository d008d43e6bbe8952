"""The per-decoder-step entry points the model calls, and the bridge to scg's stochastic nodes.

* :func:`c2f_attention`: one coarse-to-fine step in one call (``scg_summarize::c2f_attend``: on CUDA two Triton
  kernels and nothing else), with the log-probability of the draws computed when it is read.
* :func:`fused_c2f_read`: a drop-in for ``scg_summarize.models.common.attention.c2f_read`` (same arguments, same
  results), for a model that makes its own selection.
* :class:`KernelDraws`: a score-function estimator whose "draw" is the kernel's ``idx``, so the draws
  become an scg node: ``scg.sample(Categorical(logits=...), estimator=KernelDraws(idx))``.
* :func:`draw_log_prob`: ``log p(idx)`` from ``log_alpha`` for each coarse mode.

Ling & Rush (2017): ``alpha = softmax_i(K_i . q_c)`` over the chunks; ``mu ~ Multinomial(k, alpha)``;
``alpha~ = mu / k``; within each selected chunk ``alpha^w_ij = softmax_j(h_ij . q_w)`` over its real words;
``c = sum_i alpha~_i sum_j alpha^w_ij h_ij``. Draw ``d`` gets weight ``1/k``, so a chunk drawn twice gets
``2/k = mu_i / k``. In ``greedy`` mode (test time) the weights are ``alpha`` renormalised over the ``k``
chosen chunks, as in the model's ``C2FAttention._greedy``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch.distributions import Distribution

from scg import SCGError
from scg.estimators import ScoreFunction

from .ops import c2f_attend, c2f_fine_attend

if TYPE_CHECKING:
    from scg.baselines import Baseline

__all__ = ["FusedC2FStep", "KernelDraws", "c2f_attention", "draw_log_prob", "fused_c2f_read"]


@dataclass(frozen=True, kw_only=True, slots=True)
class FusedC2FStep:
    """The result of :func:`c2f_attention` (``R`` query rows)."""

    context: torch.Tensor
    """``(R, H)``: ``sum_d weights_d sum_j word_attn[:, d, j] h_{idx_d, j}``, differentiable."""
    idx: torch.Tensor
    """``(R, k)`` int64: the chosen chunks (with repeats in ``multinomial`` mode)."""
    weights: torch.Tensor
    """``(R, k)`` in ``log_alpha``'s dtype: each choice's weight (``1/k``, or the renormalised ``alpha`` in
    ``greedy`` mode); no gradient."""
    log_alpha: torch.Tensor
    """``(R, M)``: the masked log-softmax over chunks (``-inf`` at padded chunks), differentiable."""
    word_attn: torch.Tensor
    """``(R, k, N)``: ``alpha^w`` of each chosen chunk (zero at padded words)."""
    mode: str
    """How the chunks were chosen (``multinomial``, ``distinct`` or ``greedy``)."""

    @property
    def log_prob(self) -> torch.Tensor:
        """``(R,)``: ``log p(idx)`` for the score-function term (:func:`draw_log_prob`, computed at each
        read, differentiable through ``log_alpha``); 0 in greedy mode."""
        return draw_log_prob(self.log_alpha, self.idx, self.mode)


def draw_log_prob(log_alpha: torch.Tensor, idx: torch.Tensor, mode: str = "multinomial") -> torch.Tensor:
    """Log-probability of the ordered draws ``idx (R, k)`` under ``log_alpha (R, M)``.

    ``multinomial``: ``sum_d log alpha_{idx_d} = sum_i mu_i log alpha_i``, the multinomial log-pmf of the
    counts minus the constant ``log k! - sum_i log mu_i!`` (same gradient). ``distinct``: the
    Plackett-Luce probability ``sum_d [log alpha_{idx_d} - log sum_{m not in idx_<d} alpha_m]``.
    ``greedy``: zeros (the choice is deterministic).
    """
    if mode == "greedy":
        return log_alpha.new_zeros(idx.shape[0])
    picked = log_alpha.gather(-1, idx)
    k = idx.shape[-1]
    if mode == "multinomial" or k == 1:
        return picked.sum(-1)
    earlier = torch.ones(k, k, dtype=torch.bool, device=idx.device).tril(-1)  # earlier[d, e]: e < d
    onehot = torch.nn.functional.one_hot(idx, log_alpha.shape[-1]).bool()  # (R, k, M)
    taken = (earlier[None, :, :, None] & onehot[:, None, :, :]).any(2)  # (R, k, M): chosen before draw d
    remaining = torch.logsumexp(log_alpha.unsqueeze(1).masked_fill(taken, float("-inf")), dim=-1)
    return (picked - remaining).sum(-1)


def c2f_attention(
    query_coarse: torch.Tensor,
    query_fine: torch.Tensor,
    keys: torch.Tensor,
    chunk_mask: torch.Tensor,
    words: torch.Tensor,
    word_mask: torch.Tensor,
    seed: torch.Tensor,
    k: int = 1,
    mode: str = "multinomial",
    rows: torch.Tensor | None = None,
) -> FusedC2FStep:
    """One coarse-to-fine hard-attention step.

    Args:
        query_coarse: ``(R, D)`` the chunk-level query ``W_s h_t``.
        query_fine: ``(R, H)`` the word-level query ``W_a h_t``.
        keys: ``(B, M, D)`` chunk vectors; ``chunk_mask``: ``(B, M)`` bool, True at real chunks (at
            least one per row).
        words: ``(B, M, N, H)`` word states; ``word_mask``: ``(B, M, N)`` bool, True at real words.
        seed: one-element int64 tensor on the device (the Philox key): the same seed gives the same
            draws on every backend. Use a new seed every step (e.g. ``base + t``); under CUDA graphs
            update it in place before each replay.
        k: number of chunks; ``mode``: ``multinomial`` | ``distinct`` | ``greedy`` (see
            :mod:`.reference`).
        rows: ``(R,)`` encoder row of each query row (beam search: ``R = B * beam``, no copies of the
            memory); None = ``arange(R)``.
    """
    log_alpha, idx, weights, context, word_attn = c2f_attend(
        keys, query_coarse, chunk_mask, words, word_mask, query_fine, seed, k, mode, rows
    )
    return FusedC2FStep(context=context, idx=idx, weights=weights, log_alpha=log_alpha, word_attn=word_attn, mode=mode)


def fused_c2f_read(
    words: torch.Tensor,
    word_mask: torch.Tensor,
    idx: torch.Tensor,
    weights: torch.Tensor,
    q: torch.Tensor,
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``models.attention.c2f_read`` on the kernel path: ``(context (R, H), alpha_w (R, k, N))``.

    ``rows`` ``(R,)``: the encoder row of each query row (beam search), or None (``R = B``).
    """
    context, alpha_w = c2f_fine_attend(words, word_mask, q, idx, weights, rows)
    return context, alpha_w


class KernelDraws(ScoreFunction):
    """A score-function estimator that takes its value from a kernel instead of ``dist.sample()``.

    ``scg.sample(Categorical(logits=log_alpha.unsqueeze(1).expand(R, k, M)), name="coarse", step=t,
    estimator=KernelDraws(idx))`` registers the kernel's draws ``idx (R, k)`` as the node's value, so its
    score term is ``sum_d grad log alpha_{idx_d} (C - b)``, the same node the model builds with
    ``Categorical(...).sample()``. ``idx`` must have been drawn from that distribution
    (``c2f_coarse_sample(..., mode="multinomial")``); nothing checks it.
    """

    def __init__(self, value: torch.Tensor, baseline: Baseline | None = None) -> None:
        super().__init__(baseline)
        self.value = value

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        expected = sample_shape + dist.batch_shape + dist.event_shape
        if self.value.shape != expected:
            raise SCGError(
                f"KernelDraws: value of shape {tuple(self.value.shape)}, but the node expects {tuple(expected)}"
            )
        return self.value.detach()

    def __repr__(self) -> str:
        return f"KernelDraws(shape={tuple(self.value.shape)}, baseline={self.baseline!r})"
