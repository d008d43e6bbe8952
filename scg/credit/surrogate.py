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
* The score term is written ``(log p − stop_gradient(log p)) · A``: its value is exactly zero, so
  ``L`` *evaluates* to the objective (loggable) while its gradient is unchanged.
* Sample dimensions (``n=k`` samples, enumerated supports; :mod:`scg.credit.sample_dims`): costs are
  averaged over them with weights ω (1/k, or p(value) for an enumeration), so L evaluates to
  Σ_c Σ ω ⊙ c and estimates ∇ E[mean over samples of Σ c].
* ``dice=True`` / ``dice_lambda=λ`` build DiCE / Loaded DiCE objectives (:mod:`scg.credit.dice`) whose
  higher derivatives are estimates too; ``score_scale=λ`` reweights the score terms.

Ĉ is computed for all nodes at once: the influence relation becomes a 0/1 matrix (discount weights
γ^(s_c − t_v) with ``discount=γ``), and Ĉ = W @ stack(costs), one matrix product per pair of
groups of equally shaped nodes and costs instead of a Python loop over (node, cost) pairs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

import numpy as np
import torch

from scg.baselines.base import Baseline
from scg.credit import dice as dice_mod
from scg.credit.plates import PlateCheck, plate_rank, share_beyond
from scg.credit.sample_dims import NO_SAMPLE_DIMS, SamplePlan, align_batch_to_node
from scg.credit.soundness import check_after_registration, check_enumerated, check_pathwise
from scg.credit.traced import traced_surrogate_loss
from scg.errors import SCGError
from scg.estimators.base import Estimator
from scg.graph.graph import Graph
from scg.graph.nodes import CostNode, Node, StochasticNode
from scg.graph.structure import Relation
from scg.graph.tracking import bits

__all__ = ["influence_matrix", "objective", "surrogate_loss"]


def influence_matrix(full: Sequence[int], rows: Sequence[Node], cols: Sequence[Node]) -> np.ndarray:
    """``A[i, j] = 1`` when ``rows[i]`` influences ``cols[j]``, from closure masks ``full``."""
    n_bits = max((r.index for r in rows), default=0) + 1
    nbytes = (n_bits + 7) // 8
    limit = (1 << (8 * nbytes)) - 1
    buf = b"".join((full[c.index] & limit).to_bytes(nbytes, "little") for c in cols)
    packed = np.frombuffer(buf, dtype=np.uint8).reshape(len(cols), nbytes)
    unpacked = np.unpackbits(packed, axis=1, bitorder="little")  # (len(cols), 8 * nbytes)
    out: np.ndarray = unpacked[:, [r.index for r in rows]].T.astype(bool)
    return out


def step_weights(a: np.ndarray, rows: Sequence[Node], cols: Sequence[Node], gamma: float,
                 what: str = "discount") -> np.ndarray:
    """γ^(s_c − t_v) where v influences c; errors name nodes with missing or inverted steps."""
    if not 0.0 <= gamma <= 1.0:
        raise SCGError(f"surrogate_loss({what}=...): expected a number in [0, 1], got {gamma!r}")
    t = np.array([np.nan if r.step is None else r.step for r in rows], dtype=float)
    s = np.array([np.nan if c.step is None else c.step for c in cols], dtype=float)
    lag = s[None, :] - t[:, None]
    bad = a & np.isnan(lag)
    if bad.any():
        i, j = (int(x[0]) for x in np.nonzero(bad))
        who = rows[i] if rows[i].step is None else cols[j]
        raise SCGError(f"surrogate_loss({what}={gamma}): {who.describe()} has no step, but "
                       f"{rows[i].describe()} influences {cols[j].describe()}; give both a step=")
    back = a & (lag < 0)
    if back.any():
        i, j = (int(x[0]) for x in np.nonzero(back))
        raise SCGError(f"surrogate_loss({what}={gamma}): {rows[i].describe()} influences "
                       f"{cols[j].describe()} at an earlier step; steps must not decrease along "
                       "data flow")
    w: np.ndarray = np.where(a, np.power(gamma, np.where(a, lag, 0.0)), 0.0)
    return w


