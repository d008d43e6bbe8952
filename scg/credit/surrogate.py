"""The surrogate loss of Algorithm 1 (Schulman, Heess, Weber & Abbeel 2015).

For a graph with stochastic nodes S, cost nodes C and parameters θ, Theorem 1 gives

    ∇_θ E[Σ_c c] = E[ Σ_{v∈S} ∇_θ log p(v | parents_v) · (Ĉ_v − b_v)  +  Σ_{c∈C} ∇_θ c ],

with Ĉ_v = Σ_{c ∈ C, v ≺ c} ĉ the sum of the costs that v *influences* (v ≺ c: a data-flow path
from v to c) and b_v a baseline that does not depend on v's descendants (Theorem 2). Algorithm 1
turns this into a scalar whose ordinary gradient is the estimate:

    L(θ) = Σ_c c + Σ_v log p(v | parents_v) · stop_gradient(Ĉ_v − b_v).

This module builds L exactly, with these refinements:

* Each element of a batched node is credited with the matching elements of the costs (leading
  dimensions line up), so examples in a batch do not share credit.
* The score terms log p · A (A detached) and the baselines' regression losses are summed to s
  and added as ``s − stop_gradient(s)``: its value is exactly zero, so ``L`` *evaluates* to the
  objective (loggable) while its gradient is unchanged (one zeroing per surrogate, not one per
  term; a node group with live control variates keeps ``(log p − stop_gradient(log p)) · A``).
* Sample dimensions (``n=k`` samples, enumerated supports; `scg.credit.sample_dims`): costs are
  averaged over them with weights ω (1/k, or p(value) for an enumeration), so L evaluates to
  Σ_c Σ ω ⊙ c and estimates ∇ E[mean over samples of Σ c].
* ``dice=True`` / ``dice_lambda=λ`` build DiCE / Loaded DiCE objectives (`scg.credit.dice`) whose
  higher derivatives are estimates too; ``score_scale=λ`` reweights the score terms.

What is credited to what is decided once per graph structure by the
`CreditPlan` (groups, influence, per-element / whole-plate weights,
discounts, sample layouts); this module applies it to one run's values
(`scg.credit.signals`): Ĉ = W @ stack(costs), one matrix product per pair of groups of
equally shaped nodes and costs instead of a Python loop over (node, cost) pairs.
"""

from __future__ import annotations

import math
import warnings
from numbers import Real

import numpy as np
import torch

from scg.credit import dice as dice_mod
from scg.credit.baselining import BaselineValues, apply_baselines, check_baseline_values
from scg.credit.plan import CreditPlan, influence_matrix, plan_for, weight_matrix
from scg.credit.plates import plate_rank
from scg.credit.sample_dims import SamplePlan
from scg.credit.signals import CostGroup, NodeGroup, c_hat, control_variates, cost_groups, node_groups
from scg.credit.soundness import check_after_registration, check_baseline_inputs
from scg.credit.traced import traced_surrogate_loss
from scg.errors import SCGError, expect_bool
from scg.graph.graph import GraphRecord, is_compiling
from scg.graph.nodes import CostNode, SampleInfo, StochasticNode, user_stacklevel

__all__ = ["objective", "surrogate_loss"]


