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
`RaoBlackwellized.weights` (value and gradient as above). Each batch element picks its
own T. Built-in baseline (``baseline=True``, the default): since Σ_T ∇p_i + E[∇p_j / q_j] =
∇Σ p = 0, any b that does not depend on j may be subtracted from every cost in the gradient;
b = Σ_T p_i f(i) / P_T (the top-k's mean cost) removes the large offset a cost such as a
negative ELBO has, which otherwise multiplies every term. There is no score term, hence no
``baseline=`` argument to ``scg.sample``, and no ``dice=True``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
from torch.distributions import Categorical, Distribution

from scg.errors import SCGError, expect_bool
from scg.estimators.base import Estimator
from scg.estimators.categorical import categorical_probs, category_indices, category_values

if TYPE_CHECKING:
    from scg.graph.nodes import StochasticNode

__all__ = ["RaoBlackwellized"]


class RaoBlackwellized(Estimator):
    """Top-k categories summed exactly, one sample of the rest (unbiased; Liu et al. 2019).

    Args:
        k: how many of the most probable categories to sum exactly (1 ≤ k < K).
        baseline: subtract the built-in baseline b = Σ_T p_i f(i) / P_T, the top-k's mean cost
            (default True; it depends on no sample, so the estimate stays unbiased).
    """

    multi_sample: ClassVar[bool] = False
    enumerates: ClassVar[bool] = True
    rereads_value: ClassVar[bool] = True  # (the weights of the drawn categories)

    def __init__(self, k: int, *, baseline: bool = True) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise SCGError(f"RaoBlackwellized(k=...): expected a positive int, got {k!r}")
        self.k = k
        self.builtin_baseline = expect_bool(baseline, "RaoBlackwellized(baseline=...)")

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
            # (a row whose top k hold all its mass, the rest masked out: j is drawn from the row
            # itself, and its weight 1 − P_T is 0, its gradient ∇p_j (1 − P_T) / p_j too)
            rest = torch.where(rest.sum(-1, keepdim=True) > 0, rest, probs)
            j = Categorical(probs=rest).sample()  # type: ignore[no-untyped-call]
            idx = torch.cat([top.movedim(-1, 0), j.unsqueeze(0)])
            return category_values(idx, onehot, n_cat, probs)

    def weights(self, node: StochasticNode) -> torch.Tensor:
        """ω: p_i for the top k; for j, 1 − P_T in value with gradient ∇p_j / q_j; with the
        built-in baseline, S = Σ_T ∇p_i + ∇p_j / q_j (zero in expectation) times the top-k's
        p-weighted mean cost is subtracted."""
        probs, onehot = categorical_probs(self, node.dist)
        idx = category_indices(node.drawn_value(), onehot)  # (k + 1, *batch)
        p = probs.unsqueeze(0).expand(idx.shape + probs.shape[-1:]).gather(-1, idx.unsqueeze(-1)).squeeze(-1)
        p_top, p_j = p[: self.k], p[self.k]
        mass = p_top.detach().sum(0)
        rest = 1.0 - mass
        g_j = (p_j - p_j.detach()) / (p_j.detach() / rest)
        w_top = p_top
        if self.builtin_baseline:
            s = (p_top - p_top.detach()).sum(0) + g_j
            w_top = p_top - p_top.detach() / mass * s
        return torch.cat([w_top, (rest + g_j).unsqueeze(0)])

    def __repr__(self) -> str:
        return f"RaoBlackwellized(k={self.k}, baseline={self.builtin_baseline})"
