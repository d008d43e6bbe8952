"""LAX: the score function with a learned control variate, for continuous nodes.

Grathwohl, Choi, Wu, Roeder & Duvenaud (2018, Section 3.2): for b ~ p(b | θ) continuous and
reparameterizable, b = T(θ, ε), and any differentiable c_φ,

    ĝ = [f(b) − c_φ(b)] ∇_θ log p(b | θ) + ∇_θ c_φ(T(θ, ε))

is unbiased for ∇_θ E[f(b)], with f a black box (not differentiated: a simulator, a step
function, a non-differentiable reward), and c_φ trained to minimise the variance of ĝ
(`LAX.backward`). It is `scg.estimators.control`'s surrogate with z = T(θ, ε) and
z̃ = b (given the sample, the relaxation is the sample itself, which does not move with θ).

The reparameterization is *implicit* (Figurnov, Mohamed & Mnih 2018): for a scalar continuous
distribution with a differentiable cdf F, ∂b/∂θ = −∂F(b; θ)/∂θ / p(b; θ), so the sample drawn
by ``dist.sample()`` is differentiated without knowing ε (Normal, Laplace, Cauchy, Exponential,
Uniform, and transformed distributions whose cdf torch implements).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch.distributions import Distribution

from scg.errors import SCGError
from scg.estimators.control import LearnedControl

if TYPE_CHECKING:
    from scg.graph.nodes import StochasticNode

__all__ = ["LAX", "implicit_reparameterization"]


def implicit_reparameterization(dist: Distribution, value: torch.Tensor) -> torch.Tensor:
    """``value`` (a sample of ``dist``) as a function of the parameters: equal in value, with
    gradient −∇F(value) / p(value) (Figurnov et al. 2018)."""
    b = value.detach()
    cdf = dist.cdf(b)
    density = dist.log_prob(b).detach().exp()
    return b - (cdf - cdf.detach()) / density


class LAX(LearnedControl):
    """LAX for continuous scalar nodes with a cdf (unbiased; the cost is not differentiated).

    Args:
        control: c_φ, maps the sample ``(*sample, *batch)`` to the same shape.
        parameters: φ (default: the module's ``parameters()``).
        baseline: an ordinary baseline subtracted as well (optional).
    """

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        if dist.event_shape != torch.Size():
            raise SCGError(
                f"LAX() supports scalar continuous nodes, not {type(dist).__name__} with "
                f"event shape {tuple(dist.event_shape)}"
            )
        with torch.no_grad():
            out: torch.Tensor = dist.sample(sample_shape)  # type: ignore[no-untyped-call]
            try:
                dist.cdf(out)
            except NotImplementedError:
                raise SCGError(
                    f"LAX() differentiates the sample through the cdf, which {type(dist).__name__} "
                    "does not implement; use RELAX (discrete) or ScoreFunction()"
                ) from None
        return out

    def relaxations(self, node: StochasticNode) -> tuple[torch.Tensor, torch.Tensor]:
        """(T(θ, ε), b): the sample reparameterized, and the sample itself."""
        b = node.drawn_value()
        return implicit_reparameterization(node.dist, b), b
