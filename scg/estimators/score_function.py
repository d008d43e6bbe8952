"""The score-function (REINFORCE, likelihood-ratio) estimator.

For a stochastic node v ~ p(· | parents; θ), Theorem 1 of Schulman et al. (2015) gives

    ∇_θ E[Σ c] = E[ Σ_v ∇_θ log p(v | parents_v) · (Ĉ_v − b_v) + Σ_c ∇_θ c ],

where Ĉ_v is the sum of the costs that v influences and b_v a baseline that may depend on anything
not influenced by v (Theorem 2). The sample itself is not differentiated (``dist.sample()``), which is
why this estimator works for discrete distributions. Williams (1992).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
from torch.distributions import Distribution

from scg.estimators.base import Estimator

if TYPE_CHECKING:
    from scg.baselines.base import Baseline

__all__ = ["ScoreFunction"]


class ScoreFunction(Estimator):
    """Score-function estimator, optionally with a baseline b_v subtracted from Ĉ_v.

    Args:
        baseline: a [`scg.baselines.Baseline`][scg.baselines.Baseline] (``Constant``, ``EMA``, ``Learned``...).
    """

    score: ClassVar[bool] = True
    higher_order: ClassVar[bool] = True

    def __init__(self, baseline: Baseline | None = None) -> None:
        self.baseline = baseline

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        # ``Distribution.sample`` already runs under no_grad; detach() guards custom ones.
        x = dist.sample(sample_shape)
        return x.detach() if isinstance(x, torch.Tensor) and x.requires_grad else x  # (scg.sample checks the type)

    def __repr__(self) -> str:
        return f"ScoreFunction(baseline={self.baseline!r})"
