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
padding).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["EqOneGRUCell", "gru_scan"]


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
        return self._step(xp[:, : 2 * H], xp[:, 2 * H :], h)

    def _step(self, xp_gates: torch.Tensor, xp_cand: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """:meth:`step` from the input halves of the gates ``(B, 2H)`` and of the candidate ``(B, H)``."""
        r, z = torch.sigmoid(xp_gates + self.h_gates(h)).chunk(2, dim=1)  # (B, H) each
        g = torch.tanh(xp_cand + self.h_cand(r * h))  # (B, H)
        return torch.lerp(g, h, z)  # z ⊙ h + (1 − z) ⊙ g

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """h_t = GRU(x_t, h_{t-1}) for ``x`` ``(B, I)`` and ``h`` ``(B, H)``."""
        return self.step(self.project(x), h)


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
        h = torch.where(keeps[t], cell._step(xp_gates[t], xp_cand[t], h), h)
        outs[t] = h
    states = torch.stack(outs, dim=1)  # (B, L, H)
    return states * keep.to(states.dtype)
