"""DisARM: ARM with the shared uniform integrated out (Dong, Mnih & Tucker 2020).

Given the antithetic pair (b₁, b₂) of `scg.estimators.arm`, the uniform u that produced it
is uniform on an interval, and averaging ARM's weight (u − ½) over it gives

    E[u − ½ | b₁, b₂] = (b₂ − b₁) σ(|α|) / 2,

so the estimate becomes ½ (f(b₁) − f(b₂)) (−1)^{b₂} [b₁ ≠ b₂] σ(|α|): ARM Rao-Blackwellised,
never of larger variance, zero when the pair agrees. Same sampling, same surrogate, same rules
for baselines (they cancel within a pair; ``LeaveOneOut`` is refused) and no ``dice=True``.

Categorical nodes: [`CategoricalDisARM`][scg.estimators.CategoricalDisARM] (the stick-breaking
form; for K = 2 it is this estimator) and [`ARSM`][scg.estimators.ARSM] (Yin, Yue & Zhou 2019).
"""

from __future__ import annotations

import torch

from scg.estimators.arm import ARM

__all__ = ["DisARM"]


class DisARM(ARM):
    """ARM with u integrated out given the pair (unbiased, lower variance; ``n=2``)."""

    def centred(self, logits: torch.Tensor, b1: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
        """E[u − ½ | b₁, b₂] = (b₂ − b₁) σ(|α|) / 2."""
        return 0.5 * (b2 - b1) * torch.sigmoid(logits.abs())
