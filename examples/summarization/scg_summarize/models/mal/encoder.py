"""MAL's encoder: the bidirectional GRU (eq. 1-3) and the additive self-attention (eq. 4-6).

Li et al., Section 2.2::

    →h_t = GRU(x_t, →h_{t-1}),   ←h_t = GRU(x_t, ←h_{t+1})                      (2)
    h^e_t = →h_t ∥ ←h_t ∈ R^{2k_h}                                              (3)
    e_ij = v_eᵀ tanh(W^e_hi h^e_i + W^e_hj h^e_j + b_a),  a^e_ij = softmax_j(e_ij)   (4)
    c^e_t = Σ_j a^e_tj h^e_j                                                     (5)
    h̄^e_t = tanh(W^e_hh̄ h^e_t + W^e_ch̄ c^e_t + b^e_h̄)                          (6)

The source is a flat, right-padded sequence ``(B, L)``; padding never affects a real state
(:func:`~.gru.bigru_scan`) and gets no self-attention weight. The self-attention scores are
``(B, L, L, k_h)``: quadratic in the source length (``MALConfig.max_src_len``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .gru import EqOneGRUCell, bigru_scan

__all__ = ["BiGRUEncoder", "SelfAttention", "SelfAttentionOut", "masked_softmax"]


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """softmax of ``scores`` over ``dim`` restricted to ``mask`` (0 elsewhere; an all-masked
    row gives zeros, not NaN)."""
    filled = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(filled, dim=dim).nan_to_num(0.0)


class BiGRUEncoder(nn.Module):
    """h^e_t = →h_t ∥ ←h_t (eq. 2-3) with the GRU of eq. (1) in each direction.

    Args:
        emb_dim: k_e.
        hidden: k_h per direction.
    """

    def __init__(self, emb_dim: int, hidden: int) -> None:
        super().__init__()
        self.forward_cell = EqOneGRUCell(emb_dim, hidden)
        self.backward_cell = EqOneGRUCell(emb_dim, hidden)
        self.out_dim = 2 * hidden

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The states h^e ``(B, L, 2k_h)`` (zero at padding) of embeddings ``x`` ``(B, L, k_e)``."""
        return bigru_scan(self.forward_cell, self.backward_cell, x, mask)  # →h ∥ ←h, each (B, L, k_h)


@dataclass
class SelfAttentionOut:
    """The self-attention of eq. (4-6).

    Attributes:
        weights: a^e ``(B, L, L)``, row t the distribution over the source words j (eq. 4).
        context: c^e ``(B, L, 2k_h)`` (eq. 5).
        revised: h̄^e ``(B, L, 2k_h)`` (eq. 6).
    """

    weights: torch.Tensor
    context: torch.Tensor
    revised: torch.Tensor


class SelfAttention(nn.Module):
    """Additive self-attention over the encoder states (eq. 4-6).

    Args:
        state_dim: 2k_h, the size of h^e.
        attn_dim: k_h, the size of the tanh layer of eq. (4).
    """

    def __init__(self, state_dim: int, attn_dim: int) -> None:
        super().__init__()
        self.w_i = nn.Linear(state_dim, attn_dim)  # W^e_hi (with b_a)
        self.w_j = nn.Linear(state_dim, attn_dim, bias=False)  # W^e_hj
        self.v = nn.Linear(attn_dim, 1, bias=False)  # v_e
        self.w_h = nn.Linear(state_dim, state_dim)  # W^e_hh̄ (with b^e_h̄)
        self.w_c = nn.Linear(state_dim, state_dim, bias=False)  # W^e_ch̄

    def forward(self, h: torch.Tensor, mask: torch.Tensor) -> SelfAttentionOut:
        """Self-attention of the states ``h`` ``(B, L, 2k_h)`` with real positions ``mask`` ``(B, L)``."""
        query = self.w_i(h).unsqueeze(2)  # (B, L, 1, k_h)
        key = self.w_j(h).unsqueeze(1)  # (B, 1, L, k_h)
        scores = self.v(torch.tanh(query + key)).squeeze(-1)  # (B, L, L)
        pair = mask.unsqueeze(2) & mask.unsqueeze(1)  # (B, L, L)
        weights = masked_softmax(scores, pair)  # (B, L, L)
        context = torch.bmm(weights, h)  # (B, L, 2k_h)
        revised = torch.tanh(self.w_h(h) + self.w_c(context)) * mask.unsqueeze(-1).to(h.dtype)  # (B, L, 2k_h)
        return SelfAttentionOut(weights, context, revised)
