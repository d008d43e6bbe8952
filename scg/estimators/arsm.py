"""ARSM: the augment-REINFORCE-swap-merge estimator for categorical nodes (Yin, Yue & Zhou 2019).

*Augment.* A category z ∈ {0, …, K−1} with logits φ is drawn through a Dirichlet variable:

    π ~ Dir(1_K),   z = argmin_i (log π_i − φ_i),

so P(z = k) = softmax(φ)_k (π ∝ independent Exp(1) variables, and the smallest of E_i e^{−φ_i}
is the i-th with probability ∝ e^{φ_i}). *REINFORCE* on π gives (the paper's AR estimator)

    ∂/∂φ_m E[f(z)] = E[f(z) (1 − K π_m)].

*Swap.* π^{m⇌j}, π with its m-th and j-th entries swapped, is again Dir(1_K), so with the
*pseudo-action* z^{m⇌j} = argmin_i (log π^{m⇌j}_i − φ_i) the same gradient is
E[f(z^{m⇌j}) (1 − K π_j)] for every reference category j. The K estimates for a fixed j sum to a
quantity of expectation Σ_m ∂E/∂φ_m = 0 (softmax is shift invariant), so their mean
f̄^j = (1/K) Σ_m f(z^{m⇌j}) is a baseline. *Merge*: averaging over j,

    ĝ_m = Σ_j (f(z^{m⇌j}) − f̄^j) (1/K − π_j),

unbiased for any f. z^{m⇌m} = z, and z^{m⇌j} = z^{j⇌m}: the estimate needs f at z and at the
K(K−1)/2 pseudo-actions of the swaps m < j, G = 1 + K(K−1)/2 evaluations (`pseudo_action_count`).
Collecting the terms of ĝ by evaluation, f(z) has the weight vector 1/K − π and f(z^{m⇌j})
(m < j) the vector (1/K − π_j)(e_m − 1/K) + (1/K − π_m)(e_j − 1/K) on ∇φ; the G vectors sum to
zero (f̄^j cancels a constant f). Several categoricals decoded jointly (``Independent``, and the
batch elements) are swapped at once with the same (m, j), which keeps the count at G: the
joint law of independent Dir(1_K) variables is invariant under one permutation applied to all.

In scg, as for [`CategoricalDisARM`][scg.estimators.CategoricalDisARM], the evaluations are a
sample dimension: ``scg.sample(Categorical(logits=θ), n=pseudo_action_count(K),
estimator=ARSM())`` returns z then the pseudo-actions of the swaps (0, 1), (0, 2), …, (K−2, K−1)
(``n = r·G``: r independent draws, slice s·r + i the s-th evaluation of draw i, averaged). Each
evaluation is distributed as z, so the objective's value (their mean) is unbiased too. Every cost
is averaged with weight 1/n, so the node's score ([`ARSM.log_prob`][scg.estimators.ARSM.log_prob])
is log p(value) in value with G times the weight vector above on ∇φ as its gradient, and the
score term is ĝ (averaged over the r draws). π is not determined by the evaluations: the
estimator keeps the π of its draw until the node's score is computed (both happen inside
``scg.sample``), and refuses a value it did not draw (an intervention). Categorical and
OneHotCategorical nodes, and ``Independent`` of them. Baselines equal on all G evaluations of a
draw cancel; ``LeaveOneOut`` is refused; no ``dice=True``. The paper evaluates f only at the
distinct pseudo-actions; here the G slices are static, so each estimate costs G evaluations of the
downstream program (K = 5: 11), which suits small K.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
from torch.distributions import Distribution

from scg.errors import SCGError
from scg.estimators.arm import refuse_leave_one_out
from scg.estimators.base import Estimator
from scg.estimators.categorical import category_indices, category_values
from scg.estimators.disarm_categorical import categorical_logits

if TYPE_CHECKING:
    from scg.graph.nodes import StochasticNode

__all__ = ["ARSM", "pseudo_action_count", "swap_pairs", "swap_weights"]


def pseudo_action_count(k: int) -> int:
    """G = 1 + K(K−1)/2: the sample z and the pseudo-actions of the K(K−1)/2 swaps m < j."""
    return 1 + k * (k - 1) // 2


def swap_pairs(k: int, device: torch.device | None = None) -> torch.Tensor:
    """The (m, j) of each evaluation, ``(G, 2)``: (0, 0) for z itself, then the swaps m < j."""
    pairs = [(0, 0), *itertools.combinations(range(k), 2)]
    return torch.tensor(pairs, dtype=torch.long, device=device)


def swap_weights(pi: torch.Tensor) -> torch.Tensor:
    """The weight vector on ∇φ of each evaluation, ``(..., G, K)`` from π ``(..., K)``: 1/K − π for
    z, (1/K − π_j)(e_m − 1/K) + (1/K − π_m)(e_j − 1/K) for the swap (m, j)."""
    k = pi.shape[-1]
    w = 1.0 / k - pi
    pairs = swap_pairs(k, pi.device)[1:]
    m, j = pairs[:, 0], pairs[:, 1]
    eye = torch.eye(k, dtype=pi.dtype, device=pi.device)
    swaps = w[..., j, None] * (eye[m] - 1.0 / k) + w[..., m, None] * (eye[j] - 1.0 / k)
    return torch.cat([w.unsqueeze(-2), swaps], -2)


@dataclass(kw_only=True, slots=True)
class _Draw:
    """The categories of the estimator's latest draw ``(n, *batch)`` and its π ``(r, *batch, K)``."""

    categories: torch.Tensor
    pi: torch.Tensor


