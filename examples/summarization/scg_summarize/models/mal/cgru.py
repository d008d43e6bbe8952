"""MAL's decoder: a two-layer conditional GRU with additive attention (Li et al., eq. 14-16).

Section 2.4::

    h^{d1}_0 = h^{d2}_0 = (1/m) Σ_t h^e_t                         (the mean encoder state)
    h^{d1}_t = GRU_1(y_{t-1}, h^{d1}_{t-1})                        (14)
    e_tj = vᵀ tanh(W^d_hh h^{d1}_t + W^e_hh h^e_j + b_a)
    a^d_tj = softmax_j(e_tj),   c^d_t = Σ_j a^d_tj h^e_j              (15)
    h^{d2}_t = GRU_2(y_{t-1}, h^{d2}_{t-1}, c^d_t)                  (16)

Both GRUs are eq. (1) (:class:`~.gru.EqOneGRUCell`); GRU_2's input is [y_{t-1}; c^d_t]. Read
literally, the two layers keep separate states (h^{d2}_{t-1} in eq. 16 is GRU_2's own
previous state, not h^{d1}_t as in Nematus' cGRU) and both start from the mean encoder state,
so the decoder state has the encoder's size 2k_h.

Under teacher forcing nothing in GRU_1 depends on the attention, so :meth:`ConditionalGRU.forward`
runs GRU_1 over all steps, the attention of all steps in one batched product, then GRU_2: the
same numbers as stepping (:meth:`ConditionalGRU.step`, used by beam search), which a test
checks against a step-by-step reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .encoder import masked_softmax
from .gru import EqOneGRUCell, gru_scan

__all__ = ["CGRUOut", "ConditionalGRU", "DecoderMemory", "mean_state"]


def mean_state(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(1/m) Σ_t h^e_t over each document's m real positions: ``(B, S)`` from ``(B, L, S)``."""
    real = mask.to(h.dtype).unsqueeze(-1)  # (B, L, 1)
    return (h * real).sum(1) / real.sum(1).clamp(min=1.0)


@dataclass
class DecoderMemory:
    """What the attention reads, one row per example.

    Attributes:
        states: h^e ``(B, L, S)``.
        mask: bool ``(B, L)``, real source positions.
        keys: W^e_hh h^e_j + b_a ``(B, L, A)`` (computed once per document).
    """

    states: torch.Tensor
    mask: torch.Tensor
    keys: torch.Tensor

    def rows(self, example: torch.Tensor) -> DecoderMemory:
        """The memory of the examples ``example`` ``(R,)`` (one row per hypothesis)."""
        return DecoderMemory(self.states[example], self.mask[example], self.keys[example])


@dataclass
class CGRUOut:
    """Teacher-forced decoder outputs.

    Attributes:
        top: h^{d2}_t ``(B, T, S)`` (zero at padding steps).
        attention: a^d ``(B, T, L)``.
    """

    top: torch.Tensor
    attention: torch.Tensor


class ConditionalGRU(nn.Module):
    """GRU_1, the attention of eq. (15) and GRU_2.

    Args:
        emb_dim: size of the target embeddings y.
        state_dim: S = 2k_h, the size of h^e and of both decoder states.
        attn_dim: A, the attention's tanh layer.
    """

    def __init__(self, emb_dim: int, state_dim: int, attn_dim: int) -> None:
        super().__init__()
        self.gru1 = EqOneGRUCell(emb_dim, state_dim)
        self.gru2 = EqOneGRUCell(emb_dim + state_dim, state_dim)
        self.w_query = nn.Linear(state_dim, attn_dim, bias=False)  # W^d_hh
        self.w_key = nn.Linear(state_dim, attn_dim)  # W^e_hh with b_a
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def memory(self, states: torch.Tensor, mask: torch.Tensor) -> DecoderMemory:
        """The attention memory of the encoder states ``(B, L, S)``."""
        return DecoderMemory(states, mask, self.w_key(states))

    def attend(self, query: torch.Tensor, memory: DecoderMemory) -> tuple[torch.Tensor, torch.Tensor]:
        """a^d and c^d (eq. 15) for queries h^{d1} ``(B, T, S)`` → ``(B, T, L)``, ``(B, T, S)``."""
        q = self.w_query(query).unsqueeze(2)  # (B, T, 1, A)
        scores = self.v(torch.tanh(q + memory.keys.unsqueeze(1))).squeeze(-1)  # (B, T, L)
        weights = masked_softmax(scores, memory.mask.unsqueeze(1))  # (B, T, L)
        return weights, torch.bmm(weights, memory.states)

    def forward(self, y: torch.Tensor, mask: torch.Tensor, memory: DecoderMemory, h0: torch.Tensor) -> CGRUOut:
        """Teacher forcing over the previous words ``y`` ``(B, T, E)`` (real steps ``mask`` ``(B, T)``)."""
        h1 = gru_scan(self.gru1, y, mask, h0)  # (B, T, S), eq. (14)
        weights, context = self.attend(h1, memory)  # (B, T, L), (B, T, S), eq. (15)
        h2 = gru_scan(self.gru2, torch.cat([y, context], dim=-1), mask, h0)  # (B, T, S), eq. (16)
        return CGRUOut(h2, weights)

    def step(
        self, y: torch.Tensor, h1: torch.Tensor, h2: torch.Tensor, memory: DecoderMemory
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step for ``R`` rows: ``y`` ``(R, E)``, states ``(R, S)``, ``memory`` with R rows.

        Returns h^{d1}_t, h^{d2}_t ``(R, S)`` and a^d_t ``(R, L)``.
        """
        h1 = self.gru1(y, h1)  # eq. (14)
        weights, context = self.attend(h1.unsqueeze(1), memory)  # (R, 1, L), (R, 1, S)
        h2 = self.gru2(torch.cat([y, context.squeeze(1)], dim=-1), h2)  # eq. (16)
        return h1, h2, weights.squeeze(1)
