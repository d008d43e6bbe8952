"""Gumbel-softmax (Concrete) relaxation and its straight-through variant. Biased.

A one-hot categorical sample can be written v = one_hot(argmax_i (log π_i + g_i)) with g_i i.i.d.
Gumbel(0, 1) (the Gumbel-max trick). Replacing the argmax by a softmax at temperature τ,

    y = softmax((log π + g) / τ),

gives a sample of the Concrete / Gumbel-softmax distribution on the simplex (Maddison, Mnih & Teh
2017; Jang, Gu & Poole 2017), a reparameterized function of θ, so costs are differentiated
pathwise: ĝ = ∇_θ f(y). For Bernoulli nodes the binary Concrete y = σ((logit π + logistic noise)/τ)
plays the same role.

The estimator is **biased**: E[∇_θ f(y)] = ∇_θ E[f(y)], the gradient of the *relaxed* objective,
which differs from ∇_θ E[f(v)] unless f is linear on the simplex; the bias shrinks as τ → 0 while
the variance grows. The costs must be defined for relaxed values (e.g. ``y @ table`` instead of
``table[v]``).

Straight-through (``hard=True``, Jang et al. 2017; Bengio, Léonard & Courville 2013): the forward
value is the discrete one_hot(argmax y) (or [y > 1/2] for Bernoulli), so the program sees true
discrete samples, and the backward pass uses ∇y: value = hard + (y − stop_gradient(y)). Also
biased, even for f linear.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch.distributions import (
    Bernoulli,
    Distribution,
    OneHotCategorical,
    RelaxedBernoulli,
)

from scg.errors import SCGError, expect_bool
from scg.estimators.base import Estimator

__all__ = ["GumbelSoftmax"]


class GumbelSoftmax(Estimator):
    """Concrete / Gumbel-softmax relaxation of OneHotCategorical and Bernoulli nodes (biased).

    Args:
        temperature: τ > 0, a float or a (possibly learned) positive tensor broadcastable to the
            node's batch shape.
        hard: straight-through: the value is the discrete sample, the gradient the relaxed one.
    """

    unbiased: ClassVar[bool] = False
    relaxed: ClassVar[bool] = True

    def __init__(self, temperature: float | torch.Tensor, *, hard: bool = False) -> None:
        if isinstance(temperature, torch.Tensor):
            if not bool(torch.isfinite(temperature).all()) or bool((temperature <= 0).any()):
                raise SCGError("GumbelSoftmax(temperature): must be positive and finite")
        elif (
            isinstance(temperature, bool)
            or not isinstance(temperature, (int, float))
            or not math.isfinite(temperature)
            or temperature <= 0
        ):
            raise SCGError(f"GumbelSoftmax(temperature): expected a positive number, got {temperature!r}")
        self.temperature = temperature
        self.hard = expect_bool(hard, f"{type(self).__name__}(hard=...)")

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        temp = torch.as_tensor(self.temperature, dtype=dist.logits.dtype if hasattr(dist, "logits") else None)
        # (the node's distribution checked its parameters, if it validates: the relaxed one,
        # built from the same logits, does not check them again)
        if isinstance(dist, OneHotCategorical):
            y = _gumbel_softmax(dist.logits, temp, sample_shape)
            if not self.hard:
                return y
            hard = F.one_hot(y.argmax(-1), y.shape[-1]).to(y.dtype)
            return hard + (y - y.detach())
        if isinstance(dist, Bernoulli):
            y = RelaxedBernoulli(temp, logits=dist.logits, validate_args=False).rsample(sample_shape)
            if not self.hard:
                return y
            return (y > 0.5).to(y.dtype) + (y - y.detach())
        hint = (
            (" (use OneHotCategorical: the relaxed value is a point of the simplex, not an index)")
            if type(dist).__name__ == "Categorical"
            else ""
        )
        raise SCGError(
            f"GumbelSoftmax() relaxes OneHotCategorical and Bernoulli nodes, not {type(dist).__name__}{hint}"
        )

    def __repr__(self) -> str:
        return f"GumbelSoftmax(temperature={self.temperature!r}, hard={self.hard})"


def _gumbel_softmax(log_pi: torch.Tensor, temperature: torch.Tensor, sample_shape: torch.Size) -> torch.Tensor:
    """y = softmax((log π + g) / τ) with g i.i.d. Gumbel(0, 1), for the node's log-probabilities
    ``log_pi`` (a ``OneHotCategorical``'s ``logits``, normalized when it was built): drawn as
    torch's ``RelaxedOneHotCategorical(τ, logits=the node's logits).rsample(sample_shape)`` draws
    it (the same normalization, uniforms, operations and values), without building that
    distribution: its inner Categorical validates the logits whatever ``validate_args`` says, a
    host read per draw, and would normalize them a second time (two operations and their
    backward, for no change: the softmax does not see a constant shift of log π)."""
    eps = torch.finfo(log_pi.dtype).eps
    u = torch.rand(sample_shape + log_pi.shape, dtype=log_pi.dtype, device=log_pi.device).clamp(min=eps, max=1 - eps)
    scores = (log_pi - (-u.log()).log()) / temperature
    return (scores - scores.logsumexp(dim=-1, keepdim=True)).exp()
