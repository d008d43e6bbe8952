"""REBAR: RELAX whose control variate is the relaxed cost, with temperature and scale learned.

Tucker, Mnih, Maddison, Lawson & Sohl-Dickstein (2017) use as control variate the cost itself
evaluated at the continuous relaxation of the sample,

    c_{η,λ}(z) = η · f(σ_λ(z)),   σ_λ(z) = softmax(z / λ) (categorical) or sigmoid(z / λ) (Bernoulli),

with z the Gumbel-perturbed logits of `scg.estimators.relax`. The estimate is RELAX's with
this control, so it is unbiased for every η and λ; both are trained to minimise the variance of
the estimate (`REBAR.backward`, as for RELAX; the paper's "adaptive" temperature).

The relaxed cost f is a callable the user gives: the downstream cost written for a point of the
simplex (a probability vector of the node's last dimension for categorical nodes, a number in
(0, 1) for Bernoulli nodes), returning a tensor of the node's log-probability shape. scg cannot
derive it from the program, whose cost is evaluated at the discrete sample.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch.distributions import Bernoulli, Independent

from scg.errors import SCGError
from scg.estimators.relax import RELAX

if TYPE_CHECKING:
    from scg.baselines.base import Baseline
    from scg.graph.nodes import StochasticNode

__all__ = ["REBAR"]


class REBAR(RELAX):
    """REBAR for Categorical, OneHotCategorical and Bernoulli nodes (unbiased).

    Args:
        relaxed_cost: f, maps the relaxed sample σ_λ(z) to the node's log-probability shape.
        temperature: the initial λ > 0 (learned as log λ).
        eta: the initial scale η (learned).
        baseline: an ordinary baseline subtracted as well (optional).

    ``estimator.eta`` and ``estimator.log_temperature`` are the learned parameters φ.
    """

    def __init__(
        self,
        relaxed_cost: Callable[[torch.Tensor], torch.Tensor],
        *,
        temperature: float = 0.5,
        eta: float = 1.0,
        baseline: Baseline | None = None,
    ) -> None:
        if not callable(relaxed_cost):
            raise SCGError(f"REBAR(relaxed_cost): expected a callable, got {type(relaxed_cost).__name__}")
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
            raise SCGError(f"REBAR(temperature=...): expected a positive number, got {temperature!r}")
        if isinstance(eta, bool) or not isinstance(eta, (int, float)) or not math.isfinite(eta):
            raise SCGError(f"REBAR(eta=...): expected a finite number, got {eta!r}")
        self.relaxed_cost = relaxed_cost
        self.eta = torch.nn.Parameter(torch.tensor(float(eta)))
        self.log_temperature = torch.nn.Parameter(torch.tensor(math.log(temperature)))
        super().__init__(relaxed_cost, parameters=[self.eta, self.log_temperature], baseline=baseline)

    @property
    def temperature(self) -> float:
        """The current λ."""
        return float(self.log_temperature.detach().exp())

    def evaluate(self, z: torch.Tensor, node: StochasticNode) -> torch.Tensor:
        """η · f(σ_λ(z))."""
        temp = self.log_temperature.to(z).exp()
        dist = node.dist.base_dist if isinstance(node.dist, Independent) else node.dist
        soft = torch.sigmoid(z / temp) if isinstance(dist, Bernoulli) else torch.softmax(z / temp, -1)
        cost = self.relaxed_cost(soft)
        if not isinstance(cost, torch.Tensor):
            raise SCGError(
                f"REBAR relaxed_cost of {node.describe()}: returned {type(cost).__name__}, expected a tensor "
                "of the node's log-probability shape"
            )
        return self.eta.to(z) * cost

    def __repr__(self) -> str:
        return f"REBAR(temperature={self.temperature:.3g}, eta={float(self.eta.detach()):.3g})"
