"""The estimator interface: how a stochastic node is sampled and how it enters the surrogate."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
from torch.distributions import Distribution

if TYPE_CHECKING:
    from scg.baselines.base import Baseline

__all__ = ["Estimator"]


class Estimator:
    """Base class of gradient estimators for one stochastic node.

    Subclasses declare their capabilities as class attributes, so that users and ``scg.testing``
    can ask what an estimator promises:

    * ``unbiased``: E[∇ surrogate] = ∇ E[Σ costs] (checked by ``scg.testing.assert_unbiased``).
    * ``needs_rsample``: the distribution must have a reparameterized sampler.
    * ``score``: the node contributes a score-function term ∇ log p(v | parents) · (Ĉ_v − b_v).
    * ``higher_order``: higher derivatives of the surrogate are unbiased too (with ``dice=True``).
    * ``multi_sample``: supports ``n=k`` samples along a leading dimension.
    """

    unbiased: ClassVar[bool] = True
    needs_rsample: ClassVar[bool] = False
    score: ClassVar[bool] = False
    higher_order: ClassVar[bool] = False
    multi_sample: ClassVar[bool] = True

    baseline: Baseline | None = None

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        """Draw the node's value (shape ``sample_shape + dist.batch_shape + dist.event_shape``)."""
        raise NotImplementedError

    def capabilities(self) -> dict[str, bool]:
        """The declared capabilities, as a dict (for tables and docs)."""
        return {
            "unbiased": self.unbiased,
            "needs_rsample": self.needs_rsample,
            "score": self.score,
            "higher_order": self.higher_order,
            "multi_sample": self.multi_sample,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
