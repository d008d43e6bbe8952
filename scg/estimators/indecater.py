"""IndeCateR: the gradient for a vector of independent categorical variables (De Smet, Sansone &
Zuidberg Dos Martires 2023).

For x = (x_1, ..., x_D) with independent x_d ∼ Cat(p_d(θ)) and any f,

    ∇ E[f(x)] = Σ_d E_{x_{−d}} [ Σ_k ∇p_{dk} f(x_{−d}, x_d = k) ],

because the expectation over x_d given the others is a finite sum that can be differentiated
exactly. One sample x gives the estimate Σ_d Σ_k ∇p_{dk} f(x with x_d set to k): the score
function Rao-Blackwellised one coordinate at a time, at D·K evaluations of f. Each of the D
partial sums Σ_k p_{dk} f(x_{−d}, k) is an unbiased estimate of E[f], so their average is the
value.

In scg the node is ``Independent(Categorical(logits=(..., D, K)), 1)`` (or of
``OneHotCategorical``), its D coordinates jointly decoded by the costs, and it *enumerates*
the D·K neighbours of its sample: ``scg.sample(dist, estimator=IndeCateR())`` returns
``(D·K, *batch, D)`` values (slice d·K + k is the sample with coordinate d set to k), weighted by
ω_{dk} = p_{dk}/D in value with gradient ∇p_{dk} ([IndeCateR.weights][scg.estimators.IndeCateR.weights]). No score term,
hence no ``baseline=`` (none is needed: the sum over k is exact) and no ``dice=True``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
from torch.distributions import Distribution, Independent

from scg.errors import SCGError
from scg.estimators.base import Estimator
from scg.estimators.categorical import categorical_probs, category_indices, category_values

if TYPE_CHECKING:
    from scg.graph.nodes import StochasticNode

__all__ = ["IndeCateR"]


def _base(estimator: Estimator, dist: Distribution) -> tuple[torch.Tensor, bool]:
    if not isinstance(dist, Independent) or dist.reinterpreted_batch_ndims != 1:
        raise SCGError(
            f"{type(estimator).__name__}() supports Independent(Categorical(...), 1) nodes (D independent "
            f"categoricals decoded jointly), not {type(dist).__name__}"
        )
    return categorical_probs(estimator, dist.base_dist)  # (*batch, D, K)


class IndeCateR(Estimator):
    """IndeCateR for D independent categoricals (unbiased; D·K evaluations per sample)."""

    multi_sample: ClassVar[bool] = False
    enumerates: ClassVar[bool] = True

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        """The D·K neighbours of one sample x: ``(D·K, *batch, D)`` (one-hot: ``(..., D, K)``)."""
        if len(sample_shape):
            raise SCGError("IndeCateR() takes no n=: the D·K neighbours of its sample are the sample dimension")
        probs, onehot = _base(self, dist)
        d, k = probs.shape[-2:]
        nb = probs.dim() - 2
        with torch.no_grad():
            x = category_indices(dist.sample(), onehot)  # type: ignore[no-untyped-call]
            coord = torch.arange(d, device=x.device).view(d, 1, *[1] * nb, 1)
            pos = torch.arange(d, device=x.device).view(1, 1, *[1] * nb, d)
            cat = torch.arange(k, device=x.device).view(1, k, *[1] * nb, 1)
            idx = torch.where(coord == pos, cat, x.expand(d, k, *x.shape))
            return category_values(idx.reshape(d * k, *x.shape), onehot, k, probs)

    def weights(self, node: StochasticNode) -> torch.Tensor:
        """ω_{dk} = p_{dk}/D in value, gradient ∇p_{dk}: shape ``(D·K, *batch)``."""
        probs, _ = _base(self, node.dist)
        d, k = probs.shape[-2:]
        p = probs.movedim(-2, 0).movedim(-1, 1).reshape(d * k, *probs.shape[:-2])
        return p.detach() / d + (p - p.detach())
