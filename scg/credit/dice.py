"""DiCE and Loaded DiCE: surrogates whose derivatives of every order are estimates.

Algorithm 1's surrogate L = Σ c + Σ_v log p_v · ⊥(Ĉ_v − b_v) has the right first derivative, but
its second derivative misses the terms where a cost's dependence on θ and a node's score meet, and
the products of two scores (Foerster et al. 2018, Section 3). DiCE repairs this with the *magic
box* ⊡(τ) = exp(τ − ⊥τ), which evaluates to 1 and whose derivative is ⊡(τ)·∇τ:

    L_DiCE = Σ_c Σ ω_c ⊙ ⊡(τ_c) ⊙ c  +  Σ_v (1 − ⊡(log p_v)) ⊙ b_v,
    τ_c   = Σ_{v ≺ c} log p(v | parents_v)        (the score nodes that influence c).

By induction ∇^n ⊡(τ_c) c estimates ∇^n of the expectation for every n. The second sum is the
baseline of Mao et al. (2019): for b_v detached and independent of v, E_v[∇^n ⊡(log p_v)] = ∇^n 1
= 0, so it changes no expectation, at any order, and at first order it is Algorithm 1's −∇log p·b.
Cost baselines b_c enter the same way, through each node's b_v = Σ_{v≺c} ω b_c. Forward value:
⊡ = 1, so L_DiCE evaluates to the objective Σ_c Σ ω_c ⊙ c.

Loaded DiCE (Farquhar, Whiteson & Foerster 2019) writes the objective per node with a
λ-discounted dependency sum,

    L = Σ_c Σ ω_c ⊙ c + Σ_v (⊡(w_v) − ⊡(w_v − log p_v)) ⊙ (Ĉ_v − b_v),
    w_v = Σ_{u ≼ v} λ^(t_v − t_u) log p_u        (v and the score nodes that influence it).

Here Ĉ_v is *not* stopped (unlike Algorithm 1's): its own θ-dependence meets the scores in the
higher derivatives, as in DiCE; only the baseline b_v is detached. Since the factor evaluates to
0, the first derivative is ∇log p_v · (Ĉ_v − b_v) for every λ, i.e. Algorithm 1 (with
``discount`` and baselines as usual); and since the factor equals
⊡(w_v − log p_v)(⊡(log p_v) − 1), baselines stay unbiased at every order. For λ = 1 and a
*sequential* program (every score node that influences a cost and precedes v also influences
v, e.g. a decoder or an RL rollout) the sum telescopes to DiCE exactly; for λ < 1 higher-order
credit to distant ancestors is damped (bias for lower variance), and λ = 0 keeps only each node's
own ⊡(log p_v) − 1. In a DAG with independent branches that meet in a cost (among them the
elements of one batched node meeting in a cost: their cross terms come out as 0), use ``dice=True``
for exact higher derivatives. A cost declared ``reduced=`` over a node's n > 1 samples is such a
meeting too, and there Loaded DiCE is refused (``surrogate._refuse_joint_credit``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from scg.credit.sample_dims import align_batch_to_cost

if TYPE_CHECKING:
    from scg.credit.plan import CreditPlan
    from scg.credit.signals import CostGroup, NodeGroup
    from scg.graph.nodes import Node

__all__ = ["dice_objective", "loaded_factors", "magic_box"]


def magic_box(x: torch.Tensor) -> torch.Tensor:
    """⊡(x) = exp(x − stop_gradient(x)): value 1, derivative ⊡(x)·∇x."""
    return torch.exp(x - x.detach())


def _sum_logp(
    plan: CreditPlan,
    sources: Sequence[NodeGroup],
    weights: np.ndarray,
    target_rows: list[int],
    target_layout: tuple[int, ...],
    target_shape: torch.Size,
    describe_target: Callable[[int], Node],
) -> torch.Tensor | None:
    """Σ_u weights[u, t] · log p_u aligned to each target t (one product per source group)."""
    out: torch.Tensor | None = None
    for gp, src in zip(plan.node_groups, sources):
        sub = weights[np.ix_(gp.rows, target_rows)]
        if not sub.any():
            continue
        i, j = (int(x[0]) for x in np.nonzero(sub))
        aligned = align_batch_to_cost(
            src.logp, src.layout, target_layout, target_shape, src.members[i], describe_target(j), plan.sizes
        )
        w = torch.as_tensor(sub.T, dtype=src.logp.dtype, device=src.logp.device)
        part = (w @ aligned.reshape(aligned.shape[0], -1)).reshape(len(target_rows), *target_shape)
        out = part if out is None else out + part
    return out


def dice_objective(
    plan: CreditPlan,
    cgs: Sequence[CostGroup],
    ngs: Sequence[NodeGroup],
    baselines: Sequence[torch.Tensor | None],
    score_scale: float,
    extra_losses: Sequence[torch.Tensor],
) -> torch.Tensor:
    """L_DiCE of the module docstring (``surrogate_loss(dice=True)``): τ_c from the plan's
    influence, and ``baselines[g]``, the detached Σ_{v≺c} ω b_c + b_v of node group g (None
    without baselines)."""
    s = float(score_scale)
    loss: torch.Tensor | None = None
    for cp, cg in zip(plan.cost_groups, cgs):
        tau = _sum_logp(
            plan,
            ngs,
            plan.influence,
            cp.cols,
            cg.layout,
            cg.stack.shape[1:],
            lambda j, cg=cg: cg.members[j],  # type: ignore[misc]
        )
        x = cg.weighted(cg.stack)
        if tau is not None:
            box = magic_box(tau)
            x = x * (box if s == 1.0 else 1.0 + s * (box - 1.0))
        part = x.sum()
        loss = part if loss is None else loss + part
    assert loss is not None
    for ng, b in zip(ngs, baselines):
        if b is not None:
            loss = loss + s * ((1.0 - magic_box(ng.logp)) * b).sum()
    for extra in extra_losses:
        loss = loss + (extra - extra.detach())
    return loss


def loaded_factors(plan: CreditPlan, ngs: Sequence[NodeGroup], lw: np.ndarray) -> list[torch.Tensor]:
    """⊡(w_v) − ⊡(w_v − log p_v) for each node group (Loaded DiCE, module docstring).

    ``lw[u, v]`` = λ^(t_v − t_u) for u ≼ v among the score nodes (1 on the diagonal).
    """
    out = []
    for gp, ng in zip(plan.node_groups, ngs):
        shape = ng.logp.shape[1:]
        wv = _sum_logp(plan, ngs, lw, gp.rows, ng.layout, shape, lambda j, ng=ng: ng.members[j])  # type: ignore[misc]
        assert wv is not None  # the diagonal is 1
        out.append(magic_box(wv) - magic_box(wv - ng.logp))
    return out