_N = TypeVar("_N", bound=Node)
_K = TypeVar("_K", bound=Hashable)


def _group(items: Sequence[_N], key_fn: Callable[[_N], _K]) -> dict[_K, list[int]]:
    groups: dict[_K, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups[key_fn(item)].append(i)
    return groups


def _apply_baselines(
    nodes: Sequence[Node], baselines: Sequence[Baseline | None], targets: torch.Tensor,
    losses: list[torch.Tensor],
) -> torch.Tensor:
    """``(targets − b) · scale`` for each row; rows sharing a baseline object go together."""
    by_baseline: dict[int, list[int]] = defaultdict(list)
    objects: dict[int, Baseline] = {}
    for i, b in enumerate(baselines):
        if b is not None:
            by_baseline[id(b)].append(i)
            objects[id(b)] = b
    if not by_baseline:
        return targets
    out = targets.clone()
    for key, idx in by_baseline.items():
        result = objects[key]([nodes[i] for i in idx], targets[idx])
        value = result.value.detach()
        want = (len(idx), *targets.shape[1:])
        _check_shape(value, want, objects[key], nodes[idx[0]], "value")
        if not torch.isfinite(value).all():
            raise SCGError(f"the baseline {objects[key]!r} of {nodes[idx[0]].describe()} returned "
                           "a non-finite value")
        adv = targets[idx] - value
        if result.scale is not None:
            _check_shape(result.scale, want, objects[key], nodes[idx[0]], "scale")
            adv = adv * result.scale.detach()
        if len(idx) == len(nodes):
            out = adv
        else:
            out[idx] = adv
        if result.loss is not None:
            losses.append(result.loss)
    return out


def _check_shape(x: torch.Tensor, want: tuple[int, ...], baseline: Baseline, node: Node,
                 what: str) -> None:
    """A baseline's value (or scale) must broadcast to the learning signal's shape without
    changing it: a (3, 1) value against a (3,) signal would broadcast to (3, 3) and credit each
    element with every other element's signal (a silently multiplied gradient)."""
    shape = tuple(x.shape)
    ok = len(shape) <= len(want) and all(
        s in (1, w) for s, w in zip(shape[::-1], want[::-1]))
    if not ok:
        name = " ".join(repr(baseline).split())
        raise SCGError(f"the baseline {name} of {node.describe()} returned a {what} of shape "
                       f"{tuple(x.shape)}, which does not broadcast to the shape of the learning "
                       f"signal it is subtracted from, {tuple(want)} (the nodes sharing the "
                       f"baseline, then the node's shape {tuple(want[1:])}); give it that shape or "
                       "one that broadcasts to it (e.g. a scalar)")


def _check_finite(stack: torch.Tensor, costs: Sequence[CostNode]) -> None:
    if bool(torch.isfinite(stack).all()):
        return
    for c in costs:
        if not bool(torch.isfinite(c.value).all()):
            raise SCGError(f"{c.describe()} is not finite (it contains NaN or inf)")


def _check_baseline_inputs(graph: Graph, full: Sequence[int], node: Node) -> None:
    """Theorem 2: a baseline must not depend on a node it is subtracted for.

    A node baseline b_v must not be computed from v (or from anything v influences); a cost
    baseline b_c is subtracted from the credit of every score node that influences c, so it must
    not be computed from any of them.
    """
    mask = int(getattr(node, "extra", {}).get("baseline_inputs_mask", 0))
    reach = mask
    for j in bits(mask):
        reach |= full[j]
    if isinstance(node, StochasticNode):
        if reach >> node.index & 1:
            raise SCGError(f"the baseline inputs of {node.describe()} are computed from the node's "
                           "own sample; a baseline may only use information from before the sample "
                           "(Theorem 2), otherwise the estimate is biased")
        return
    credited = reach & full[node.index]
    for j in bits(credited):
        v = graph.nodes[j]
        if isinstance(v, StochasticNode) and v.estimator.score:
            raise SCGError(f"the baseline inputs of {node.describe()} are computed from "
                           f"{v.describe()}, which influences the cost: subtracting it from the "
                           "cost would bias that node's gradient (Theorem 2); use a baseline that "
                           "does not depend on it (e.g. an EMA) or attach it to a later node")


@dataclass
class CostGroup:
    """Costs of one shape and sample layout: ``stack`` (q, *shape) and their weights ω."""

    members: list[CostNode]
    cols: list[int]
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


@dataclass
class NodeGroup:
    """Score nodes of one log-probability shape and sample layout."""

    members: list[StochasticNode]
    rows: list[int]
    layout: tuple[int, ...]
    logp: torch.Tensor  # (r, *shape)
    shared: list[tuple[int, int]]  # rows whose batch dimensions beyond their plates share credit
    cv: bool  # a member's estimator supplies control variates (RELAX)


def _cost_keys(costs: list[CostNode], plan: SamplePlan) -> list[tuple[tuple[int, ...], list[int]]]:
    """Costs grouped by shape, dtype, device and sample layout: (layout, columns) per group."""
    keyed = _group(costs, lambda c: (tuple(c.value.shape), c.value.dtype, c.value.device,
                                     plan.layout(c) if plan.active else ()))
    return [(key[3], cols) for key, cols in keyed.items()]


def _cost_groups(costs: list[CostNode], plan: SamplePlan | None,
                 keys: list[tuple[tuple[int, ...], list[int]]]) -> list[CostGroup]:
    out = []
    for layout, cols in keys:
        members = [costs[i] for i in cols]
        stack = torch.stack([c.value for c in members])
        fixed = stack.detach()
        # one sum is both the finiteness check (NaN and ±inf propagate into it; one host read
        # per group) and, without weights, the objective's term
        total = stack.sum()
        if not math.isfinite(total.item()):
            _check_finite(fixed, members)  # names the cost (a finite sum that overflowed passes)
        scale, factor = (plan.weight(layout, stack.shape[1:], members[0])
                         if layout and plan is not None else (1.0, None))
        # target and raw start as the same detached tensor (each is replaced, never written)
        cg = CostGroup(members, cols, layout, stack, scale, factor, fixed, fixed, stack)
        cg.live = cg.weighted(stack)
        cg.total = total if cg.live is stack else None
        out.append(cg)
    return out


#: per (node group, cost group): None (no credit), or (a node row and a cost column of the pair,
#: for messages; the whole-plate weights or None; the per-element weights, split by the first
#: node dimension whose credit is shared (None: none is), see :func:`_split_shared`)
_Pair = tuple[int, int, "torch.Tensor | None", list[tuple["int | None", torch.Tensor]]] | None


def _split_shared(sub: np.ndarray, shared: list[tuple[int, int]], nl: int
                  ) -> list[tuple[int | None, np.ndarray]]:
    """The weight rows of nodes with batch dimensions beyond their plates (``shared``: (row,
    plate rank)), apart by where their sharing starts; the other rows under ``None``."""
    if not shared:
        return [(None, sub)]
    out: list[tuple[int | None, np.ndarray]] = []
    rest = sub.copy()
    by_start: dict[int, list[int]] = defaultdict(list)
    for r, k in shared:
        by_start[nl + k].append(r)
    for start, rows in by_start.items():
        part = np.zeros_like(sub)
        part[rows] = sub[rows]
        rest[rows] = 0.0
        if part.any():
            out.append((start, part))
    if rest.any():
        out.append((None, rest))
    return out


def _pair(ng: NodeGroup, cg: CostGroup, w: np.ndarray, mixed: np.ndarray | None,
          like: torch.Tensor) -> _Pair:
    sub = w[ng.rows][:, cg.cols]  # (rows, cols); cheaper than np.ix_ for the small index lists
    if not sub.any():
        return None
    i, j = (int(x[0]) for x in np.nonzero(sub))
    w_mix = None
    mix = None if mixed is None else mixed[ng.rows][:, cg.cols] & (sub != 0)
    if mix is not None and mix.any():
        w_mix = torch.as_tensor(np.where(mix, sub, 0.0), dtype=like.dtype, device=like.device)
        sub = np.where(mix, 0.0, sub)
    parts = [(start, torch.as_tensor(part, dtype=like.dtype, device=like.device))
             for start, part in _split_shared(sub, ng.shared, len(ng.layout))]
    return i, j, w_mix, parts


def _c_hat(ng: NodeGroup, cgs: list[CostGroup], w: np.ndarray, costs: list[CostNode],
           sizes: dict[int, int], field: str, mixed: np.ndarray | None = None,
           pairs: dict[tuple[int, int], _Pair] | None = None, gi: int = 0) -> torch.Tensor | None:
    """Ĉ for a node group: Σ over cost groups of W_sub @ aligned weighted costs.

    Pairs in ``mixed`` (the cost mixes the node's plate elements, :mod:`scg.credit.plates`) are
    credited with the cost summed over the node's batch dimensions; batch dimensions beyond a
    node's declared plates share their credit. Both sums run over the cost's own elements
    (before it is broadcast to the node's shape), so a cost that is already per example, (B,)
    or (B, 1) for a (B, D) node, is counted once, not D times. ``pairs`` caches the weight
    matrices of group ``gi`` (a cached plan, :class:`Plan`)."""
    node_shape = ng.logp.shape[1:]
    nl = len(ng.layout)
    out: torch.Tensor | None = None
    for cj, cg in enumerate(cgs):
        stack: torch.Tensor = getattr(cg, field)
        if pairs is None:
            pair = _pair(ng, cg, w, mixed, stack)
        elif (gi, cj) in pairs:
            pair = pairs[(gi, cj)]
        else:
            pair = pairs[(gi, cj)] = _pair(ng, cg, w, mixed, stack)
        if pair is None:
            continue
        i, j, w_mix, parts = pair
        q = len(cg.cols)
        small = align_batch_to_node(stack, cg.layout, ng.layout, node_shape, costs[cg.cols[j]],
                                    ng.members[i], sizes, expand=False)
        if w_mix is not None:
            part = _apply(w_mix, share_beyond(small, nl), q, node_shape)
            out = part if out is None else out + part
        for start, weights in parts:
            part = _apply(weights, small if start is None else share_beyond(small, start), q,
                          node_shape)
            out = part if out is None else out + part
    return out


def _apply(weights: torch.Tensor, x: torch.Tensor, q: int, node_shape: torch.Size
           ) -> torch.Tensor:
    """``weights @ x`` with ``x`` (q, *broadcastable to node_shape) expanded: (rows, *node_shape)."""
    x = x.expand(q, *node_shape)
    return (weights @ x.reshape(q, -1)).reshape(weights.shape[0], *node_shape)


def _shared_rows(members: Sequence[StochasticNode], nl: int) -> list[tuple[int, int]]:
    """(row, plate rank) of the members with batch dimensions beyond their declared plates."""
    rows = [(r, plate_rank(v, nl)) for r, v in enumerate(members)
            if v.extra.get("plates") is not None]
    return [(r, k) for r, k in rows if nl + k < _logp(members[r]).dim()]


@dataclass
class Plan:
    """What the surrogate of a graph depends on through its structure only (the influence
    closure, the plate check, the groups and the credit matrices): built once per signature
    for a graph with a :class:`~scg.Declared` or :class:`~scg.Cached` structure, and reused."""

    samples: SamplePlan
    sizes: dict[int, int]
    cost_keys: list[tuple[tuple[int, ...], list[int]]]  # per cost group: layout, columns
    score: list[int]  # node indices of the score-function nodes
    node_keys: list[tuple[tuple[int, ...], list[int]]]  # per node group: layout, rows in score
    node_extras: list[tuple[list[tuple[int, int]], bool]]  # per node group: shared rows, cv
    a: np.ndarray  # (score, costs): influence
    w: np.ndarray  # credit weights (γ^(s_c - t_v) with a discount)
    mixed: np.ndarray  # whole-plate pairs
    credit: dict[tuple[int, int], bool]  # (node, cost) -> whole-plate
    pairs: dict[tuple[int, int], _Pair]  # (node group, cost group) -> weight matrices
    cacheable: bool  # no sample dimensions (their weights depend on the values)


def _plan(graph: Graph, full: Sequence[int], costs: list[CostNode], discount: float | None,
          dice: bool) -> Plan:
    """The structural part of the surrogate, with the checks that depend on the structure."""
    samples = SamplePlan(graph, full)
    sizes = {i: int(v.n) for i, v in samples.nodes.items()}  # type: ignore[arg-type]
    layout_len = ({n.index: len(samples.layout(n)) for n in graph.nodes
                   if isinstance(n, (StochasticNode, CostNode))} if samples.active else {})
    plates = PlateCheck(graph, full, layout_len)
    if samples.active:
        for c in costs:
            plates.check_sample_slices(c, samples.layout(c))
    check_enumerated(graph, plates, costs)
    cost_keys = _cost_keys(costs, samples)
    score = [v for v in graph.stochastic_nodes if v.log_prob is not None and v.estimator.score]
    if dice:
        for v in score:
            if not v.estimator.higher_order:
                raise SCGError(f"surrogate_loss(dice=True): {v.describe()} uses {v.estimator!r}, "
                               "whose higher derivatives are not unbiased; use ScoreFunction() "
                               "there")
    keyed = _group(score, lambda v: (tuple(_logp(v).shape), _logp(v).dtype,
                                     samples.layout(v) if samples.active else ()))
    node_keys = [(key[2], rows) for key, rows in keyed.items()]
    node_extras = [(_shared_rows([score[i] for i in rows], len(layout)),
                    any(_has_cv(score[i]) for i in rows)) for layout, rows in node_keys]
    a = influence_matrix(full, score, costs) if score else np.zeros((0, len(costs)), dtype=bool)
    w = a.astype(float) if discount is None else step_weights(a, score, costs, discount)
    mixed = plates.matrix(score, costs, a)
    ii, jj = np.nonzero(a)
    score_ids = np.array([v.index for v in score], dtype=np.int64)
    cost_ids = np.array([c.index for c in costs], dtype=np.int64)
    credit = dict(zip(zip(score_ids[ii].tolist(), cost_ids[jj].tolist()),
                      mixed[ii, jj].tolist()))
    return Plan(samples, sizes, cost_keys, [v.index for v in score], node_keys, node_extras, a, w,
                mixed, credit, {}, not samples.active)


def _has_cv(v: StochasticNode) -> bool:
    """Whether ``v``'s estimator supplies control variates (overrides ``control_variate``)."""
    return type(v.estimator).control_variate is not Estimator.control_variate


def _relation_of(graph: Graph) -> Relation:
    """A tracked graph's relation: each node's direct parents and foreign positions."""
    return tuple((n.parents, tuple(sorted(n.foreign.items()))) for n in graph.nodes)


def surrogate_loss(graph: Graph, *, discount: float | None = None, dice: bool = False,
                   dice_lambda: float | None = None, score_scale: float = 1.0) -> torch.Tensor:
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
            Algorithm 1's for every λ (see :mod:`scg.credit.dice`). Implies ``dice``.
        score_scale: multiply every score-function term (and DiCE's ⊡ − 1 parts) by this
            factor, as the C2F paper's λ weight on REINFORCE. A reweighting: unbiased only
            for 1 (for a graph with no pathwise terms the expectation is ``score_scale`` times
            the gradient, the same direction).

    Returns:
        A scalar equal in value to the objective Σ_c Σ ω_c ⊙ c (the sum of the costs when no
        node has a sample dimension), whose gradient is an unbiased estimate of ∇_θ of its
        expectation for unbiased estimators.
    """
    if graph._surrogate_built:
        raise SCGError("surrogate_loss() was already called on this graph; a graph records one "
                       "run of the program, so build a new scg.Graph() for the next estimate")
    costs = graph._costs
    if not costs:
        raise SCGError("surrogate_loss() on a graph with no cost nodes: add costs with scg.cost()")
    if not isinstance(score_scale, (int, float)) or not math.isfinite(score_scale):
        raise SCGError(f"surrogate_loss(score_scale=...): expected a finite number, got "
                       f"{score_scale!r}")
    loaded = dice_lambda is not None
    if dice and discount is not None and not loaded:
        raise SCGError("surrogate_loss(dice=True, discount=...): the DiCE objective has no "
                       "per-(node, cost) discount; use dice_lambda=λ (Loaded DiCE), which credits "
                       "discounted costs-to-go")
    if torch.compiler.is_compiling():  # dynamo traces the program: no NumPy, no host reads
        graph._surrogate_built = True
        return traced_surrogate_loss(graph, discount=discount, dice=dice,
                                     dice_lambda=dice_lambda, score_scale=score_scale)
    structure = graph.structure
    full = graph.full_influence()
    check_after_registration(graph, full)
    graph._surrogate_built = True
    extra_losses: list[torch.Tensor] = []
    has_baselines = graph._n_baselines > 0
    for c in costs if has_baselines else ():
        if "baseline_inputs_mask" in c.extra:
            _check_baseline_inputs(graph, full, c)
    plan: Plan | None = None
    if structure is not None:  # a plan of an earlier graph with this signature
        sig = graph.signature()
        key = (sig, discount, dice, dice_lambda)
        if not graph.tracked and sig in structure.relations:
            plan = structure.plans.get(key)
    if plan is None:
        plan = _plan(graph, full, costs, discount, dice or loaded)
        if structure is not None:
            if graph.tracked:
                structure._learn(graph, sig, _relation_of(graph), full, plan.credit)
            if plan.cacheable and sig in structure.relations:
                structure.plans[key] = plan
    if graph.tracked or structure is None or structure.learned:
        # (a declared edge need not be a path, so a declaration cannot tell "no differentiable
        # path" from "no path": the check needs tracked data flow)
        check_pathwise(graph, full, costs)
    samples = plan.samples
    sizes = plan.sizes
    cgs = _cost_groups(costs, samples, plan.cost_keys)
    has_cost_baselines = has_baselines and any(c.baseline is not None for c in costs)
    for cg in cgs:
        if has_cost_baselines:
            cg.target = _apply_baselines(cg.members, [c.baseline for c in cg.members],
                                         cg.target, extra_losses)
        if cg.layout:
            cg.target = cg.weighted(cg.target).detach()
            cg.raw = cg.weighted(cg.raw).detach()
    nodes = graph.nodes
    score = cast(list[StochasticNode], [nodes[i] for i in plan.score])
    for v in graph._stochastic:
        v.extra["sample_info"] = samples.info(v) if samples.active else NO_SAMPLE_DIMS
    ngs = [NodeGroup([score[i] for i in rows], rows, layout,
                     torch.stack([_logp(score[i]) for i in rows]), shared, cv)
           for (layout, rows), (shared, cv) in zip(plan.node_keys, plan.node_extras)]
    a, w, mixed, pairs = plan.a, plan.w, plan.mixed, plan.pairs
    graph._credit = plan.credit

    if dice and not loaded:
        if mixed.any() or any(v.extra.get("plates") is not None for v in score):
            i, j = (int(x[0]) for x in np.nonzero(mixed)) if mixed.any() else (0, 0)
            raise SCGError(f"surrogate_loss(dice=True): {costs[j].describe()} mixes the batch "
                           f"elements of {score[i].describe()} (or a node declares plates=); "
                           "DiCE's per-element weights would be biased there: use "
                           "dice_lambda=1.0 (Loaded DiCE, same derivatives) or the default "
                           "surrogate")
        return dice_mod.dice_objective(cgs, ngs, a, costs, sizes, score_scale, extra_losses,
                                       lambda ng, field: _c_hat(ng, cgs, w, costs, sizes, field),
                                       lambda ng, adv: _node_baselines(graph, full, ng, adv,
                                                                       extra_losses))
    loss: torch.Tensor | None = None
    for cg in cgs:
        part = cg.total if cg.total is not None else cg.live.sum()
        loss = part if loss is None else loss + part
    assert loss is not None
    factors = _loaded(ngs, score, full, sizes, dice_lambda) if dice_lambda is not None else None
    for gi, ng in enumerate(ngs):
        c_hat = _c_hat(ng, cgs, w, costs, sizes, "target", mixed, pairs, gi)
        if c_hat is None:
            continue
        adv = _node_baselines(graph, full, ng, c_hat, extra_losses) if has_baselines else c_hat
        adv, path = _control_variates(ng, samples, adv) if ng.cv else (adv, None)
        if factors is None:
            factor = ng.logp - ng.logp.detach()
        else:  # Loaded DiCE credits the live costs (their θ-dependence meets the score there)
            factor = factors[gi]
            live = _c_hat(ng, cgs, w, costs, sizes, "live", mixed, pairs, gi)
            assert live is not None
            if adv is c_hat and not has_cost_baselines:
                adv = live
            else:
                raw = (_c_hat(ng, cgs, w, costs, sizes, "raw", mixed, pairs, gi) if has_cost_baselines
                       else c_hat)
                assert raw is not None
                adv = live - (raw - adv).detach()
        part = (factor * adv).sum()
        if path is not None:
            part = part + path
        loss = loss + (part if score_scale == 1.0 else score_scale * part)
    for extra in extra_losses:
        loss = loss + (extra - extra.detach())
    return loss


def _loaded(ngs: list[NodeGroup], score: list[StochasticNode], full: Sequence[int],
            sizes: dict[int, int], lam: float) -> list[torch.Tensor]:
    """Loaded DiCE's per-group factors ⊡(w_v) − ⊡(w_v − log p_v) (see :mod:`scg.credit.dice`)."""
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not 0.0 <= lam <= 1.0:
        raise SCGError(f"surrogate_loss(dice_lambda=...): expected a number in [0, 1], got "
                       f"{lam!r}")
    anc = influence_matrix(full, score, score)  # anc[u, v]: u influences v
    lw = anc.astype(float) if lam == 1.0 else step_weights(anc, score, score, lam, "dice_lambda")
    np.fill_diagonal(lw, 1.0)
    return dice_mod.loaded_factors(ngs, lw, sizes)


def _logp(v: StochasticNode) -> torch.Tensor:
    assert v.log_prob is not None
    return v.log_prob


def _node_baselines(graph: Graph, full: Sequence[int], ng: NodeGroup, c_hat: torch.Tensor,
                    losses: list[torch.Tensor]) -> torch.Tensor:
    for v in ng.members:
        if "baseline_inputs_mask" in v.extra:
            _check_baseline_inputs(graph, full, v)
    return _apply_baselines(ng.members, [v.baseline for v in ng.members], c_hat, losses)


def _control_variates(ng: NodeGroup, plan: SamplePlan,
                      adv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Subtract estimator-supplied control variates (RELAX) from the advantages."""
    path: torch.Tensor | None = None
    cvs: list[torch.Tensor | None] = []
    for v in ng.members:
        got = v.estimator.control_variate(v)
        if got is None:
            cvs.append(None)
            continue
        cv, term = got
        if plan.active and ng.layout:
            scale, factor = plan.weight(ng.layout, ng.logp.shape[1:], v)
            weight = scale if factor is None else factor.detach() * scale
            cv, term = cv * weight, term * weight
        cvs.append(cv)
        path = term.sum() if path is None else path + term.sum()
    if path is None:
        return adv, None
    stacked = torch.stack([torch.zeros_like(ng.logp[0]) if cv is None else cv for cv in cvs])
    return adv - stacked, path


def objective(graph: Graph) -> torch.Tensor:
    """The objective's value for this run: Σ_c Σ ω_c ⊙ c, differentiable through the costs.

    ω averages over sample dimensions (1/k for ``n=k``, p(value) for enumerated nodes; see
    :mod:`scg.credit.sample_dims`), so without them this is Σ_c sum(c). ``scg.testing`` weights it by
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
