"""Enumeration: the exact expectation over a node with finite support.

For a node v with finite support {x_1, ..., x_K} (Categorical, Bernoulli, OneHotCategorical),

    E_v[f(v)] = Σ_i p(x_i | parents_v; θ) · f(x_i),
    ∇_θ E_v[f(v)] = Σ_i ∇_θ p(x_i) · f(x_i) + p(x_i) · ∇_θ f(x_i),

with no sampling and no variance from v. ``scg.sample(dist, estimator=Enumerate())`` returns the
whole support along a new leading dimension of size K (``dist.enumerate_support()``), so everything
computed from it carries that dimension; the surrogate weights the costs along it by p(x_i)
(a *sample dimension* whose weights are probabilities instead of 1/k, see
`scg.credit.sample_dims`), and the gradient flows through those probabilities. The node adds no
score-function term. Nodes downstream may be sampled as usual (their samples then carry the K
dimension: one draw per enumerated value), or enumerated too (nested supports, K_1·K_2 values).

Batched nodes are enumerated element-wise in parallel: slice i sets *every* batch element to its
i-th value, which is exact under scg's convention that batch elements are independent examples
(cost element b depends on node element b only). For a vector-valued choice whose elements
interact, use a distribution whose event is the whole vector. The cost is K forward passes'
worth of computation, so enumerate small supports.

Reference: the "exact" or "all-action" estimator; e.g. Sutton et al. (2001); also
``storchastic``'s and Pyro's enumeration (Obermeyer et al. 2019, "Tensor variable elimination").
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch.distributions import Distribution

from scg.errors import SCGError
from scg.estimators.base import Estimator

__all__ = ["Enumerate"]


class Enumerate(Estimator):
    """Exact expectation over the node's finite support (no sampling, no score term).

    Capabilities: unbiased (exact), higher-order exact (the weights p are differentiable to any
    order), no ``n=`` (the support is the sample dimension). Interventions
    (``scg.Graph(intervene=...)``) are not applied to enumerated nodes.
    """

    higher_order: ClassVar[bool] = True
    multi_sample: ClassVar[bool] = False
    enumerates: ClassVar[bool] = True

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        """The support, shape ``(K,) + batch_shape + event_shape`` (``sample_shape`` must be ())."""
        if len(sample_shape):
            raise SCGError("Enumerate() takes no n=: the support is the sample dimension")
        if not dist.has_enumerate_support:
            raise SCGError(
                f"Enumerate() needs a distribution with finite support "
                f"(enumerate_support), but {type(dist).__name__} has none; use "
                "ScoreFunction() or a relaxation"
            )
        with torch.no_grad():
            return dist.enumerate_support(expand=True)
