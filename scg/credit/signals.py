"""Learning signals: the values a `CreditPlan` is applied to.

For one graph, the costs of each cost group are stacked (``(q, *shape)``) with their sample
weights ω, and the log-probabilities of each node group (``(r, *shape)``). A node group's
learning signal is

    Ĉ_G = Σ_H  W_GH @ align(ω ⊙ (c − b_c))         (one product per pair of groups)

minus its node baselines b_v and the estimators' control variates. Baselines get the sample
layout of the nodes they serve (`SampleInfo`) as an argument, and
their values must broadcast to the signal's shape without changing it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from scg.baselines.base import Baseline, BaselineResult
from scg.credit.plan import CreditPlan
from scg.credit.plates import share_beyond
from scg.credit.sample_dims import SamplePlan, align_batch_to_node
from scg.errors import SCGError
from scg.graph.nodes import NO_SAMPLE_DIMS, CostNode, Node, SampleInfo, StochasticNode

__all__ = [
    "BaselineValues",
    "CostGroup",
    "NodeGroup",
    "apply_baselines",
    "apply_weights",
    "c_hat",
    "check_baseline_values",
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


def _check_shape(x: torch.Tensor, want: tuple[int, ...], baseline: Baseline, node: Node, what: str) -> None:
    """A baseline's value (or scale) must broadcast to the learning signal's shape without
    changing it: a (3, 1) value against a (3,) signal would broadcast to (3, 3) and credit each
    element with every other element's signal (a silently multiplied gradient)."""
    shape = tuple(x.shape)
    if shape == want or shape == want[1:]:  # (the common values: one per row, or per element)
        return
    ok = len(shape) <= len(want) and all(s in (1, w) for s, w in zip(shape[::-1], want[::-1]))
    if not ok:
        name = " ".join(repr(baseline).split())
        raise SCGError(
            f"the baseline {name} of {node.describe()} returned a {what} of shape "
            f"{tuple(x.shape)}, which does not broadcast to the shape of the learning "
            f"signal it is subtracted from, {tuple(want)} (the nodes sharing the "
            f"baseline, then the node's shape {tuple(want[1:])}); give it that shape or "
            "one that broadcasts to it (e.g. a scalar)"
        )


#: (baseline value, baseline, first node) of each baseline group applied by a surrogate, checked
#: for finiteness once per surrogate (`check_baseline_values`)
BaselineValues = list[tuple[torch.Tensor, Baseline, Node]]


