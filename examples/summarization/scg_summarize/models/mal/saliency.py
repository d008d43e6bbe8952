"""Supervised attention learning (Li et al., Section 2.2, eq. 7-9) and its loss L_s (eq. 19).

A classifier predicts, for every source word, whether it appears in the summary::

    r̂_t = σ(W_xr x_t + W_hr h^e_t + W_cr c^e_t + W_h̄r h̄^e_t + b^e_r)        (7)
    a^s_i = exp(r̂_i) / Σ_j exp(r̂_j)                                        (8)
    c^s = Σ_j a^s_j h^e_j                                                    (9)
    L_s = −(1/m) Σ_i [r_i log r̂_i + (1 − r_i) log(1 − r̂_i)]                  (19)

with labels r from :mod:`scg_summarize.data.saliency_labels`.

**Near-uniform a^s.** r̂ lies in (0, 1), so eq. (8) is a softmax of values whose spread is
below 1: max_i a^s_i / min_i a^s_i < e, whatever the classifier learns. Even at the extreme
(one word at r̂ → 1, all others at r̂ → 0) the normalized entropy H(a^s) / log m is 0.986 for
m = 20 words, 0.995 for m = 50 and 0.998 for m = 100 (:func:`entropy_floor`).
:class:`SupervisedAttention` therefore takes a temperature τ_s, a^s = softmax(r̂ / τ_s); τ_s = 1
is the paper. :func:`normalized_entropy` measures it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .encoder import SelfAttention, masked_softmax

__all__ = ["SaliencyOut", "SupervisedAttention", "entropy_floor", "normalized_entropy", "saliency_loss"]


def normalized_entropy(weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """H(a) / log m per row of ``weights`` ``(B, L)`` over its ``m`` real positions ``mask``:
    1 for a uniform distribution, 0 for a one-hot one (rows with m ≤ 1 give 0)."""
    p = weights.double().clamp(min=0) * mask
    ent = -(p * torch.where(p > 0, p.log(), torch.zeros_like(p))).sum(-1)  # (B,)
    m = mask.sum(-1).double()
    return torch.where(m > 1, ent / m.clamp(min=2).log(), torch.zeros_like(ent)).to(weights.dtype)


@dataclass
class SaliencyOut:
    """The supervised attention of one batch.

    Attributes:
        logits: ``(B, L)``: r̂ = σ(logits) (eq. 7).
        probs: r̂ ``(B, L)``, 0 at padding.
        weights: a^s ``(B, L)`` (eq. 8; with the temperature), 0 at padding.
        context: c^s ``(B, 2k_h)`` (eq. 9).
    """

    logits: torch.Tensor
    probs: torch.Tensor
    weights: torch.Tensor
    context: torch.Tensor


class SupervisedAttention(nn.Module):
    """The self-attention (eq. 4-6), the saliency classifier (eq. 7) and a^s, c^s (eq. 8-9).

    Args:
        emb_dim: k_e.
        state_dim: 2k_h, the size of h^e.
        attn_dim: k_h, the self-attention's tanh layer.
        temperature: τ_s in a^s = softmax(r̂ / τ_s) (1 = eq. 8).
    """

    def __init__(self, emb_dim: int, state_dim: int, attn_dim: int, temperature: float = 1.0) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature!r}")
        self.self_attention = SelfAttention(state_dim, attn_dim)
        # [W_xr, W_hr, W_cr, W_h̄r] and b^e_r as one layer over the concatenation
        self.classifier = nn.Linear(emb_dim + 3 * state_dim, 1)
        self.temperature = float(temperature)

    def forward(self, x: torch.Tensor, h: torch.Tensor, mask: torch.Tensor) -> SaliencyOut:
        """From embeddings ``x`` ``(B, L, k_e)``, states h^e ``(B, L, 2k_h)`` and ``mask`` ``(B, L)``."""
        att = self.self_attention(h, mask)
        features = torch.cat([x, h, att.context, att.revised], dim=-1)  # (B, L, k_e + 6k_h)
        logits = self.classifier(features).squeeze(-1)  # (B, L)
        real = mask.to(h.dtype)
        probs = torch.sigmoid(logits) * real  # r̂ (eq. 7)
        weights = masked_softmax(probs / self.temperature, mask)  # a^s (eq. 8)
        context = torch.bmm(weights.unsqueeze(1), h).squeeze(1)  # c^s (eq. 9), (B, 2k_h)
        return SaliencyOut(logits, probs, weights, context)


def saliency_loss(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """L_s per document ``(B,)`` (eq. 19): the binary cross-entropy of r̂ = σ(logits) against
    ``labels`` ``(B, L)``, averaged over each document's m real words (computed from the logits,
    so it stays finite when r̂ saturates)."""
    bce = F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype), reduction="none")  # (B, L)
    real = mask.to(logits.dtype)
    return (bce * real).sum(-1) / real.sum(-1).clamp(min=1.0)


def entropy_floor(m: int) -> float:
    """The smallest normalized entropy a^s can have with τ_s = 1 on ``m`` words (one word at
    r̂ → 1, the others at r̂ → 0): the bound quoted in the module docstring."""
    if m < 2:
        return 0.0
    z = math.e + (m - 1)
    p_hi, p_lo = math.e / z, 1.0 / z
    ent = -(p_hi * math.log(p_hi) + (m - 1) * p_lo * math.log(p_lo))
    return ent / math.log(m)
