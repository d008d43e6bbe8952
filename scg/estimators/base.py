"""The estimator interface: how a stochastic node is sampled and how it enters the surrogate."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
from torch.distributions import Distribution

if TYPE_CHECKING:
    from scg.baselines.base import Baseline
    from scg.graph.nodes import StochasticNode

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
    * ``enumerates``: the node's value is its whole support along a leading dimension, and the
      costs are weighted by p(value) (an exact expectation over the node; no score term).
    * ``relaxed``: the node's value is a continuous relaxation of a discrete sample,
      differentiated pathwise (biased).
    * ``reducible``: a cost may reduce the node's ``n`` samples itself (``scg.cost(...,
      reduced=node)``, a VIMCO/IWAE objective): they are draws each credited with the reduced
      cost. False for coupled evaluations whose weights sum to zero (an antithetic pair): the
      same cost on every slice would cancel in each draw.
    * ``rereads_value``: the estimator reads the node's value again when the surrogate is built
      (a control variate's relaxation, the weights of an enumerated set), through
      `StochasticNode.drawn_value`: scg keeps a copy of the draw, so that the program may still
      write into its sample (``tok.masked_fill_(done, pad)``) without changing what it reads.
    """

    unbiased: ClassVar[bool] = True
    needs_rsample: ClassVar[bool] = False
    score: ClassVar[bool] = False
    higher_order: ClassVar[bool] = False
    multi_sample: ClassVar[bool] = True
    enumerates: ClassVar[bool] = False
    relaxed: ClassVar[bool] = False
    reducible: ClassVar[bool] = True
    rereads_value: ClassVar[bool] = False

    baseline: Baseline | None = None

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        """Draw the node's value (shape ``sample_shape + dist.batch_shape + dist.event_shape``)."""
        raise NotImplementedError

    def log_prob(self, dist: Distribution, value: torch.Tensor) -> torch.Tensor:
        """The node's score: the tensor whose gradient the score term multiplies by Ĉ_v − b_v.

        ``dist.log_prob(value)`` (shape ``sample_shape + batch_shape``) by default. Estimators
        that weight the learning signal differently (ARM, DisARM, measure-valued derivatives)
        return a tensor equal to it in value whose gradient is their weight instead.
        """
        return dist.log_prob(value)

    def weights(self, node: StochasticNode) -> torch.Tensor:
        """ω of each slice of an ``enumerates`` node (shape of its log-probability): the weights
        of the costs computed from the slices. p(value) = exp(log_prob) by default (an exact
        expectation); other estimators (measure-valued derivatives, the unordered set and
        Rao-Blackwellised estimators) return weights whose value makes Σ ω c an unbiased
        estimate of the objective and whose gradient is their estimate of its gradient.
        """
        assert node.log_prob is not None
        return node.log_prob.exp()

    def control_variate(self, node: StochasticNode) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Control-variate terms of the node's surrogate (RELAX), or None (the default).

        Returns ``(cv, path)``, both of the node's log-probability shape: ``cv`` is subtracted
        from the node's learning signal Ĉ_v − b_v (it may depend on the sample, and is *not*
        detached, so that it can be trained), and ``path`` is added to the surrogate; its value
        must be zero and its gradient the correction that keeps the estimate unbiased.
        """
        del node
        return None

    def capabilities(self) -> dict[str, bool]:
        """The declared capabilities, as a dict (for tables and docs)."""
        return {
            "unbiased": self.unbiased,
            "needs_rsample": self.needs_rsample,
            "score": self.score,
            "higher_order": self.higher_order,
            "multi_sample": self.multi_sample,
            "enumerates": self.enumerates,
            "relaxed": self.relaxed,
            "reducible": self.reducible,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
