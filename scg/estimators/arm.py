"""ARM: the augment-REINFORCE-merge estimator for Bernoulli nodes (Yin & Zhou 2019).

For b ~ Bernoulli(σ(α)), write b = [u < σ(α)] with u ~ U(0, 1). ARM evaluates the cost at an
*antithetic pair* sharing u,

    b₁ = [u < σ(α)],   b₂ = [u > σ(−α)] = [1 − u < σ(α)],

both distributed as b, and estimates

    ∂/∂α E[f(b)] ≈ (f(b₂) − f(b₁)) (u − ½),

unbiased for any f, with no baseline needed (the pair is its own control variate).

In scg the pair is a sample dimension: ``scg.sample(Bernoulli(logits=α), n=2, estimator=ARM())``
returns ``(2, *batch)`` values, the first half b₁, the second b₂ (``n=2m`` gives m independent
pairs, averaged). Every cost computed from them is averaged with weight 1/n as for any ``n=k``
node, so Ĉ of slice i is f(b_i)/n; the node's score ([`ARM.log_prob`][scg.estimators.ARM.log_prob]) equals log p(b) in
value and has gradient ∓2(u − ½)∇α on b₁/b₂, so the score term of Algorithm 1 is exactly the
estimate above (averaged over the pairs). u itself is not kept: given the pair it is uniform on
the interval that produced it, and it is redrawn from there, which gives (u, b₁, b₂) the same
joint distribution. [`DisARM`][scg.estimators.DisARM] replaces the redrawn u by its conditional
mean.

Baselines: the two weights of a pair sum to zero, so a baseline equal on both members of a pair
(``Constant``, ``EMA``, ``Learned`` on inputs from before the node) cancels exactly and changes
nothing; ``LeaveOneOut`` would use one member as the other's baseline, which biases the
estimate: it is refused. Higher derivatives (``dice=True``) are not available (the score is
not a log-probability beyond its first derivative).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
from torch.distributions import Bernoulli, Distribution, Independent

from scg.errors import SCGError
from scg.estimators.base import Estimator

if TYPE_CHECKING:
    from scg.graph.nodes import StochasticNode

__all__ = ["ARM", "antithetic_pairs", "pair_count", "refuse_leave_one_out"]


def _logits(estimator: Estimator, dist: Distribution) -> tuple[torch.Tensor, int]:
    """The Bernoulli logits of ``dist`` and how many trailing dims are its event (``Independent``)."""
    base, event = dist, 0
    if isinstance(dist, Independent):
        base, event = dist.base_dist, dist.reinterpreted_batch_ndims
    if not isinstance(base, Bernoulli):
        raise SCGError(
            f"{type(estimator).__name__}() supports Bernoulli nodes (or Independent(Bernoulli)), not "
            f"{type(dist).__name__}"
        )
    return base.logits.expand(dist.batch_shape + dist.event_shape), event


def refuse_leave_one_out(estimator: Estimator, node: StochasticNode) -> None:
    """Refuse ``LeaveOneOut`` on an antithetic-pair node: it would use one member of a pair as the
    other's baseline (biased); a baseline equal on both members cancels and is allowed."""
    from scg.baselines.loo import LeaveOneOut

    baseline = node.baseline
    while baseline is not None and not isinstance(baseline, LeaveOneOut):
        baseline = getattr(baseline, "inner", None)  # (a wrapper's baseline: Normalized(LeaveOneOut()))
    if baseline is not None:
        raise SCGError(
            f"{type(estimator).__name__}() on {node.describe()}: LeaveOneOut would use "
            "one member of an antithetic pair as the other's baseline (biased); "
            "the pair needs no baseline"
        )


def pair_count(estimator: Estimator, n: int | None) -> int:
    """How many antithetic pairs the node's ``n`` holds (n = 2m); refuses n = None or odd."""
    if n is None or n % 2:
        raise SCGError(
            f"{type(estimator).__name__}() evaluates antithetic pairs: draw the node "
            f"with n=2 (or an even n, one pair per two slices), got n={n}"
        )
    return n // 2


def antithetic_pairs(logits: torch.Tensor, m: int) -> torch.Tensor:
    """m antithetic Bernoulli pairs ``(2m, *logits.shape)``: b₁ = [u < σ(α)], then b₂ = [u > σ(−α)]."""
    u = torch.rand((m, *logits.shape), dtype=logits.dtype, device=logits.device)
    return torch.cat([u < torch.sigmoid(logits), u > torch.sigmoid(-logits)]).to(logits.dtype)


class ARM(Estimator):
    """Augment-REINFORCE-merge for Bernoulli nodes drawn with ``n=2`` (unbiased, no baseline)."""

    score: ClassVar[bool] = True
    reducible: ClassVar[bool] = False  # (coupled slices: a cost reduced over them cancels)

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        logits, _ = _logits(self, dist)
        m = pair_count(self, sample_shape[0] if len(sample_shape) == 1 else None)
        with torch.no_grad():
            return antithetic_pairs(logits, m)

    def centred(self, logits: torch.Tensor, b1: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
        """u − ½ for the pair (b₁, b₂): u redrawn uniformly on the interval that gives the pair."""
        lo, hi = torch.sigmoid(-logits.abs()), torch.sigmoid(logits.abs())
        start = torch.where(b1 > b2, torch.zeros_like(lo), torch.where(b1 < b2, hi, lo))
        end = torch.where(b1 > b2, lo, torch.where(b1 < b2, torch.ones_like(hi), hi))
        u = start + (end - start) * torch.rand_like(start)
        return u - 0.5

    def log_prob(self, dist: Distribution, value: torch.Tensor) -> torch.Tensor:
        """log p(value) in value; gradient −2(u − ½)∇α on b₁ and +2(u − ½)∇α on b₂."""
        logits, event = _logits(self, dist)
        extra = value.dim() - len(dist.batch_shape) - event
        m = pair_count(self, value.shape[0] if extra == 1 else None)
        alpha = logits.expand(value.shape)
        with torch.no_grad():
            c = self.centred(alpha[:m].detach(), value[:m], value[m:])
        score = torch.cat([-2.0 * c, 2.0 * c]) * (alpha - alpha.detach())
        if event:
            score = score.sum(tuple(range(-event, 0)))
        return dist.log_prob(value).detach() + score

    def control_variate(self, node: StochasticNode) -> None:
        """No control variate (the pair is its own); refuses a baseline that differs within a
        pair (``LeaveOneOut``), which would bias the estimate."""
        refuse_leave_one_out(self, node)
        return None
