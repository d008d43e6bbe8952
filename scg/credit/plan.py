"""The credit plan: which stochastic node is credited with which cost, with what weight.

Everything Algorithm 1 needs from a graph's *structure* (not from its values) is computed here
once and kept in a `CreditPlan`:

* the score nodes (estimators with ``score``) and the costs, each grouped by shape, dtype,
  device and sample layout (`group`), so that Ĉ is one matrix product per pair of groups;
* the influence matrix A[v, c] (v ≺ c, from the graph's influence closure) and the credit
  weights W (A, or γ^(s_c − t_v) with ``discount=γ``: `step_weights`);
* the plate check: per (node, cost) pair, per-element or whole-plate credit
  (`scg.credit.plates`), and which nodes share credit beyond their declared plates;
* the sample-dimension layouts (`scg.credit.sample_dims`).

The eager surrogate (`scg.credit.surrogate`), DiCE (`scg.credit.dice`) and the traced
surrogate (`scg.credit.traced`) all read it: the grouping and the step weights exist once.
For a graph with a [`Declared`][scg.Declared] or [`Cached`][scg.Cached] structure the plan is built
once per graph signature and reused (``structure.plans``); the traced surrogate, which cannot
run NumPy, builds the same weights with `step_weights` on Python lists.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import TypeVar, cast

import numpy as np
import torch

from scg.credit.plates import PlateCheck, plate_rank
from scg.credit.sample_dims import SamplePlan
from scg.credit.soundness import check_enumerated, check_enumerated_discount, check_pathwise
from scg.errors import SCGError
from scg.estimators.base import Estimator
from scg.graph.cached import Cached
from scg.graph.graph import GraphRecord
from scg.graph.nodes import Node, StochasticNode
from scg.graph.structure import Relation

__all__ = ["CreditPlan", "Term", "build_plan", "group", "influence_matrix", "plan_for", "score_nodes", "step_weights"]

_N = TypeVar("_N")
_K = TypeVar("_K", bound=Hashable)


def group(items: Sequence[_N], key_fn: Callable[[_N], _K]) -> dict[_K, list[int]]:
    """Indices of ``items`` by key, in first-seen order (the node and cost groups)."""
    groups: dict[_K, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups[key_fn(item)].append(i)
    return groups


def score_nodes(graph: GraphRecord) -> list[StochasticNode]:
    """The nodes with a score-function term, in creation order."""
    return [v for v in graph.stochastic_nodes if v.log_prob is not None and v.estimator.score]


def logp(v: StochasticNode) -> torch.Tensor:
    """A score node's log-probability (always set for score nodes)."""
    assert v.log_prob is not None
    return v.log_prob


def has_cv(v: StochasticNode) -> bool:
    """Whether ``v``'s estimator supplies control variates (overrides ``control_variate``)."""
    return type(v.estimator).control_variate is not Estimator.control_variate


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


def step_weights(
    pairs: Iterable[tuple[int, int]], rows: Sequence[Node], cols: Sequence[Node], gamma: float, what: str = "discount"
) -> Iterator[tuple[int, int, float]]:
    """γ^(s_c − t_v) for each influencing pair (i, j) of ``rows`` × ``cols``; errors name nodes
    with missing or inverted steps. Plain Python, so the traced surrogate uses it as is."""
    if not isinstance(gamma, (int, float)) and isinstance(gamma, Real):  # (a numpy scalar)
        gamma = float(gamma)
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0.0 <= gamma <= 1.0:
        raise SCGError(f"surrogate_loss({what}=...): expected a number in [0, 1], got {gamma!r}")
    for i, j in pairs:
        v, c = rows[i], cols[j]
        if v.step is None or c.step is None:
            who = v if v.step is None else c
            raise SCGError(
                f"surrogate_loss({what}={gamma}): {who.describe()} has no step, but "
                f"{v.describe()} influences {c.describe()}; give both a step="
            )
        if c.step < v.step:
            raise SCGError(
                f"surrogate_loss({what}={gamma}): {v.describe()} influences "
                f"{c.describe()} at an earlier step; steps must not decrease along "
                "data flow"
            )
        yield i, j, float(gamma) ** (c.step - v.step)