def surrogate_loss(
    graph: GraphRecord,
    *,
    discount: float | None = None,
    dice: bool = False,
    dice_lambda: float | None = None,
    score_scale: float = 1.0,
    check_finite: bool = True,
) -> torch.Tensor:
    """Build the surrogate loss of ``graph`` (Algorithm 1; see the module docstring).

    Args:
        graph: a graph whose program has run (usually after its ``with`` block).
        discount: γ in [0, 1]. A cost at step s then credits a node at step t ≤ s with weight
            γ^(s − t) (the C2F paper's discounted reward-to-go); every node and cost connected
            by influence needs a ``step``. Biased for γ < 1 (it optimizes a different credit).
        dice: build the DiCE objective Σ_c ⊡(τ_c) ω_c c + Σ_v (1 − ⊡(log p_v)) b_v (Foerster
            et al. 2018; baselines as in Mao et al. 2019): derivatives of every order are
            unbiased estimates, not only the first. Not combinable with ``discount``.
        dice_lambda: λ in [0, 1]: Loaded DiCE (Farquhar et al. 2019) instead, which damps the
            higher-order credit of a node's ancestors by λ^(t_v − t_u); first derivatives are
            Algorithm 1's for every λ (see `scg.credit.dice`). Implies ``dice``. Refused for a
            cost declared ``reduced=`` over n > 1 samples of a node it credits (its samples'
            cross terms would be 0): use ``dice=True`` there.
        score_scale: multiply every score-function term (and DiCE's ⊡ − 1 parts) by this
            factor, as the C2F paper's λ weight on REINFORCE. A reweighting: unbiased only
            for 1 (for a graph with no pathwise terms the expectation is ``score_scale`` times
            the gradient, the same direction).
        check_finite: refuse a non-finite cost or baseline value with an `SCGError` naming it,
            the costs checked before any baseline sees them: two host reads per surrogate (one
            for all the costs, one for all the baselines' values), which on a GPU wait for the
            device to finish the step so far. ``False``: no host read at all (a NaN or ±inf then
            reaches the loss, the gradients and the baselines' state unnoticed, as in a
            hand-written step; a step compiled with ``torch.compile`` never makes the reads).

    Returns:
        A scalar equal in value to the objective Σ_c Σ ω_c ⊙ c (the sum of the costs when no
        node has a sample dimension), whose gradient is an unbiased estimate of ∇_θ of its
        expectation for unbiased estimators.
    """
    _check_options(graph, discount, dice, dice_lambda, score_scale, check_finite)
    compiling = is_compiling()
    if not compiling and not torch.is_grad_enabled():
        warnings.warn(
            "surrogate_loss() under torch.no_grad(): the loss has no gradient (its value is the objective) "
            "and the graph is spent; build it with gradients on to train, or compute the objective from "
            "the costs for logging",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    if compiling:  # dynamo traces the program: no NumPy, no host reads
        graph.mark_built()
        return traced_surrogate_loss(
            graph, discount=discount, dice=dice, dice_lambda=dice_lambda, score_scale=score_scale
        )
    full = graph.full_influence()
    check_after_registration(graph, full)
    check_baseline_inputs(graph, full)
    graph.mark_built()
    plan = plan_for(graph, full, discount, dice, dice_lambda)
    graph.set_credit(plan.credit_pairs)
    losses: list[torch.Tensor] = []  # the baselines' regression losses
    values: BaselineValues = []  # and their values (checked once, at the end)
    has_baselines = graph.has_baselines
    cost_baselines = graph.has_cost_baselines
    cgs = cost_groups(plan, graph.costs, losses, values, cost_baselines, check_finite)
    ngs = node_groups(plan, graph.nodes)
    if dice and dice_lambda is None:
        baselines = _dice_baselines(graph, plan, ngs, cgs, losses, values)
        if check_finite:
            check_baseline_values(values)
        return dice_mod.dice_objective(plan, cgs, ngs, baselines, score_scale, losses)
    loss = _costs_sum(cgs)  # Σ_c ω ⊙ c
    factors = None if dice_lambda is None else _loaded(graph, plan, ngs, dice_lambda)
    # Σ_v log p(v) · stop_gradient(Ĉ_v − b_v) and the baselines' regression losses, summed, then
    # added as (s − stop_gradient(s)): zero in value, the same gradient as each term added alone
    score: torch.Tensor | None = None
    for gi, ng in enumerate(ngs):
        target = c_hat(plan, gi, ng, cgs, "target")
        if target is None:
            continue
        adv = apply_baselines(ng.members, target, losses, values, _info(plan, ng)) if has_baselines else target
        cv = plan.node_groups[gi].cv
        adv, path = control_variates(ng, plan.samples, adv) if cv else (adv, None)
        if factors is not None:  # Loaded DiCE credits the live costs (their θ-dependence meets the score there)
            factor = factors[gi]
            adv = _loaded_signal(plan, gi, ng, cgs, target, adv)
        elif cv:  # the control variates are live (trained): only log p's gradient may meet them
            factor = ng.logp - ng.logp.detach()
        else:  # the signal is detached
            factor = ng.logp
        part = (factor * adv).sum()
        if path is not None:
            part = part + path
        if score_scale != 1.0:
            part = score_scale * part
        score = part if score is None else score + part
    for extra in losses:
        score = extra if score is None else score + extra
    # every node baseline's value reached the score sum; a cost baseline's need not
    if values and check_finite:
        check_baseline_values(values, None if cost_baselines else score)
    return loss if score is None else loss + (score - score.detach())


def _info(plan: CreditPlan, ng: NodeGroup) -> list[SampleInfo] | None:
    """The sample layout of each node of a group, for its baseline (None: no sample dimensions)."""
    if not plan.samples.active:
        return None
    return [plan.samples.info(v) for v in ng.members]


def _costs_sum(cgs: list[CostGroup]) -> torch.Tensor:
    total: torch.Tensor | None = None
    for cg in cgs:
        part = cg.total if cg.total is not None else cg.live.sum()
        total = part if total is None else total + part
    assert total is not None  # (a graph without costs is refused)
    return total


def _check_options(
    graph: GraphRecord,
    discount: float | None,
    dice: bool,
    dice_lambda: float | None,
    score_scale: float,
    check_finite: bool,
) -> None:
    if not isinstance(graph, GraphRecord):
        raise SCGError(f"scg.surrogate_loss(graph): expected a scg.Graph, got {type(graph).__name__}")
    if discount is not None and (
        isinstance(discount, bool) or not isinstance(discount, Real) or not 0.0 <= discount <= 1.0
    ):
        raise SCGError(f"surrogate_loss(discount=...): expected None or a number in [0, 1], got {discount!r}")
    if graph.built:
        raise SCGError(
            "surrogate_loss() was already called on this graph; a graph records one "
            "run of the program, so build a new scg.Graph() for the next estimate"
        )
    if not graph.costs:
        raise SCGError("surrogate_loss() on a graph with no cost nodes: add costs with scg.cost()")
    # (the common case first, a float and two bools, without the ABC check of ``Real`` or a call:
    # it runs every step; anything else takes the full checks and their messages)
    if not (type(score_scale) is float and 0.0 <= score_scale < math.inf) and (
        isinstance(score_scale, bool)
        or not isinstance(score_scale, Real)
        or not math.isfinite(score_scale)
        or score_scale < 0
    ):  # (a negative λ would turn the score terms' descent into ascent)
        raise SCGError(f"surrogate_loss(score_scale=...): expected a finite number >= 0, got {score_scale!r}")
    if type(check_finite) is not bool or type(dice) is not bool:
        for what, flag in (("check_finite", check_finite), ("dice", dice)):
            expect_bool(flag, f"surrogate_loss({what}=...)")
    if dice and discount is not None and dice_lambda is None:
        raise SCGError(
            "surrogate_loss(dice=True, discount=...): the DiCE objective has no "
            "per-(node, cost) discount; use dice_lambda=λ (Loaded DiCE), which credits "
            "discounted costs-to-go"
        )
    if dice_lambda is not None and (
        isinstance(dice_lambda, bool) or not isinstance(dice_lambda, Real) or not 0.0 <= dice_lambda <= 1.0
    ):
        raise SCGError(f"surrogate_loss(dice_lambda=...): expected a number in [0, 1], got {dice_lambda!r}")


def _dice_baselines(
    graph: GraphRecord,
    plan: CreditPlan,
    ngs: list[NodeGroup],
    cgs: list[CostGroup],
    losses: list[torch.Tensor],
    values: BaselineValues,
) -> list[torch.Tensor | None]:
    """DiCE's baseline per node group, Σ_{v≺c} ω b_c + b_v (None without baselines); refuses
    the credit DiCE's per-element weights cannot express."""
    mixed = plan.mixed
    if mixed.any() or any(_shares_beyond_plates(v, len(ng.layout)) for ng in ngs for v in ng.members):
        i, j = (int(x[0]) for x in np.nonzero(mixed)) if mixed.any() else (0, 0)
        raise SCGError(
            f"surrogate_loss(dice=True): {graph.cost_nodes[j].describe()} mixes the "
            f"batch elements of {graph.nodes[plan.score[i]].describe()} (or a node "
            "declares plates=); DiCE's per-element weights would be biased there, and no surrogate "
            "gives exact higher derivatives for it (Loaded DiCE, dice_lambda, misses the cross terms "
            "between the node's elements: zero, not the exact ones). Draw the elements as one node "
            "(Independent(..., reinterpreted_batch_ndims)) for dice=True, or use the default "
            "surrogate (first derivatives)"
        )
    has_cost_baselines = graph.has_cost_baselines
    out: list[torch.Tensor | None] = []
    for gi, ng in enumerate(ngs):
        target = None
        if has_cost_baselines or any(v.baseline is not None for v in ng.members):
            target = c_hat(plan, gi, ng, cgs, "target")
        if target is None:
            out.append(None)
            continue
        adv = apply_baselines(ng.members, target, losses, values, _info(plan, ng))
        raw = c_hat(plan, gi, ng, cgs, "raw") if has_cost_baselines else target
        assert raw is not None
        out.append((raw - adv).detach())
    return out


def _shares_beyond_plates(v: StochasticNode, n_sample: int) -> bool:
    """Whether ``v`` declares plates that leave batch dimensions of more than one element, whose
    elements share their credit (a declaration covering every batch dimension shares nothing)."""
    if v.plates is None:
        return False
    shape = (v.log_prob if v.log_prob is not None else v.value).shape
    return any(s > 1 for s in shape[n_sample + plate_rank(v, n_sample) :])


def _loaded(graph: GraphRecord, plan: CreditPlan, ngs: list[NodeGroup], lam: float) -> list[torch.Tensor]:
    """Loaded DiCE's per-group factors ⊡(w_v) − ⊡(w_v − log p_v) (see `scg.credit.dice`)."""
    _refuse_joint_credit(graph, plan)
    score = [graph.nodes[i] for i in plan.score]
    anc = influence_matrix(graph.full_influence(), score, score)  # anc[u, v]: u influences v
    lw = weight_matrix(anc, score, score, None if lam == 1.0 else lam, "dice_lambda")
    np.fill_diagonal(lw, 1.0)
    return dice_mod.loaded_factors(plan, ngs, lw)


def _refuse_joint_credit(graph: GraphRecord, plan: CreditPlan) -> None:
    """Refuse Loaded DiCE where a cost declared ``reduced=u`` credits the samples of a score node
    along u's sample dimension jointly (each sample with the whole cost, VIMCO/IWAE): the factors
    are per element, so the cross terms ∇log p_i ∇log p_jᵀ (i ≠ j) between those samples, which
    meet in the cost, come out as 0 in the second and higher derivatives (a log-mean-exp over
    n=2 samples: H[1, 1] 0.1012 against the exact 0.1211 before the refusal); DiCE's τ_c sums
    them, exactly. With n=1 there are no cross terms (accepted)."""
    if not plan.samples.active:
        return
    sizes = plan.sizes
    for j, ci in enumerate(plan.costs):
        cost = graph.nodes[ci]
        if not isinstance(cost, CostNode) or not cost.reduced:
            continue
        for i in np.nonzero(plan.influence[:, j])[0].tolist():
            v = graph.nodes[plan.score[i]]
            dims = [u for u in plan.samples.layout(v) if cost.reduced >> u & 1 and sizes[u] > 1]
            if not dims:
                continue
            u = graph.nodes[dims[0]]
            raise SCGError(
                f"surrogate_loss(dice_lambda=...): {cost.describe()} is declared reduced= over the sample "
                f"dimension of {u.describe()} (n={sizes[u.index]}), so it credits the samples of "
                f"{v.describe()} along that dimension jointly; Loaded DiCE's per-element factors miss the cross "
                "terms between those samples in the second and higher derivatives (they come out as 0, "
                "a wrong Hessian). Use surrogate_loss(dice=True) for exact derivatives of every order "
                "(it covers reduced costs), or the default surrogate for first derivatives (dice_lambda's "
                "first derivative is the same)"
            )


def _loaded_signal(
    plan: CreditPlan, gi: int, ng: NodeGroup, cgs: list[CostGroup], target: torch.Tensor, adv: torch.Tensor
) -> torch.Tensor:
    """Loaded DiCE's signal: the live Ĉ (not stopped) minus the detached baselines."""
    live = c_hat(plan, gi, ng, cgs, "live")
    assert live is not None
    has_cost_baselines = any(c.baseline is not None for cg in cgs for c in cg.members)
    if adv is target and not has_cost_baselines:
        return live
    raw = c_hat(plan, gi, ng, cgs, "raw") if has_cost_baselines else target
    assert raw is not None
    return live - (raw - adv).detach()


def objective(graph: GraphRecord) -> torch.Tensor:
    """The objective's value for this run: Σ_c Σ ω_c ⊙ c, differentiable through the costs.

    ω averages over sample dimensions (1/k for ``n=k``, p(value) for enumerated nodes; see
    `scg.credit.sample_dims`), so without them this is Σ_c sum(c). ``scg.testing`` weights it by
    the probability of each enumerated run to get E[Σ c] exactly.
    """
    costs = graph.cost_nodes
    if not costs:
        raise SCGError("objective() on a graph with no cost nodes: add costs with scg.cost()")
    plan = SamplePlan(graph, graph.full_influence())
    total: torch.Tensor | None = None
    for c in costs:
        lay = plan.layout(c) if plan.active else ()
        part = c.value
        if lay:
            scale, factor = plan.weight(lay, c.value.shape, c)
            part = part * scale if factor is None else part * factor * scale
        total = part.sum() if total is None else total + part.sum()
    assert total is not None
    return total
