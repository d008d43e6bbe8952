"""The Rao-Blackwellised score function for categorical nodes (Liu, Regier, Tripuraneni, Jordan &
McAuliffe 2019): the k most probable categories summed exactly, the rest sampled.

Split the categories into T, the k most probable (at the current parameters), and the rest C.
Then E[f] = Σ_{i∈T} p_i f(i) + (1 − P_T) E_{j∼q}[f(j)], with P_T = Σ_{i∈T} p_i and q the
distribution restricted to C (q_j = p_j / (1 − P_T)). One draw j ∼ q gives the estimates

    value:     Σ_{i∈T} p_i f(i) + (1 − P_T) f(j),
    gradient:  Σ_{i∈T} ∇p_i f(i) + (∇p_j / q_j) f(j),

unbiased (the second term is the score function of the sampled part, whose weight is its
probability 1 − P_T), with variance at most (1 − P_T)² times that of one sample of the
plain score function. T is a function of the parameters, but constant around them, so
it does not move the gradient.

In scg the node *enumerates* its k + 1 values: ``scg.sample(Categorical(logits=θ),
estimator=RaoBlackwellized(k=3))`` returns ``(k + 1, *batch)`` values, the top-k categories
and then the sample j; the costs computed from them are weighted by the ω of
:meth:`RaoBlackwellized.weights` (value and gradient as above). Each batch element picks its
own T. There is no score term, hence no ``baseline=`` (the exact part needs none; the paper's
baseline for the sampled term is not provided) and no ``dice=True``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
from torch.distributions import Categorical, Distribution

from scg.errors import SCGError
from scg.estimators.base import Estimator
from scg.estimators.categorical import categorical_probs, category_indices, category_values

if TYPE_CHECKING:
    from scg.graph.nodes import StochasticNode

__all__ = ["RaoBlackwellized"]


class RaoBlackwellized(Estimator):
    """Top-k categories summed exactly, one sample of the rest (unbiased; Liu et al. 2019).

    Args:
        k: how many of the most probable categories to sum exactly (1 ≤ k < K).
    """

    unbiased: ClassVar[bool] = True
    needs_rsample: ClassVar[bool] = False
    score: ClassVar[bool] = False
    higher_order: ClassVar[bool] = False
    multi_sample: ClassVar[bool] = False
    enumerates: ClassVar[bool] = True

    def __init__(self, k: int) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise SCGError(f"RaoBlackwellized(k=...): expected a positive int, got {k!r}")
        self.k = k

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        """The top-k categories, then one draw from the others: ``(k + 1, *batch)`` values."""
        if len(sample_shape):
            raise SCGError("RaoBlackwellized() takes no n=: its k + 1 values are the sample dimension")
        probs, onehot = categorical_probs(self, dist)
        n_cat = probs.shape[-1]
        if self.k >= n_cat:
            raise SCGError(f"RaoBlackwellized(k={self.k}): the node has only {n_cat} categories; use Enumerate()")
        with torch.no_grad():
            top = probs.topk(self.k, dim=-1).indices  # (*batch, k)
            rest = probs.scatter(-1, top, 0.0)
            j = Categorical(probs=rest).sample()  # type: ignore[no-untyped-call]
            idx = torch.cat([top.movedim(-1, 0), j.unsqueeze(0)])
            return category_values(idx, onehot, n_cat, probs)

    def weights(self, node: StochasticNode) -> torch.Tensor:
        """ω: p_i for the top k; for j, 1 − P_T in value with gradient ∇p_j / q_j."""
        probs, onehot = categorical_probs(self, node.dist)
        idx = category_indices(node.value.detach(), onehot)  # (k + 1, *batch)
        p = probs.unsqueeze(0).expand(idx.shape + probs.shape[-1:]).gather(-1, idx.unsqueeze(-1)).squeeze(-1)
        p_top, p_j = p[: self.k], p[self.k]
        rest = 1.0 - p_top.detach().sum(0)
        q_j = p_j.detach() / rest
        w_j = rest + (p_j - p_j.detach()) / q_j
        return torch.cat([p_top, w_j.unsqueeze(0)])

    def __repr__(self) -> str:
        return f"RaoBlackwellized(k={self.k})"
