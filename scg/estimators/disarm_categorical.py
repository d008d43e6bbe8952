"""DisARM for categorical nodes, in its stick-breaking form (Dong, Mnih & Tucker 2020, 2021).

A category z ∈ {0, …, K−1} with probabilities p is the first success of K − 1 *sticks*: binary
variables b_k ~ Bernoulli(σ(α_k)) with

    α_k = log p_k − log Σ_{j>k} p_j,   z = min{k : b_k = 1} (K − 1 if none),

so P(z = k) = σ(α_k) Π_{j<k} σ(−α_j) = p_k. Writing b_k = [u_k < σ(α_k)] with independent
uniforms u_k, the antithetic twin b'_k = [u_k > σ(−α_k)] gives a second category z' with the
same distribution, and ARM's multivariate identity (Yin & Zhou 2019) holds stick by stick:

    ∂/∂α_k E[f(z)] = E[(f(z') − f(z)) (u_k − ½)].

DisARM integrates the uniforms out given the pair (z, z'). The event {z = a, z' = c} constrains
each u_k to an interval of its own, so E[u_k − ½ | z, z'] is that interval's midpoint minus ½;
for a < c (sticks after both stops are unconstrained, those before both symmetric: both 0):

    k = a:      −σ(|α_k|)/2   (b_k = 1, b'_k = 0)
    a < k < c:  −σ(α_k)/2     (b'_k = 0; b_k is past z's stop and free)
    k = c:      σ(−α_k)/2     (b'_k = 1; b_k free)

and the mirror image (signs flipped) for a > c; zero when z = z'. The estimate
(f(z') − f(z)) Σ_k E[u_k − ½ | z, z'] ∇α_k needs the categories only, never the sticks past a
stop. For K = 2 it is `DisARM` on the Bernoulli b_0. The conditional weights are derived here
(the stick-breaking coupling is Dong, Mnih & Tucker's; the other categorical member of the ARM
family, with G = 1 + K(K−1)/2 evaluations, is [`ARSM`][scg.estimators.ARSM], Yin, Yue & Zhou
2019) and checked against exact enumeration. The stick order is the category order; the
variance depends on it.

In scg, as for `ARM`, the pair is a sample dimension: ``scg.sample(Categorical(logits=θ), n=2,
estimator=CategoricalDisARM())`` returns z then z' (``n=2m``: m pairs, averaged); the node's score
([`CategoricalDisARM.log_prob`][scg.estimators.CategoricalDisARM.log_prob]) is log p(z) in value
with the weights above (times ∓2) on ∇α as its gradient. Categorical and OneHotCategorical nodes,
and ``Independent`` of them (several categoricals decoded jointly: one pair of uniforms per
coordinate). Baselines equal on both members of a pair cancel; ``LeaveOneOut`` is refused; no
``dice=True``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
from torch.distributions import Categorical, Distribution, Independent, OneHotCategorical

from scg.errors import SCGError
from scg.estimators.arm import pair_count, refuse_leave_one_out
from scg.estimators.base import Estimator
from scg.estimators.categorical import category_indices, category_values, finite_logits

if TYPE_CHECKING:
    from scg.graph.nodes import StochasticNode

__all__ = ["CategoricalDisARM", "categorical_logits", "stick_logits", "stick_weights"]


def stick_logits(logits: torch.Tensor) -> torch.Tensor:
    """α_k = log p_k − log Σ_{j>k} p_j (``(..., K − 1)``) from category logits ``(..., K)``."""
    logp = logits.log_softmax(-1)
    tail = logp.flip(-1).logcumsumexp(-1).flip(-1)  # log Σ_{j≥k} p_j
    return logp[..., :-1] - tail[..., 1:]


def stick_weights(alpha: torch.Tensor, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    """E[u_k − ½ | z, z'] for each stick k (``alpha``'s shape, ``(..., K − 1)``)."""
    k = torch.arange(alpha.shape[-1], device=alpha.device)
    lo, hi = torch.minimum(z1, z2).unsqueeze(-1), torch.maximum(z1, z2).unsqueeze(-1)
    sign = torch.sign(z2 - z1).to(alpha.dtype).unsqueeze(-1)  # +1: z stopped first
    w = torch.where(k == lo, -0.5 * torch.sigmoid(alpha.abs()), torch.zeros_like(alpha))
    w = torch.where((k > lo) & (k < hi), -0.5 * torch.sigmoid(alpha), w)
    w = torch.where((k == hi) & (hi > lo), 0.5 * torch.sigmoid(-alpha), w)
    return sign * w


def categorical_logits(estimator: Estimator, dist: Distribution) -> tuple[torch.Tensor, bool, int]:
    """(category logits ``(*batch, *event_batch, K)``, one-hot?, event dims of ``Independent``).

    A category masked out with a logit of −inf (padding) gets a finite floor instead
    (`finite_logits`), so that log Σ_{j>k} p_j and the differences stay finite."""
    base, event = dist, 0
    if isinstance(dist, Independent):
        base, event = dist.base_dist, dist.reinterpreted_batch_ndims
    if isinstance(base, OneHotCategorical):
        logits, onehot = base.logits.expand(base.batch_shape + base.event_shape), True
    elif isinstance(base, Categorical):
        logits, onehot = base.logits.expand(base.batch_shape + base.logits.shape[-1:]), False
    else:
        raise SCGError(
            f"{type(estimator).__name__}() supports Categorical and OneHotCategorical nodes (or Independent of "
            f"them), not {type(dist).__name__}"
        )
    return finite_logits(logits), onehot, event


class CategoricalDisARM(Estimator):
    """DisARM's stick-breaking form for categorical nodes drawn with ``n=2`` (unbiased, no baseline)."""

    score: ClassVar[bool] = True
    reducible: ClassVar[bool] = False  # (coupled slices: a cost reduced over them cancels)

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        """m antithetic pairs of categories ``(2m, *batch)`` (one-hot: ``(2m, *batch, K)``)."""
        logits, onehot, _ = categorical_logits(self, dist)
        m = pair_count(self, sample_shape[0] if len(sample_shape) == 1 else None)
        with torch.no_grad():
            alpha = stick_logits(logits)
            u = torch.rand((m, *alpha.shape), dtype=alpha.dtype, device=alpha.device)
            stop = torch.ones((*u.shape[:-1], 1), dtype=torch.bool, device=u.device)  # (K = 1: no sticks)
            b1 = torch.cat([u < torch.sigmoid(alpha), stop], -1)  # the last category ends every run
            b2 = torch.cat([u > torch.sigmoid(-alpha), stop], -1)
            z = torch.cat([b1.to(torch.uint8).argmax(-1), b2.to(torch.uint8).argmax(-1)])  # first success
            return category_values(z, onehot, logits.shape[-1], logits)

    def log_prob(self, dist: Distribution, value: torch.Tensor) -> torch.Tensor:
        """log p(value) in value; gradient ∓2 Σ_k E[u_k − ½ | z, z'] ∇α_k on z and z'."""
        logits, onehot, event = categorical_logits(self, dist)
        extra = value.dim() - len(dist.batch_shape) - len(dist.event_shape)
        m = pair_count(self, value.shape[0] if extra == 1 else None)
        z = category_indices(value.detach(), onehot)
        alpha = stick_logits(logits).expand(*z.shape, logits.shape[-1] - 1)
        with torch.no_grad():
            c = self.centred(alpha[:m].detach(), z[:m], z[m:])
        score = (torch.cat([-2.0 * c, 2.0 * c]) * (alpha - alpha.detach())).sum(-1)
        if event:
            score = score.sum(tuple(range(-event, 0)))
        return dist.log_prob(value).detach() + score

    def centred(self, alpha: torch.Tensor, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        """E[u_k − ½ | z, z'] for each stick (`stick_weights`)."""
        return stick_weights(alpha, z1, z2)

    def control_variate(self, node: StochasticNode) -> None:
        """No control variate (the pair is its own); refuses ``LeaveOneOut`` (biased within a pair)."""
        refuse_leave_one_out(self, node)
        return None