def weight_matrix(
    a: np.ndarray, rows: Sequence[Node], cols: Sequence[Node], gamma: float | None, what: str = "discount"
) -> np.ndarray:
    """W: the influence ``a`` as 0/1, or its `step_weights` with a discount γ."""
    if gamma is None:
        return a.astype(float)
    w = np.zeros(a.shape, dtype=float)
    ii, jj = np.nonzero(a)
    for i, j, x in step_weights(zip(ii.tolist(), jj.tolist()), rows, cols, gamma, what):
        w[i, j] = x
    return w


#: the smallest node group whose credit from one cost group is a reverse cumulative sum
#: (`Term.suffix`) that takes it instead of the product with its triangular W: below it one
#: small matrix product is cheaper than the three operations of the sum
SUFFIX_MIN_ROWS = 128


@dataclass(kw_only=True, slots=True)
class Term:
    """The credit a node group gets from one cost group: Σ over ``parts`` of W @ the aligned
    costs, plus the whole-plate weights ``mixed`` applied to the costs summed over the plate."""

    group: int  # index of the cost group
    row: int  # a node row and a cost column of the pair (for messages)
    col: int
    aligned: bool  # the costs already have the node's shape, without sample dimensions
    mixed: torch.Tensor | None  # whole-plate weights (None: no pair mixes the plate)
    #: per-element weights, split by the first node dimension whose credit is shared (None:
    #: none is, see `_split_shared`)
    parts: list[tuple[int | None, torch.Tensor]]
    #: the only part's W is [j ≥ i] over as many costs as nodes (each node credited with the
    #: costs from its own on: reward-to-go), large enough that a reverse cumulative sum beats
    #: the product (`SUFFIX_MIN_ROWS`)
    suffix: bool
    #: the credit is the only part's W @ the stacked costs as they are: aligned 1-D costs (one
    #: element per example), no whole-plate weights, no shared dimensions, no suffix sum
    direct: bool


@dataclass(kw_only=True, slots=True)
class NodeGroupPlan:
    """Score nodes of one log-probability shape, dtype, device and sample layout."""

    layout: tuple[int, ...]
    rows: list[int]  # indices into CreditPlan.score
    nodes: list[int]  # the members' node indices (CreditPlan.score[rows])
    shared: list[tuple[int, int]]  # (row, plate rank): batch dims beyond the plates share credit
    cv: bool  # a member's estimator supplies control variates (RELAX)


@dataclass(kw_only=True, slots=True)
class CostGroupPlan:
    """Costs of one shape, dtype, device and sample layout."""

    layout: tuple[int, ...]
    cols: list[int]  # indices into the graph's costs


