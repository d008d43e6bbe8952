"""The sparse Gumbel relaxations: Gumbel-sparsemax and Gumbel-entmax. Biased.

α-entmax (Peters, Niculae & Martins 2019) maps scores z to the simplex,

    entmax_α(z)_i = [(α − 1) z_i − τ]_+^{1/(α−1)},   τ such that the result sums to one,

softmax as α → 1, sparsemax (Martins & Astudillo 2016, the Euclidean projection onto the simplex)
at α = 2; for α > 1 it is exactly zero on the categories far below the largest. The relaxed sample

    y = entmax_α((log π + G) / t),   G i.i.d. Gumbel(0, 1),

puts its mass on a few categories (often one), so costs evaluated at y are closer to those at the
discrete sample than with softmax at the same temperature t. Like every relaxation it
differentiates the relaxed objective E[f(y)], not E[f(D)] (biased unless f is linear on the
simplex); ``hard=True`` is the straight-through form (value one_hot(argmax y), gradient ∇y).

Sparsemax is computed exactly (sort and threshold); 1.5-entmax (``GumbelEntmax``'s default α) and
any other α > 1 by bisection on τ, in the input's dtype to machine precision, with the gradient
from the closed-form Jacobian ∂y/∂z = diag(s) − s sᵀ / Σ s, s_i = y_i^{2−α} on the support (first
derivatives only, which is all a relaxation promises). The bias of both against exact enumeration
as the temperature varies is measured by ``python benchmarks/estimators.py --bias``
(docs/estimators.md).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.distributions import Distribution, OneHotCategorical

from scg.errors import SCGError
from scg.estimators.relax import uniform
from scg.estimators.relaxed import GumbelSoftmax

__all__ = ["GumbelEntmax", "GumbelSparsemax", "entmax_bisect", "sparsemax"]


def sparsemax(z: torch.Tensor) -> torch.Tensor:
    """The Euclidean projection of ``z`` onto the simplex along the last dimension."""
    srt, _ = z.sort(-1, descending=True)
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype, device=z.device)
    cums = srt.cumsum(-1)
    support = (1.0 + k * srt > cums).to(z.dtype).sum(-1, keepdim=True)  # how many are positive
    tau = (cums.gather(-1, support.long() - 1) - 1.0) / support
    return (z - tau).clamp_min(0.0)


def entmax_bisect(z: torch.Tensor, alpha: float = 1.5, *, iterations: int = 60) -> torch.Tensor:
    """α-entmax of ``z`` along the last dimension (α > 1), τ found by bisection.

    With x = (α − 1) z, τ lies in [max x − 1, max x − K^{1−α}] (the largest entry alone, or all K
    equal): each iteration halves that interval, so 60 reach float64's resolution. The value is
    renormalised to sum to one; the gradient is the Jacobian's, not bisection's.
    """
    if not alpha > 1.0:
        raise SCGError(f"entmax_bisect(alpha=...): expected α > 1 (α = 1 is softmax), got {alpha!r}")
    power = 1.0 / (alpha - 1.0)
    with torch.no_grad():
        x = (alpha - 1.0) * z.detach()
        top = x.max(-1, keepdim=True).values
        lo, hi = top - 1.0, top - math.pow(z.shape[-1], 1.0 - alpha)
        for _ in range(iterations):
            tau = (lo + hi) / 2
            total = (x - tau).clamp_min(0.0).pow(power).sum(-1, keepdim=True)
            lo = torch.where(total >= 1.0, tau, lo)
            hi = torch.where(total >= 1.0, hi, tau)
        y = (x - (lo + hi) / 2).clamp_min(0.0).pow(power)
        y = y / y.sum(-1, keepdim=True)
        s = torch.where(y > 0, y.pow(2.0 - alpha), torch.zeros_like(y))
    if not z.requires_grad:
        return y
    dz = z - z.detach()  # zero in value; its gradient flows through the Jacobian
    return y + s * dz - s * (s * dz).sum(-1, keepdim=True) / s.sum(-1, keepdim=True)


class GumbelSparsemax(GumbelSoftmax):
    """Gumbel-sparsemax relaxation of OneHotCategorical nodes (biased).

    Args:
        temperature: t > 0.
        hard: straight-through: the value is the discrete sample, the gradient the relaxed one.
    """

    def project(self, scores: torch.Tensor) -> torch.Tensor:
        """The map onto the simplex applied to (log π + G) / t."""
        return sparsemax(scores)

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        if not isinstance(dist, OneHotCategorical):
            raise SCGError(f"{type(self).__name__}() relaxes OneHotCategorical nodes, not {type(dist).__name__}")
        logits = dist.logits.expand(sample_shape + dist.batch_shape + dist.event_shape)
        temp = torch.as_tensor(self.temperature, dtype=logits.dtype, device=logits.device)
        gumbel = -torch.log(-torch.log(uniform(logits.shape, logits)))
        y = self.project((logits + gumbel) / temp)
        if not self.hard:
            return y
        return F.one_hot((logits + gumbel).argmax(-1), y.shape[-1]).to(y.dtype) + (y - y.detach())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(temperature={self.temperature!r}, hard={self.hard})"


class GumbelEntmax(GumbelSparsemax):
    """Gumbel-entmax relaxation of OneHotCategorical nodes (biased; α = 1.5 by default).

    Args:
        temperature: t > 0.
        alpha: the entmax α > 1 (2 is sparsemax, computed here by bisection).
        hard: straight-through: the value is the discrete sample, the gradient the relaxed one.
    """

    def __init__(self, temperature: float | torch.Tensor, *, alpha: float = 1.5, hard: bool = False) -> None:
        super().__init__(temperature, hard=hard)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha <= 1:
            raise SCGError(f"GumbelEntmax(alpha=...): expected a finite number > 1, got {alpha!r}")
        self.alpha = float(alpha)

    def project(self, scores: torch.Tensor) -> torch.Tensor:
        return entmax_bisect(scores, self.alpha)

    def __repr__(self) -> str:
        return f"GumbelEntmax(temperature={self.temperature!r}, alpha={self.alpha}, hard={self.hard})"