class ARSM(Estimator):
    """Augment-REINFORCE-swap-merge for categorical nodes drawn with ``n = r·(1 + K(K−1)/2)``
    (unbiased, no baseline needed)."""

    score: ClassVar[bool] = True
    reducible: ClassVar[bool] = False  # (coupled slices: a cost reduced over them cancels)

    def __init__(self) -> None:
        self._drawn: _Draw | None = None

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        """z and its pseudo-actions, ``(G·r, *batch)`` (one-hot: ``(G·r, *batch, K)``)."""
        logits, onehot, _ = categorical_logits(self, dist)
        k = logits.shape[-1]
        r = self.draw_count(k, sample_shape[0] if len(sample_shape) == 1 else None)
        with torch.no_grad():
            e = torch.empty((r, *logits.shape), dtype=logits.dtype, device=logits.device).exponential_()
            e = e.clamp_min(torch.finfo(e.dtype).tiny)  # (a zero would win every argmin)
            pi = e / e.sum(-1, keepdim=True)
            pairs = swap_pairs(k, logits.device)
            perm = torch.arange(k, device=logits.device).repeat(len(pairs), 1)  # (G, K): the swap (m, j)
            perm.scatter_(1, pairs, pairs.flip(1))
            swapped = e.log()[..., perm]  # (r, *batch, G, K)
            z = (swapped - logits.unsqueeze(-2)).argmin(-1).movedim(-1, 0).reshape(-1, *logits.shape[:-1])
        self._drawn = _Draw(categories=z, pi=pi)
        return category_values(z, onehot, k, logits)

    def draw_count(self, k: int, n: int | None) -> int:
        """How many independent draws the node's ``n`` holds (n = r·G); refuses any other n."""
        g = pseudo_action_count(k)
        if n is None or n % g:
            raise SCGError(
                f"{type(self).__name__}() evaluates z and its {g - 1} pseudo-actions (K = {k}): draw the node with "
                f"n={g} = 1 + K(K-1)/2 (or a multiple, one draw per {g} slices), got n={n}"
            )
        return n // g

    def log_prob(self, dist: Distribution, value: torch.Tensor) -> torch.Tensor:
        """log p(value) in value; gradient G times each evaluation's weight vector (`swap_weights`) on ∇φ."""
        logits, onehot, event = categorical_logits(self, dist)
        k = logits.shape[-1]
        z = category_indices(value.detach(), onehot)
        drawn, self._drawn = self._drawn, None
        if drawn is None or drawn.categories.shape != z.shape or not torch.equal(drawn.categories, z):
            raise SCGError(
                f"{type(self).__name__}() scores only the values of its own draw (it needs the Dirichlet π "
                f"behind them), got values of shape {tuple(z.shape)} it did not draw (an intervention?)"
            )
        g = pseudo_action_count(k)
        weights = (g * self.merged(drawn.pi)).movedim(-2, 0)  # (G, r, *batch, K)
        score = (weights.reshape(*z.shape, k) * (logits - logits.detach())).sum(-1)
        if event:
            score = score.sum(tuple(range(-event, 0)))
        return dist.log_prob(value).detach() + score

    def merged(self, pi: torch.Tensor) -> torch.Tensor:
        """The weight vector on ∇φ of each evaluation, ``(r, *batch, G, K)`` (`swap_weights`)."""
        return swap_weights(pi)

    def control_variate(self, node: StochasticNode) -> None:
        """No control variate (f̄^j is built in); refuses ``LeaveOneOut`` (biased within a draw)."""
        refuse_leave_one_out(self, node)
        return None
