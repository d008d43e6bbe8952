"""The pathwise (reparameterization) estimator.

When v = g(θ, ε) with ε drawn from a fixed distribution, ∇_θ E[f(v)] = E[∇_θ f(g(θ, ε))]: the
gradient flows through the sample by ordinary backpropagation and the node adds no score-function
term (Kingma & Welling 2014; Schulman et al. 2015, Section 2.1). Requires ``dist.has_rsample``.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch.distributions import Distribution

from scg.errors import SCGError
from scg.estimators.base import Estimator

__all__ = ["Pathwise"]


class Pathwise(Estimator):
    """Reparameterized sampling: ``dist.rsample()``; the gradient is the sample's derivative."""

    needs_rsample: ClassVar[bool] = True
    higher_order: ClassVar[bool] = True

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        if not dist.has_rsample:
            raise SCGError(
                f"Pathwise() needs a reparameterized sampler, but {type(dist).__name__} has no "
                "rsample(); use scg.ScoreFunction() for this node"
            )
        return dist.rsample(sample_shape)