def apply_baselines(
    nodes: Sequence[Node],
    targets: torch.Tensor,
    losses: list[torch.Tensor],
    values: BaselineValues,
    info: Sequence[SampleInfo] | None = None,
) -> torch.Tensor:
    """``(targets − b) · scale`` for each row, with each node's ``baseline``; rows sharing a
    baseline object go together. Their regression losses are appended to ``losses`` and their
    values to ``values``; ``info``: the nodes' sample layouts (none: no sample dimensions),
    given to the baselines (rows whose baselines share a `Baseline.batch_key` go to one call).
    Rows are sliced, not gathered, when a baseline's rows are
    consecutive (the common case: one baseline per node, or one for the group); when every row
    has a baseline and no scale, the values are joined and subtracted once. Values and scales are
    cast to the targets' dtype: the signal keeps it (a cost group's is multiplied by the plan's
    credit weights, made in the costs' dtype)."""
    groups: dict[int, list[int]] = {}  # in the order of their first rows
    objects: dict[int, Baseline] = {}
    for i, node in enumerate(nodes):
        b: Baseline | None = node.baseline  # type: ignore[attr-defined]
        if b is not None:
            key = id(b.batch_key())
            got = groups.get(key)
            if got is None:
                groups[key] = [i]
                objects[key] = b
            else:
                got.append(i)
    if not groups:
        return targets
    n = len(nodes)
    shape = targets.shape[1:]
    applied: list[_Applied] = []  # in the order of their first rows
    for key, idx in groups.items():
        first, end = idx[0], idx[-1] + 1
        consecutive = end - first == len(idx)
        rows = (targets if end - first == n else targets[first:end]) if consecutive else targets[idx]
        baseline = objects[key]
        members = [nodes[i] for i in idx]
        result = baseline(members, rows, [NO_SAMPLE_DIMS] * len(idx) if info is None else [info[i] for i in idx])
        if not isinstance(result, BaselineResult) or not isinstance(result.value, torch.Tensor):
            got = type(result.value if isinstance(result, BaselineResult) else result).__name__
            raise SCGError(
                f"the baseline {baseline!r} of {members[0].describe()} returned {got}; a Baseline's __call__ "
                "returns a BaselineResult(value=tensor, loss=None, scale=None)"
            )
        value = result.value.detach() if result.value.requires_grad else result.value
        want = (len(idx), *shape)
        _check_shape(value, want, baseline, members[0], "value")
        if value.dtype != targets.dtype:  # (a float64 module's value for float32 costs: the signal keeps
            # its dtype, that of the plan's credit weights it is multiplied by, `CreditPlan.terms`)
            value = value.to(targets.dtype)
        values.append((value, baseline, members[0]))
        scale = result.scale
        if scale is not None:
            _check_shape(scale, want, baseline, members[0], "scale")
            scale = scale.detach().to(targets.dtype)
        if result.loss is not None:
            losses.append(result.loss)
        applied.append(
            _Applied(idx=idx, first=first, end=end, consecutive=consecutive, rows=rows, value=value, scale=scale)
        )
    if len(applied) == 1 and applied[0].end - applied[0].first == n and applied[0].consecutive:
        return applied[0].advantage()
    at = 0  # the rows before it are covered in order by consecutive groups without a scale
    rows_of_one = True  # and each group is one row with a value of the node's shape
    for a in applied:
        if at != a.first or not a.consecutive or a.scale is not None:
            break
        at = a.end
        rows_of_one = rows_of_one and a.end - a.first == 1 and a.value.shape == shape
    if at == n:  # every row covered in order: one join, one subtraction
        if rows_of_one:
            return targets - torch.stack([a.value for a in applied])
        return targets - torch.cat([a.value.expand(a.end - a.first, *shape) for a in applied])
    if all(a.consecutive for a in applied):
        parts: list[torch.Tensor] = []
        at = 0
        for a in applied:
            if a.first > at:
                parts.append(targets[at : a.first])  # rows without a baseline
            parts.append(a.advantage())
            at = a.end
        if at < n:
            parts.append(targets[at:])
        return torch.cat(parts)
    out = targets.clone()
    for a in applied:
        if a.consecutive:
            out[a.first : a.end] = a.advantage()
        else:
            out[a.idx] = a.advantage()
    return out


@dataclass(kw_only=True, slots=True)
class _Applied:
    """One baseline group of `apply_baselines`: its rows (``idx``; ``first``..``end`` when
    ``consecutive``), their targets, and the baseline's detached value and scale."""

    idx: list[int]
    first: int
    end: int
    consecutive: bool
    rows: torch.Tensor
    value: torch.Tensor
    scale: torch.Tensor | None

    def advantage(self) -> torch.Tensor:
        """``(rows − value) · scale``, of the rows' shape."""
        adv = self.rows - self.value
        if self.scale is not None:
            adv = adv * self.scale
        if adv.shape != self.rows.shape:  # (a value broadcast over more dimensions is refused)
            adv = adv.expand_as(self.rows)
        return adv


def check_baseline_values(values: BaselineValues, covering: torch.Tensor | None = None) -> None:
    """Refuse a non-finite baseline value, naming the baseline and its node: one host read for
    all of a surrogate's baselines (a NaN or ±inf propagates into the sum; a finite sum that
    overflowed is told apart by the element-wise check). ``covering``: a scalar that every value
    reached (the surrogate's sum of score terms), read instead of summing the values again."""
    if not values:
        return
    if covering is not None:
        total = covering
    elif len(values) > 1:
        total = torch.stack([v.sum() for v, _, _ in values]).sum()
    else:
        total = values[0][0].sum()
    if math.isfinite(total.item()):
        return
    for value, baseline, node in values:
        if not bool(torch.isfinite(value).all()):
            raise SCGError(f"the baseline {baseline!r} of {node.describe()} returned a non-finite value")


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