@dataclass(kw_only=True, slots=True)
class CreditPlan:
    """What the surrogate of a graph depends on through its structure only (module docstring)."""

    samples: SamplePlan
    sizes: dict[int, int]  # multi-sample / enumerated node index -> size of its dimension
    score: list[int]  # node indices of the score-function nodes
    node_groups: list[NodeGroupPlan]
    cost_groups: list[CostGroupPlan]
    influence: np.ndarray  # (score, costs): A[v, c] = v ≺ c
    weights: np.ndarray  # W: A, or the step weights γ^(s_c − t_v)
    mixed: np.ndarray  # whole-plate pairs
    costs: list[int]  # node indices of the costs (the columns of the matrices)
    cacheable: bool  # no sample dimensions (their weights depend on the values)
    #: per node group, its `Term`s (the cost groups that credit it), made on first use
    terms_of: dict[int, list[Term]] = field(default_factory=dict)
    #: `credit_pairs`, made on first use
    pairs: dict[tuple[int, int], bool] | None = None

    def credit_pairs(self) -> dict[tuple[int, int], bool]:
        """(score node index, cost index) -> whether the pair is credited whole-plate, for each
        pair the plan credits (`Graph.credit`, `Cached`'s checks). Made when first asked, not
        when the plan is built: it has an entry per influencing pair, O(nodes²) for a loop, and
        a training step never reads it."""
        got = self.pairs
        if got is None:
            ii, jj = np.nonzero(self.influence)
            rows = np.array(self.score, dtype=np.int64)[ii].tolist()
            cols = np.array(self.costs, dtype=np.int64)[jj].tolist()
            got = self.pairs = dict(zip(zip(rows, cols), self.mixed[ii, jj].tolist()))
        return got

    def terms(self, gi: int, node_shape: torch.Size, stacks: Sequence[torch.Tensor]) -> list[Term]:
        """The cost groups that credit node group ``gi``, with their weight matrices (in the
        dtype and on the device of each group's ``stacks``, its stacked costs; cached: the
        shapes, dtypes and devices are the signature's)."""
        got = self.terms_of.get(gi)
        if got is not None:
            return got
        ng = self.node_groups[gi]
        w_rows, m_rows = self.weights[ng.rows], self.mixed[ng.rows]
        out: list[Term] = []
        for cj, (cg, like) in enumerate(zip(self.cost_groups, stacks)):
            sub = w_rows[:, cg.cols]  # (rows, cols)
            if not sub.any():
                continue
            i, j = (int(x[0]) for x in np.nonzero(sub))
            w_mix = None
            mix = m_rows[:, cg.cols] & (sub != 0)
            if mix.any():
                w_mix = torch.as_tensor(np.where(mix, sub, 0.0), dtype=like.dtype, device=like.device)
                sub = np.where(mix, 0.0, sub)
            split = _split_shared(sub, ng.shared, len(ng.layout))
            suffix = (
                w_mix is None
                and len(split) == 1
                and split[0][0] is None
                and SUFFIX_MIN_ROWS <= sub.shape[0] == sub.shape[1]
                and bool((split[0][1] == np.triu(np.ones_like(sub))).all())
            )
            aligned = not ng.layout and not cg.layout and like.shape[1:] == node_shape
            out.append(
                Term(
                    group=cj,
                    row=i,
                    col=j,
                    aligned=aligned,
                    mixed=w_mix,
                    parts=[(start, torch.as_tensor(p, dtype=like.dtype, device=like.device)) for start, p in split],
                    suffix=suffix,
                    direct=aligned
                    and w_mix is None
                    and not suffix
                    and len(split) == 1
                    and split[0][0] is None
                    and len(node_shape) == 1,
                )
            )
        self.terms_of[gi] = out
        return out


def _split_shared(sub: np.ndarray, shared: list[tuple[int, int]], nl: int) -> list[tuple[int | None, np.ndarray]]:
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


def _shared_rows(members: Sequence[StochasticNode], nl: int) -> list[tuple[int, int]]:
    """(row, plate rank) of the members with batch dimensions beyond their declared plates."""
    rows = [(r, plate_rank(v, nl)) for r, v in enumerate(members) if v.plates is not None]
    return [(r, k) for r, k in rows if nl + k < logp(members[r]).dim()]


def build_plan(graph: GraphRecord, full: Sequence[int], discount: float | None, higher_order: bool) -> CreditPlan:
    """The structural part of the surrogate, with the checks that depend on the structure."""
    costs = graph.cost_nodes
    samples = SamplePlan(graph, full)
    sizes = {i: int(cast(int, v.n)) for i, v in samples.nodes.items()}
    lay = samples.layout if samples.active else (lambda n: ())
    plates = PlateCheck(
        graph,
        full,
        # (every node's: a named deterministic node's positions pass to the nodes computed from it)
        {n.index: len(lay(n)) for n in graph.nodes} if samples.active else {},
    )
    if samples.active:
        for c in costs:
            plates.check_sample_slices(c, samples.layout(c))
    check_enumerated(graph, plates, costs)
    if discount is not None and discount < 1:
        check_enumerated_discount(graph, full, costs, discount)
    score = score_nodes(graph)
    if higher_order:  # score nodes, and enumerating ones whose weights' derivatives are estimates
        for v in [*score, *(u for u in graph.stochastic_nodes if u.estimator.enumerates)]:
            if not v.estimator.higher_order:
                raise SCGError(
                    f"surrogate_loss(dice=True): {v.describe()} uses {v.estimator!r}, "
                    "whose higher derivatives are not unbiased; use ScoreFunction() "
                    "there"
                )
    cost_groups = [
        CostGroupPlan(layout=key[3], cols=cols)
        for key, cols in group(costs, lambda c: (tuple(c.value.shape), c.value.dtype, c.value.device, lay(c))).items()
    ]
    node_groups = []
    for key, rows in group(score, lambda v: (tuple(logp(v).shape), logp(v).dtype, logp(v).device, lay(v))).items():
        members = [score[i] for i in rows]
        node_groups.append(
            NodeGroupPlan(
                layout=key[3],
                rows=rows,
                nodes=[v.index for v in members],
                shared=_shared_rows(members, len(key[3])),
                cv=any(has_cv(v) for v in members),
            )
        )
    a = influence_matrix(full, score, costs) if score else np.zeros((0, len(costs)), dtype=bool)
    mixed = plates.matrix(score, costs, a)
    return CreditPlan(
        samples=samples,
        sizes=sizes,
        score=[v.index for v in score],
        node_groups=node_groups,
        cost_groups=cost_groups,
        influence=a,
        weights=weight_matrix(a, score, costs, discount),
        mixed=mixed,
        costs=[c.index for c in costs],
        cacheable=not samples.active,
    )


