"""Measure-valued derivatives (Pflug 1989; Mohamed, Rosca, Figurnov & Mnih 2020, Section 6).

The derivative of a density in one of its parameters is a signed measure, the difference of two
probability densities times a constant: ∂_θ p(x; θ) = c_θ (p⁺(x) − p⁻(x)). So

    ∂_θ E_p[f(x)] = c_θ (E_{p⁺}[f(x⁺)] − E_{p⁻}[f(x⁻)]),

estimated by evaluating f at a point of each. f is never differentiated: it may be a step
function, a simulator or a black box, where the pathwise gradient is zero or undefined.

* Normal(μ, σ): ∂_μ: c = 1/(σ√(2π)), x^± = μ ± σR with R Rayleigh (one R for both: coupled);
  ∂_σ: c = 1/σ, p⁺ the double-sided Maxwell μ + σM, p⁻ the Normal itself.
* Bernoulli(p): ∂_p E f = f(1) − f(0) (c = 1, p⁺ = δ₁, p⁻ = δ₀).

In scg the node *enumerates* its evaluation points: ``scg.sample(Normal(μ, σ),
estimator=MeasureValued())`` returns ``(4, *batch)`` values, [x, μ + σR, μ − σR, μ + σM] with x an
ordinary sample, and ``(3, *batch)`` values [x, 1, 0] for a Bernoulli. Every cost computed from
them carries that dimension and is weighted by ω (`MeasureValued.weights`): ω = (1, 0, 0, 0)
in value, so the objective, and the learning signal of every other node, come from the ordinary
sample x alone; the gradients of ω are the constants above times ∇μ, ∇σ (∇p), so the gradient of
the weighted costs is the measure-valued estimate. Each batch element is perturbed at once, which
is exact under scg's convention that batch elements are independent examples; a cost that mixes
them is refused (as for ``Enumerate``). The cost of one estimate is 4 (3) evaluations per node.
No baseline (there is no score term); no higher derivatives (``dice=True``: the weights'
derivatives of order two are not estimates).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

import torch
from torch.distributions import Bernoulli, Distribution, Normal

from scg.errors import SCGError
from scg.estimators.base import Estimator

if TYPE_CHECKING:
    from scg.graph.nodes import StochasticNode

__all__ = ["MeasureValued"]


class MeasureValued(Estimator):
    """Measure-valued derivatives for Normal and Bernoulli nodes (unbiased; f not differentiated)."""

    multi_sample: ClassVar[bool] = False
    enumerates: ClassVar[bool] = True

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        """[x, μ + σR, μ − σR, μ + σM] (Normal) or [x, 1, 0] (Bernoulli) along a new dimension."""
        if len(sample_shape):
            raise SCGError("MeasureValued() takes no n=: its evaluation points are the sample dimension")
        with torch.no_grad():
            if isinstance(dist, Normal):
                mu, sigma = dist.loc.expand(dist.batch_shape), dist.scale.expand(dist.batch_shape)
                x = dist.sample()  # type: ignore[no-untyped-call]
                rayleigh = torch.sqrt(-2.0 * torch.log1p(-torch.rand_like(mu)))
                maxwell = torch.randn((3, *mu.shape), dtype=mu.dtype, device=mu.device).norm(dim=0)
                sign = torch.where(torch.rand_like(mu) < 0.5, -1.0, 1.0)
                return torch.stack([x, mu + sigma * rayleigh, mu - sigma * rayleigh, mu + sigma * sign * maxwell])
            if isinstance(dist, Bernoulli):
                x = dist.sample()  # type: ignore[no-untyped-call]
                return torch.stack([x, torch.ones_like(x), torch.zeros_like(x)])
        raise SCGError(f"MeasureValued() supports Normal and Bernoulli nodes, not {type(dist).__name__}")

    def weights(self, node: StochasticNode) -> torch.Tensor:
        """ω: (1, 0, 0, 0) in value; gradients (−∇σ/σ, ∇μ/(σ√(2π)), −∇μ/(σ√(2π)), ∇σ/σ)."""
        dist = node.dist
        if isinstance(dist, Bernoulli):
            p = dist.probs.expand(dist.batch_shape)
            dp = p - p.detach()
            return torch.stack([torch.ones_like(p), dp, -dp])
        assert isinstance(dist, Normal)
        mu, sigma = dist.loc.expand(dist.batch_shape), dist.scale.expand(dist.batch_shape)
        s = sigma.detach()
        dmu = (mu - mu.detach()) / (s * math.sqrt(2.0 * math.pi))
        dsigma = (sigma - s) / s
        return torch.stack([1.0 - dsigma, dmu, -dmu, dsigma])
