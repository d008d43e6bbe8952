"""The GRU of MAL's eq. (1), as a cell and as a masked scan over right-padded sequences.

Li et al. (eq. 1, after Cho et al. 2014)::

    r_t = σ(W_xr x_t + W_hr h_{t-1} + b_r)                  reset gate
    z_t = σ(W_xz x_t + W_hz h_{t-1} + b_z)                  update gate
    g_t = tanh(W_xh x_t + W_hh (r_t ⊙ h_{t-1}) + b_h)
    h_t = z_t ⊙ h_{t-1} + (1 − z_t) ⊙ g_t

This is not ``torch.nn.GRU``: torch applies the reset gate *after* the recurrent product,
``tanh(W x + b + r ⊙ (W_hh h + b_hh))``, and mixes with ``(1 − z) ⊙ g + z ⊙ h``; here the
reset gate multiplies the state before it. The input projections of all steps are one matrix
product (:meth:`EqOneGRUCell.project`); the scan only does the recurrent products.

:func:`gru_scan` runs a cell over ``(B, L, ·)`` inputs with a mask: at padding the state is
carried unchanged and the output is zero, so a real state never depends on padding, in either
direction (the backward scan starts at the last position and keeps ``h0`` through the trailing
padding). :func:`bigru_scan` runs a forward and a backward cell in one loop (the encoder of eq. 2):
the same states as two :func:`gru_scan` calls, half the steps.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["EqOneGRUCell", "bigru_scan", "gru_scan"]


class EqOneGRUCell(nn.Module):
    """One GRU step of eq. (1).

    Args:
        input_size: size of x_t.
        hidden: size of h_t.
    """

    def __init__(self, input_size: int, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.x_proj = nn.Linear(input_size, 3 * hidden)  # [W_xr; W_xz; W_xh] x + [b_r; b_z; b_h]
        self.h_gates = nn.Linear(hidden, 2 * hidden, bias=False)  # [W_hr; W_hz]
        self.h_cand = nn.Linear(hidden, hidden, bias=False)  # W_hh

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """The input half of the gates, ``(..., 3H)``, for any number of steps at once."""
        out: torch.Tensor = self.x_proj(x)
        return out

    def step(self, xp: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """h_t from the projected input ``xp`` ``(B, 3H)`` (:meth:`project`) and h_{t-1} ``(B, H)``."""
        H = self.hidden
        return self.step_halves(xp[:, : 2 * H], xp[:, 2 * H :], h)

    def step_halves(self, xp_gates: torch.Tensor, xp_cand: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """:meth:`step` from the input halves of the gates ``(B, 2H)`` and of the candidate ``(B, H)``. The
        weights' transposes are views taken at each step (`gru_scan` calls this per step): taken once per
        scan, their gradients would be summed in another order, and MAL's documented runs would move in
        their last digits."""
        return _update(xp_gates, xp_cand, h, self.h_gates.weight.T, self.h_cand.weight.T)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """h_t = GRU(x_t, h_{t-1}) for ``x`` ``(B, I)`` and ``h`` ``(B, H)``."""
        return self.step(self.project(x), h)


def _update(
    xp_gates: torch.Tensor, xp_cand: torch.Tensor, h: torch.Tensor, w_gates: torch.Tensor, w_cand: torch.Tensor
) -> torch.Tensor:
    """Eq. (1)'s h_t from the input halves of the gates ``(..., B, 2H)`` and of the candidate ``(..., B, H)``,
    h_{t-1} ``(..., B, H)`` and the recurrent weights, transposed: ``w_gates`` ``(..., H, 2H)`` = [W_hr; W_hz]ᵀ,
    ``w_cand`` ``(..., H, H)`` = W_hhᵀ (a leading dimension: several cells stepped at once, `bigru_scan`)."""
    r, z = torch.sigmoid(xp_gates + h @ w_gates).chunk(2, dim=-1)  # (..., B, H) each
    g = torch.tanh(xp_cand + (r * h) @ w_cand)  # (..., B, H)
    # (under bf16 autocast the products are bf16 and the carried state float32; lerp does not
    # promote, so all three go to the wider type: a no-op in float32)
    dtype = torch.promote_types(g.dtype, h.dtype)
    return torch.lerp(g.to(dtype), h.to(dtype), z.to(dtype))  # z ⊙ h + (1 − z) ⊙ g


def gru_scan(
    cell: EqOneGRUCell, x: torch.Tensor, mask: torch.Tensor, h0: torch.Tensor | None = None, reverse: bool = False
) -> torch.Tensor:
    """The states ``(B, L, H)`` of ``cell`` over ``x`` ``(B, L, I)`` (zero at padding).

    Args:
        cell: the GRU.
        x: the inputs.
        mask: bool ``(B, L)``, True at real steps (padding anywhere is skipped: the state is
            carried over it).
        h0: the initial state ``(B, H)`` (default zero).
        reverse: scan from the last position to the first (the backward direction of eq. 2).
    """
    B, L, _ = x.shape
    H = cell.hidden
    xp = cell.project(x)  # (B, L, 3H)
    h = x.new_zeros(B, H) if h0 is None else h0
    keep = mask.unsqueeze(-1)  # (B, L, 1)
    # each step's views taken at once (three ops, not three a step: the scan is a Python loop of small ops)
    xp_gates, xp_cand, keeps = xp[..., : 2 * H].unbind(1), xp[..., 2 * H :].unbind(1), keep.unbind(1)
    outs: list[torch.Tensor] = [h] * L
    steps = range(L - 1, -1, -1) if reverse else range(L)
    for t in steps:
        h = torch.where(keeps[t], cell.step_halves(xp_gates[t], xp_cand[t], h), h)
        outs[t] = h
    states = torch.stack(outs, dim=1)  # (B, L, H)
    return states * keep.to(states.dtype)


def bigru_scan(
    forward_cell: EqOneGRUCell, backward_cell: EqOneGRUCell, x: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """``gru_scan(forward_cell, x, mask)`` ∥ ``gru_scan(backward_cell, x, mask, reverse=True)``
    ``(B, L, 2H)`` (zero initial states, zero at padding) in one loop of L steps: step i moves the
    forward direction to position i and the backward one to position L − 1 − i, the two directions
    stacked as ``(2, B, ·)`` with their recurrent weights (one batched product per gate)."""
    B, L, _ = x.shape
    H = forward_cell.hidden
    if backward_cell.hidden != H:
        raise ValueError(f"bigru_scan: the cells' hidden sizes differ ({H} and {backward_cell.hidden})")
    # (2, B, L, ·): the backward direction's inputs and mask in scan order (flipped along L)
    xp = torch.stack([forward_cell.project(x), backward_cell.project(x).flip(1)])
    keep = torch.stack([mask, mask.flip(1)]).unsqueeze(-1)  # (2, B, L, 1)
    w_gates = torch.stack([forward_cell.h_gates.weight.T, backward_cell.h_gates.weight.T])  # (2, H, 2H)
    w_cand = torch.stack([forward_cell.h_cand.weight.T, backward_cell.h_cand.weight.T])  # (2, H, H)
    xp_gates, xp_cand, keeps = xp[..., : 2 * H].unbind(2), xp[..., 2 * H :].unbind(2), keep.unbind(2)
    h = x.new_zeros(2, B, H)
    outs: list[torch.Tensor] = []
    for i in range(L):  # both directions' step at once
        h = torch.where(keeps[i], _update(xp_gates[i], xp_cand[i], h, w_gates, w_cand), h)
        outs.append(h)
    states = torch.stack(outs, dim=2)  # (2, B, L, H), the backward direction in scan order
    both = torch.cat([states[0], states[1].flip(1)], dim=-1)  # (B, L, 2H)
    return both * mask.unsqueeze(-1).to(both.dtype)
