"""Gumbel-sparsemax: the Gumbel relaxation with sparsemax instead of softmax. Biased.

Sparsemax (Martins & Astudillo 2016) is the Euclidean projection onto the simplex,
sparsemax(z) = max(z − τ(z), 0) with the threshold τ(z) making the result sum to one: it is
exactly zero on the categories far below the largest, so the relaxed sample

    y = sparsemax((log π + G) / t),   G i.i.d. Gumbel(0, 1),

puts its mass on a few categories (often one), and costs evaluated at y are closer to those at
the discrete sample than with softmax at the same temperature t. Like every relaxation it
differentiates the relaxed objective E[f(y)], not E[f(D)] (biased unless f is linear on the
simplex); ``hard=True`` is its straight-through form (value one_hot(argmax y), gradient ∇y).
Sparsemax is 2-entmax; other entmax members (1.5-entmax) are not provided.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.distributions import Distribution, OneHotCategorical

from scg.errors import SCGError
from scg.estimators.relax import uniform
from scg.estimators.relaxed import GumbelSoftmax

__all__ = ["GumbelSparsemax", "sparsemax"]


def sparsemax(z: torch.Tensor) -> torch.Tensor:
    """The Euclidean projection of ``z`` onto the simplex along the last dimension."""
    srt, _ = z.sort(-1, descending=True)
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype, device=z.device)
    cums = srt.cumsum(-1)
    support = (1.0 + k * srt > cums).to(z.dtype).sum(-1, keepdim=True)  # how many are positive
    tau = (cums.gather(-1, support.long() - 1) - 1.0) / support
    return (z - tau).clamp_min(0.0)


class GumbelSparsemax(GumbelSoftmax):
    """Gumbel-sparsemax relaxation of OneHotCategorical nodes (biased).

    Args:
        temperature: t > 0.
        hard: straight-through: the value is the discrete sample, the gradient the relaxed one.
    """

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        if not isinstance(dist, OneHotCategorical):
            raise SCGError(f"GumbelSparsemax() relaxes OneHotCategorical nodes, not {type(dist).__name__}")
        logits = dist.logits.expand(sample_shape + dist.batch_shape + dist.event_shape)
        temp = torch.as_tensor(self.temperature, dtype=logits.dtype, device=logits.device)
        gumbel = -torch.log(-torch.log(uniform(logits.shape, logits)))
        y = sparsemax((logits + gumbel) / temp)
        if not self.hard:
            return y
        return F.one_hot((logits + gumbel).argmax(-1), y.shape[-1]).to(y.dtype) + (y - y.detach())

    def __repr__(self) -> str:
        return f"GumbelSparsemax(temperature={self.temperature!r}, hard={self.hard})"
