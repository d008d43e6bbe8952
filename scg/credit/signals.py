"""Learning signals: the values a `CreditPlan` is applied to.

For one graph, the costs of each cost group are stacked (``(q, *shape)``) with their sample
weights ω, and the log-probabilities of each node group (``(r, *shape)``). A node group's
learning signal is

    Ĉ_G = Σ_H  W_GH @ align(ω ⊙ (c − b_c))         (one product per pair of groups)

minus its node baselines b_v (applied by `scg.credit.baselining`, as the costs' baselines b_c
are) and the estimators' control variates (`control_variates`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from scg.credit.baselining import BaselineValues, apply_baselines
from scg.credit.plan import CreditPlan
from scg.credit.plates import share_beyond
from scg.credit.sample_dims import SamplePlan, align_batch_to_node
from scg.errors import SCGError
from scg.graph.nodes import CostNode, Node, StochasticNode

__all__ = [
    "CostGroup",
    "NodeGroup",
    "apply_weights",
    "c_hat",
    "control_variates",
    "cost_groups",
    "node_groups",
]


@dataclass(kw_only=True, slots=True)
class CostGroup:
    """Costs of one shape and sample layout: ``stack`` (q, *shape) and their weights ω."""

    members: list[CostNode]
    layout: tuple[int, ...]
    stack: torch.Tensor
    scale: float
    factor: torch.Tensor | None
    target: torch.Tensor  # detached ω ⊙ (c − b_c): what Ĉ sums
    raw: torch.Tensor  # detached ω ⊙ c
    live: torch.Tensor  # ω ⊙ c, differentiable (the objective's terms)
    total: torch.Tensor | None = None  # live.sum(), when computed for the finiteness check

    def weighted(self, x: torch.Tensor) -> torch.Tensor:
        """ω ⊙ x, differentiable through the probabilities of enumerated nodes."""
        if self.factor is not None:
            x = x * self.factor
        return x if self.scale == 1.0 else x * self.scale


@dataclass(kw_only=True, slots=True)
class NodeGroup:
    """Score nodes of one log-probability shape and sample layout."""

    members: list[StochasticNode]
    layout: tuple[int, ...]
    logp: torch.Tensor  # (r, *shape)


def _check_finite(stack: torch.Tensor, costs: Sequence[CostNode]) -> None:
    if bool(torch.isfinite(stack).all()):
        return
    for c in costs:
        if not bool(torch.isfinite(c.value).all()):
            raise SCGError(f"{c.describe()} is not finite (it contains NaN or inf)")


def _stack_rows(tensors: list[torch.Tensor]) -> torch.Tensor:
    """``torch.stack(tensors)``, ``(r, *shape)``; for one tensor a view with the leading dimension, not a copy."""
    return torch.stack(tensors) if len(tensors) > 1 else tensors[0].unsqueeze(0)


def cost_groups(
    plan: CreditPlan,
    costs: Sequence[CostNode],
    losses: list[torch.Tensor],
    values: BaselineValues,
    has_baselines: bool,
    check_finite: bool,
) -> list[CostGroup]:
    """The stacked costs of each of the plan's cost groups: their cost baselines subtracted
    (``target``; the baselines' losses appended to ``losses``, their values to ``values``;
    ``has_baselines``: a cost has one) and weighted by ω. ``check_finite``: refuse a non-finite
    cost, naming it (one host read for all of them)."""
    stacked: list[tuple[list[CostNode], torch.Tensor, torch.Tensor]] = []  # members, stack, sum
    total: torch.Tensor | None = None
    for cp in plan.cost_groups:
        members = [costs[i] for i in cp.cols]
        stack = _stack_rows([c.value for c in members])
        # one sum per group is both the finiteness check (NaN and ±inf propagate into it) and,
        # without weights, the objective's term
        part = stack.sum()
        total = part if total is None else total + part
        stacked.append((members, stack, part))
    assert total is not None  # (a graph without costs is refused)
    if check_finite and not math.isfinite(total.item()):  # one host read, before a baseline sees a cost
        for members, stack, _ in stacked:  # names the cost (a finite sum that overflowed passes)
            _check_finite(stack.detach(), members)
    out = []
    samples = plan.samples
    for cp, (members, stack, part) in zip(plan.cost_groups, stacked):
        fixed = stack.detach() if stack.requires_grad else stack  # (costs of discrete draws need no detach)
        # target and raw start as the same detached tensor, the stack itself when it needs no
        # grad (each is replaced, never written). Made slot by slot, as `scg.graph.graph.GraphRecord.new_node`
        # makes a record: the dataclass called with keywords costs about five times the stores
        # (every field is stored; a test checks it)
        cg = object.__new__(CostGroup)
        cg.members = members
        cg.layout = cp.layout
        cg.stack = stack
        cg.scale = 1.0
        cg.factor = None
        cg.target = fixed
        cg.raw = fixed
        cg.live = stack
        cg.total = part
        if cp.layout:  # ω: sample weights
            cg.scale, cg.factor = samples.weight(cp.layout, stack.shape[1:], members[0])
            cg.live = cg.weighted(stack)
            if cg.live is not stack:
                cg.total = None
        if has_baselines:  # (with the group's sample layout: SelfCritical broadcasts over it)
            info = [samples.layout_info(cp.layout)] * len(members) if cp.layout else None
            first = len(values)
            cg.target = apply_baselines(members, fixed, losses, values, info)
            if cp.layout and samples.enumerated_layout(cp.layout):
                _check_cost_baselines_on_enumerations(plan, cp.layout, stack.dim() - 1, values[first:])
        if cp.layout:
            cg.target = cg.weighted(cg.target).detach()
            cg.raw = cg.weighted(fixed).detach()
        out.append(cg)
    return out


def _check_cost_baselines_on_enumerations(
    plan: CreditPlan, layout: tuple[int, ...], rank: int, applied: BaselineValues
) -> None:
    """A cost baseline is subtracted from the credit of every score node u upstream of the cost,
    summed over the cost's sample dimensions with their weights ω: Σ_s ω_s (c_s − b_s). The
    weights of an enumerated node that u influences are functions of u (p(z_s | u), or an
    unordered set's), so a baseline that differs between the slices s adds Σ_s ω_s(u) b_s to
    u's credit, a function of u: a biased gradient (Theorem 2; a constant per slice was
    d/dθ_u −0.445 against −0.461). Refuse a value that differs between
    the slices of such a dimension (one host read; the same value on every slice cancels, and
    torch.compile's surrogate refuses enumerations)."""
    full, samples = plan.samples.full, plan.samples
    scored = sum(1 << i for i in plan.score)
    for pos, z in enumerate(layout):
        node = samples.nodes[z]
        if not samples.is_enumerated(node) or not full[z] & scored:
            continue
        for value, baseline, cost in applied:
            d = value.dim() - rank + pos  # (the value broadcasts to (rows, *the cost's shape))
            if d >= 0 and value.shape[d] > 1 and not bool((value == value.narrow(d, 0, 1)).all()):
                name = " ".join(repr(baseline).split())
                raise SCGError(
                    f"the baseline {name} of {cost.describe()} has a value per slice of the enumerated "
                    f"{node.describe()} (dimension {pos} of the cost, {value.shape[d]} values): it is subtracted "
                    "from the credit of the score-function nodes the enumerated node is drawn from, weighted by "
                    "its probabilities, which depend on them, so it would bias their gradient (Theorem 2). Give "
                    "the cost a baseline that is the same for every slice of the enumerated node "
                    "(EMA(per_element=False), a scalar Constant), or put the baseline on a node"
                )


def node_groups(plan: CreditPlan, nodes: Sequence[Node]) -> list[NodeGroup]:
    """The stacked log-probabilities of each of the plan's node groups."""
    out = []
    for ng in plan.node_groups:  # (score nodes: stochastic, with a log-probability)
        members: list[StochasticNode] = [nodes[i] for i in ng.nodes]  # type: ignore[misc]
        group = object.__new__(NodeGroup)  # (slot by slot, as `CostGroup` in `cost_groups`)
        group.members = members
        group.layout = ng.layout
        group.logp = _stack_rows([v.log_prob for v in members])  # type: ignore[misc]
        out.append(group)
    return out


def apply_weights(weights: torch.Tensor, x: torch.Tensor, q: int, node_shape: torch.Size) -> torch.Tensor:
    """``weights @ x`` with ``x`` (q, *broadcastable to node_shape) expanded: (rows, *node_shape)."""
    if len(node_shape) == 1 and x.shape[1:] == node_shape:  # (q, B): the product as it is
        return weights @ x
    x = x.expand(q, *node_shape)
    return (weights @ x.reshape(q, -1)).reshape(weights.shape[0], *node_shape)


def c_hat(plan: CreditPlan, gi: int, ng: NodeGroup, cgs: Sequence[CostGroup], field: str) -> torch.Tensor | None:
    """Ĉ for node group ``gi``: Σ over cost groups of W_sub @ the aligned ``field`` of the costs
    (``target``, ``raw`` or ``live``).

    Pairs the cost mixes (`scg.credit.plates`) are credited with the cost summed over the
    node's batch dimensions; batch dimensions beyond a node's declared plates share their credit.
    Both sums run over the cost's own elements (before it is broadcast to the node's shape), so
    a cost that is already per example, (B,) or (B, 1) for a (B, D) node, counts once."""
    node_shape = ng.logp.shape[1:]
    out: torch.Tensor | None = None
    terms = plan.terms_of.get(gi)
    if terms is None:
        terms = plan.terms(gi, node_shape, [cg.stack for cg in cgs])
    for t in terms:
        cg = cgs[t.group]
        stack: torch.Tensor = getattr(cg, field)
        if t.direct:  # (the common case: per-example costs, W @ them as they are)
            part = t.parts[0][1] @ stack
            out = part if out is None else out + part
            continue
        q = stack.shape[0]
        if t.aligned:
            small = stack
        else:
            small = align_batch_to_node(
                stack, cg.layout, ng.layout, node_shape, cg.members[t.col], ng.members[t.row], plan.sizes, expand=False
            )
        if t.suffix:  # W[i, j] = [j ≥ i]: the costs from each node's own on, summed
            part = small.flip(0).cumsum(0).flip(0)
            out = (part if part.shape[1:] == node_shape else part.expand(q, *node_shape)) if out is None else out + part
            continue
        if t.mixed is not None:
            part = apply_weights(t.mixed, share_beyond(small, len(ng.layout)), q, node_shape)
            out = part if out is None else out + part
        for start, weights in t.parts:
            part = apply_weights(weights, small if start is None else share_beyond(small, start), q, node_shape)
            out = part if out is None else out + part
    return out


def control_variates(ng: NodeGroup, samples: SamplePlan, adv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Subtract estimator-supplied control variates (RELAX) from the advantages; the second
    value is the sum of their pathwise correction terms (None without any)."""
    path: torch.Tensor | None = None
    cvs: list[torch.Tensor | None] = []
    for v in ng.members:
        got = v.estimator.control_variate(v)
        if got is None:
            cvs.append(None)
            continue
        cv, term = got
        if samples.active and ng.layout:
            scale, factor = samples.weight(ng.layout, ng.logp.shape[1:], v)
            weight = scale if factor is None else factor.detach() * scale
            cv, term = cv * weight, term * weight
        cvs.append(cv)
        path = term.sum() if path is None else path + term.sum()
    if path is None:
        return adv, None
    stacked = torch.stack([torch.zeros_like(ng.logp[0]) if cv is None else cv for cv in cvs])
    return adv - stacked, path
