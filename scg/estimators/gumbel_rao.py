"""Gumbel-Rao: straight-through Gumbel-softmax with the relaxation Rao-Blackwellised (Paulus,
Maddison & Krause 2021). Biased, with less variance than straight-through.

Straight-through Gumbel-softmax ([`GumbelSoftmax`][scg.estimators.GumbelSoftmax] with ``hard=True``)
uses the discrete D = one_hot(argmax(log π + G)) forward and the gradient of the relaxation
softmax((log π + G)/τ) backward. Its variance comes partly from G, which the forward value does
not depend on given D; Gumbel-Rao replaces the backward relaxation by its conditional
expectation given D,

    value = D,   gradient of E[softmax((log π + G)/τ) | D] ≈ (1/m) Σ_j ∇ softmax(z̃_j / τ),

with z̃_j = log π + G̃_j and G̃_j drawn given that the argmax is D (the conditional sampler RELAX
uses, `scg.estimators.relax`), but differentiated as unconditional noise (G̃_j held fixed):
the conditional expectation of straight-through's gradient.
For Bernoulli nodes the logistic noise is conditioned on the sign the same way. The estimate
has the expectation of straight-through's (the same bias, as m → ∞ exactly; for finite m the
average of m conditional relaxations has that expectation too) and at most its variance.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch.distributions import Bernoulli, Distribution, OneHotCategorical

from scg.errors import SCGError
from scg.estimators.relax import bernoulli_given, categorical_given, uniform
from scg.estimators.relaxed import GumbelSoftmax

__all__ = ["GumbelRao"]


class GumbelRao(GumbelSoftmax):
    """Straight-through with m conditional relaxations averaged (OneHotCategorical, Bernoulli; biased).

    Args:
        temperature: τ > 0.
        m: how many conditional relaxations to average (m = 1 is straight-through in
            distribution).
    """

    unbiased: ClassVar[bool] = False

    def __init__(self, temperature: float | torch.Tensor, *, m: int = 10) -> None:
        super().__init__(temperature, hard=True)
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise SCGError(f"GumbelRao(m=...): expected a positive int, got {m!r}")
        self.m = m

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        if not isinstance(dist, (OneHotCategorical, Bernoulli)):
            raise SCGError(f"GumbelRao() supports OneHotCategorical and Bernoulli nodes, not {type(dist).__name__}")
        logits = dist.logits
        temp = torch.as_tensor(self.temperature, dtype=logits.dtype, device=logits.device)
        with torch.no_grad():
            hard: torch.Tensor = dist.sample(sample_shape)  # type: ignore[no-untyped-call]
        reps = (self.m, *hard.shape)
        # the noise is drawn given the sample, but differentiated as the unconditional noise:
        # E[∇ relax(log π + G) | D], not ∇ of the conditional sample
        with torch.no_grad():
            if isinstance(dist, Bernoulli):
                noise = bernoulli_given(logits.expand(reps), hard.expand(reps), uniform(torch.Size(reps), logits))
            else:
                idx = hard.argmax(-1).expand(reps[:-1])
                noise = categorical_given(logits.expand(reps), idx, uniform(torch.Size(reps), logits))
            noise = noise - logits
        z = (logits + noise) / temp
        soft = (torch.sigmoid(z) if isinstance(dist, Bernoulli) else torch.softmax(z, -1)).mean(0)
        return hard + (soft - soft.detach())

    def __repr__(self) -> str:
        return f"GumbelRao(temperature={self.temperature!r}, m={self.m})"
