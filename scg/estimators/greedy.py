"""``greedy``: an intervention that replaces every sample by the mode of its distribution.

Self-critical sequence training (Rennie, Marcheret, Mroueh, Ross & Goel 2017) uses the cost of the
*greedy* (argmax) decoding of the same model as the baseline of the sampled decoding. In scg the
greedy decoding is a rerun of the same program under an intervention::

    with torch.no_grad(), scg.Graph(intervene=scg.estimators.greedy) as g0:
        greedy_cost = program()          # every scg.sample returns dist.mode
    with scg.Graph() as g:
        program(baseline=scg.baselines.SelfCritical(greedy_cost))

The rerun uses no randomness, so its cost is independent of the sampled run and subtracting it
keeps the estimate unbiased (Theorem 2 of Schulman et al. 2015).
"""

from __future__ import annotations

import torch
from torch.distributions import Bernoulli, Distribution

from scg.errors import SCGError

__all__ = ["greedy"]


def greedy(name: str, step: int | None, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
    """The mode of ``dist`` (argmax for discrete nodes), repeated over ``sample_shape``.

    Signature of a ``scg.Graph(intervene=...)`` callable. Bernoulli ties (p = 1/2) give 0.
    Enumerated nodes are not intervened on (they keep their whole support).
    """
    del step
    if isinstance(dist, Bernoulli):
        mode = (dist.probs > 0.5).to(dist.probs.dtype)
    else:
        try:
            mode = dist.mode
        except NotImplementedError:
            raise SCGError(
                f"scg.estimators.greedy: node '{name}' has a {type(dist).__name__}, "
                "which does not implement mode; intervene on it yourself"
            ) from None
    mode = mode.detach()
    return mode.expand(torch.Size(sample_shape) + mode.shape)
