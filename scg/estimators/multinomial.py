"""Multinomial attention: the C2F paper's +MULTI sampling of k chunks at once.

Ling & Rush (2017, "Coarse-to-fine attention models for document summarization")
sample k attention choices from α instead of one: μ ~ Multinomial(k, α) counts how often each
chunk was drawn, and α̃ = μ / k replaces the one-hot attention (E[α̃] = α). The node is scored with
its own log-probability,

    log p(μ | α) = log k! − Σ_i log μ_i! + Σ_i μ_i log α_i,

so the score-function term is ∇ log p(μ) · (Ĉ − b) = Σ_i μ_i ∇ log α_i · (Ĉ − b): the k draws
share one learning signal. (Drawing the k choices as ``scg.sample(Categorical(α), n=k)`` instead
gives each its own sample dimension and costs averaged over them; +MULTI feeds their average
into a *single* downstream computation.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch.distributions import Multinomial

from scg.errors import SCGError
from scg.estimators.score_function import ScoreFunction

if TYPE_CHECKING:
    from scg.baselines.base import Baseline

__all__ = ["multinomial_attention"]


def multinomial_attention(
    probs: torch.Tensor | None = None,
    k: int = 1,
    *,
    logits: torch.Tensor | None = None,
    name: str | None = None,
    step: int | None = None,
    baseline: Baseline | None = None,
) -> torch.Tensor:
    """Sample μ ~ Multinomial(k, α) as a score-function node and return α̃ = μ / k.

    Args:
        probs: α, shape ``(*batch, M)`` (or give ``logits``).
        k: the number of draws.
        name, step, baseline: as for [`scg.sample`][scg.sample].

    Returns:
        α̃ of shape ``(*batch, M)``: non-negative, summing to 1 over the last dimension.
    """
    from scg.graph.sampling import sample

    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise SCGError(f"multinomial_attention(name={name!r}, k=...): expected a positive int, got {k!r}")
    if (probs is None) == (logits is None):
        raise SCGError(f"multinomial_attention(name={name!r}): give exactly one of probs and logits")
    dist = Multinomial(k, probs=probs, logits=logits)
    mu = sample(dist, name=name, step=step, estimator=ScoreFunction(baseline))
    return mu / k