def _relation_of(graph: GraphRecord) -> Relation:
    """A tracked graph's relation: each node's direct parents and foreign positions."""
    return tuple((n.parents, tuple(sorted(n.foreign.items()))) for n in graph.nodes)


#: the plans of tracked graphs (no structure) by (signature, relation, options): a training loop
#: that repeats its graph builds its plan once (bounded, cleared when full)
_TRACKED_PLANS: dict[Hashable, CreditPlan] = {}
_TRACKED_PLANS_LIMIT = 64


def plan_for(
    graph: GraphRecord, full: list[int], discount: float | None, dice: bool, dice_lambda: float | None
) -> CreditPlan:
    """The graph's plan: a structure's plan of an earlier graph with this signature, or a new
    one (learned by a [`Cached`][scg.Cached] structure from a tracked graph, and kept).

    A plan is a function of the signature, the relation (each node's parents and foreign
    positions) and the options; a cacheable one (no sample dimensions) does not read the values.
    So a tracked graph whose relation is one the plan was built from gets that plan: the
    ``Cached`` check that finds the relation it has cached, and the tracked graphs (no
    structure) of a training loop."""
    structure = graph.structure
    plan: CreditPlan | None = None
    relation = _relation_of(graph) if graph.tracked else None
    if structure is not None:
        sig = graph.signature()
        key = (sig, discount, dice, dice_lambda)
        known = structure.relations.get(sig)
        # (a Cached check, a tracked graph: the cached plan if the relation did not change)
        if known is not None and (relation is None or known[0] == relation):
            plan = structure.plans.get(key)
    elif relation is not None:
        tracked_key = (graph.signature(), relation, discount, dice, dice_lambda)
        plan = _TRACKED_PLANS.get(tracked_key)
    built = plan is None
    if plan is None:
        try:
            plan = build_plan(graph, full, discount, dice or dice_lambda is not None)
        except SCGError as e:  # (a Cached graph on its conservative relation: say so)
            if isinstance(structure, Cached) and relation is None and sig not in structure.relations:
                raise structure.refused_fallback(sig, e) from None
            raise
    if structure is not None:
        if relation is not None:
            # (where the program read sampled values: asked until a Cached structure has seen one)
            reads = graph.draws_read(full) if isinstance(structure, Cached) and structure.draws_read is None else None
            structure._learn(graph.nodes, sig, relation, full, plan.credit_pairs(), reads)
        if built and plan.cacheable and sig in structure.relations:
            structure.plans[key] = plan
    elif built and relation is not None and plan.cacheable:
        if len(_TRACKED_PLANS) >= _TRACKED_PLANS_LIMIT:
            _TRACKED_PLANS.clear()
        _TRACKED_PLANS[tracked_key] = plan
    if graph.tracked:
        # (a declared edge need not be a path, so a declaration cannot tell "no differentiable
        # path" from "no path": the check needs tracked data flow. A Cached structure makes it
        # on the graphs it tracks, where it learns and re-checks the relation, as it does the
        # relation itself)
        check_pathwise(graph, full, graph.cost_nodes)
    return plan
