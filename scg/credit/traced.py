"""The surrogate inside ``torch.compile``: Algorithm 1 with no NumPy and no host reads.

`scg.credit.surrogate.surrogate_loss` builds its credit matrices with NumPy and caches them per
graph signature; it checks that the costs are finite with one host read. Neither can be traced
by dynamo. When a program that opens a ``scg.Graph(structure=scg.Declared(...))`` is compiled
(``torch.compile(step, fullgraph=True)``), the surrogate is built here instead, from the same
declared relation, as plain Python over the nodes and torch operations on their values:

    L = Σ_c sum(c) + s − stop_grad(s),   s = λ Σ_G sum(log p_G ⊙ (Ĉ_G − b_G)) + Σ_b loss_b,
    Ĉ_G = Σ_H  W_GH @ align(stop_grad(stack(c ∈ H) − b_H)),

for each group G of score-function nodes with one log-probability shape and each group H of
costs with one shape (b: their baselines, loss_b: the baselines' regression losses, below), with
W_GH[v, c] = 1 (or γ^(s_c − t_v) with ``discount=γ``) when v ≺ c under the declaration and 0
otherwise: the groups and the step weights are the credit plan's own (`scg.credit.plan.group`,
`scg.credit.plan.step_weights`), evaluated on Python lists instead of NumPy arrays. W_GH is a
constant of the traced graph: the structure is fixed when the program is traced (dynamo
re-traces when it changes). The value and the gradient equal the eager surrogate's for the same
draws (``tests/scg/graph/test_compile.py``).

Nodes drawn with ``n=k`` samples are laid out by the eager `scg.credit.sample_dims.SamplePlan`
(plain Python): the node and cost groups are keyed by their sample layouts too, each cost group
is weighted by ω = Π 1/k, and costs are aligned to nodes across sample dimensions as in eager
mode (`align_batch_to_node`).

Baselines are applied by the eager surrogate's own code (`scg.credit.signals.apply_baselines`,
the baselines' ``__call__``): cost baselines to the stacked costs, node baselines to each node
group's Ĉ (with the nodes' sample layouts), their regression losses added as ``l − stop_grad(l)``
(zero in value, the eager gradient). Their state is tensors and Python containers that dynamo
follows: an ``EMA``'s averages are a graph input and the updated averages an output stored back
on the object (the first call with an EMA that has not seen its nodes' keys compiles once more
when it has), a ``Learned`` module's forward is part of the graph and its parameters get the
regression's gradient, ``LeaveOneOut`` is tensor operations over the n=k samples. A baseline
that declares itself untraceable (`Baseline.untraceable`: ``Normalized`` reads its statistics to
the host, ``VIMCO`` keys its log-weights by graph) is refused naming the node, the baseline and
the reason.

What the traced surrogate covers is what a compiled training step of a declared model needs:
score-function and pathwise nodes, per-example credit (whole-plate, as in eager mode, for a cost
whose batch positions a size-1 place for samples displaced), ``discount``, ``score_scale``, ``n=k``
samples and the baselines above. It refuses, naming the node, what needs the eager surrogate:
enumerated nodes, declared ``plates=``, per-example declarations other than ``True``, control
variates (RELAX, LAX, REBAR) and DiCE. (ARM, DisARM, CategoricalDisARM and ARSM add none: their
``control_variate`` only refuses a ``LeaveOneOut`` baseline, and is called as in eager mode.)
Checks that need a host read (finite costs and baseline values) or a version counter (writes
after ``scg.cost``) are not made while tracing.

Before every call of a compiled step dynamo checks its guards: one per global the trace read,
scg's functions included (tracing ``scg.sample``, ``scg.cost`` and this surrogate reads some
fifty). On a small step they are most of what a compiled scg step costs over a compiled
hand-written one (``docs/performance.md``), so the surrogate reads few module globals here, and
`skip_scg_guards` (a ``guard_filter_fn``) drops the guards on scg's own modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from scg.credit.baselining import BaselineValues, apply_baselines
from scg.credit.plan import has_cv, step_weights
from scg.credit.plates import mixed_from, share_beyond
from scg.credit.sample_dims import SamplePlan, align_batch_to_node
from scg.credit.signals import apply_weights
from scg.credit.soundness import check_baseline_inputs
from scg.errors import SCGError
from scg.estimators.control import LearnedControl
from scg.graph.graph import GraphRecord
from scg.graph.masks import closure
from scg.graph.structure import Declared, declared_relation

if TYPE_CHECKING:
    from torch._dynamo.types import GuardFilterEntry

    from scg.baselines.base import Baseline
    from scg.graph.nodes import CostNode, StochasticNode

__all__ = ["skip_scg_guards", "traced_surrogate_loss"]


def _refuse(what: str) -> SCGError:
    return SCGError(
        f"surrogate_loss() inside torch.compile: {what}; build the surrogate outside "
        "the compiled function (compile the model's functions only), or drop the "
        "feature from the compiled step (docs/performance.md)"
    )


#: a node or cost group's key: shape, dtype, device and sample layout
_Key = tuple[tuple[int, ...], torch.dtype, torch.device, tuple[int, ...]]


def _check_supported(graph: GraphRecord, dice: bool, dice_lambda: float | None) -> Declared:
    structure = graph.structure
    if not isinstance(structure, Declared):  # (Graph._enter_traced refuses the others first)
        raise _refuse(f"the graph's structure is {structure!r}, not scg.Declared")
    if dice or dice_lambda is not None:
        raise _refuse("DiCE objectives (dice=, dice_lambda=) are not traced")
    if structure.per_example is not True:
        raise _refuse(f"{structure!r} declares per_example={structure.per_example!r}; only per_example=True is traced")
    nodes: list[StochasticNode | CostNode] = [*graph.stochastic, *graph.costs]
    for node in nodes:  # a baseline the compiled step cannot apply: why
        baseline: Baseline | None = node.baseline  # type: ignore[assignment]  # (the protocol's, a Baseline)
        if baseline is not None and baseline.untraceable is not None:
            raise _refuse(
                f"{node.describe()} has the baseline {type(baseline).__name__}, which is not traced: "
                f"{baseline.untraceable}"
            )
    for v in graph.stochastic:
        if v.enumerated:
            raise _refuse(
                f"{v.describe()} uses {v.estimator!r}, which enumerates values of its support: their weights "
                "are not traced"
            )
        if v.plates is not None:
            raise _refuse(f"{v.describe()} declares plates=")
        if has_cv(v) and isinstance(v.estimator, LearnedControl):  # (the others: `_no_control_variates`)
            raise _refuse(f"{v.describe()} uses {v.estimator!r}, whose control variates are not traced")
    return structure


def _no_control_variates(nodes: Sequence[StochasticNode]) -> None:
    """Call ``control_variate`` where a node's estimator overrides it, as the eager surrogate does
    for the node groups of its plan with ``cv`` (`scg.credit.signals.control_variates`): ARM,
    DisARM, CategoricalDisARM and ARSM add no control variate but refuse a ``LeaveOneOut``
    baseline there. One that returns control variates is refused (the learned ones, RELAX, LAX
    and REBAR, are refused before tracing them: their checks read the host)."""
    for v in nodes:
        if has_cv(v) and v.estimator.control_variate(v) is not None:
            raise _refuse(f"{v.describe()} uses {v.estimator!r}, whose control variates are not traced")


def traced_surrogate_loss(
    graph: GraphRecord, *, discount: float | None, dice: bool, dice_lambda: float | None, score_scale: float
) -> torch.Tensor:
    """The surrogate of ``graph`` (a declared graph opened inside ``torch.compile``), equal in
    value and gradient to `scg.credit.surrogate.surrogate_loss`'s for the features above.

    Every module-level name read here becomes a guard that dynamo checks before each call of
    the compiled step (``docs/performance.md``): the plan's helpers that only restate an
    attribute (the score nodes, their log-probabilities, the grouping) are written inline, and
    the sample plan is built only for a graph with ``n=k`` nodes."""
    structure = _check_supported(graph, dice, dice_lambda)
    relation = declared_relation(graph.nodes, structure.influences, True)
    for node, (parents, _) in zip(graph.nodes, relation):
        node.parents = parents
    full = closure([p for p, _ in relation])
    graph.use_relation(full)
    costs = graph.costs
    score = [v for v in graph.stochastic if v.log_prob is not None and v.estimator.score]
    cv = any(has_cv(v) for v in score)
    baselines = graph.has_baselines
    if baselines:
        check_baseline_inputs(graph, full)
    losses: list[torch.Tensor] = []  # the baselines' regression losses
    values: BaselineValues = []  # (their values: the finiteness check is a host read, not made here)
    # n=k sample dimensions: each node's and cost's layout, the costs weighted by ω = Π 1/k
    sizes = {v.index: v.n for v in graph.stochastic if v.n is not None}
    samples = SamplePlan(graph, full) if sizes else None
    # the plan's grouping (`scg.credit.plan.group`) and step weights, as plain Python (no NumPy
    # while tracing)
    cost_groups: dict[_Key, list[int]] = {}
    for j, c in enumerate(costs):
        x = c.value
        key = (tuple(x.shape), x.dtype, x.device, () if samples is None else samples.layout(c))
        cost_groups.setdefault(key, []).append(j)
    loss: torch.Tensor | None = None
    targets: dict[_Key, torch.Tensor] = {}  # per cost group: ω ⊙ (c − b_c), detached
    for key, cols in cost_groups.items():
        members = [costs[j] for j in cols]
        stack = torch.stack([c.value for c in members])
        info = [samples.layout_info(key[3])] * len(members) if samples is not None and key[3] else None
        target = apply_baselines(members, stack.detach(), losses, values, info) if baselines else stack.detach()
        if samples is not None and key[3]:
            scale, _ = samples.weight(key[3], stack.shape[1:], members[0])  # (no enumerated node: no factor)
            stack, target = stack * scale, (target * scale).detach()
        targets[key] = target
        part = stack.sum()
        loss = part if loss is None else loss + part
    assert loss is not None  # (surrogate_loss refuses a graph without costs)
    pairs = [(i, j) for i, v in enumerate(score) for j, c in enumerate(costs) if full[c.index] >> v.index & 1]
    w = (
        {(i, j): 1.0 for i, j in pairs}
        if discount is None
        else {(i, j): x for i, j, x in step_weights(pairs, score, costs, discount)}
    )
    # whole-plate pairs, as the eager plan's plate check finds them under a declaration with
    # per_example=True: with sample dimensions, a cost whose batch positions a size-1 place for
    # samples displaced (``z[:, None] * M``, (n, 1, B, D) of a (n, B, D) node) mixes the node's
    # elements (credited per element, z[b, d] met the cost's row d: a biased gradient)
    mixed: set[tuple[int, int]] = set()
    if samples is not None:
        for i, j in pairs:
            v, c = score[i], costs[j]
            lv, lc, vshape = len(samples.layout(v)), len(samples.layout(c)), v.log_prob.shape  # type: ignore[union-attr]
            if mixed_from(vshape[lv:], c.value.shape[lc:], len(vshape)):
                mixed.add((i, j))
    credit = {(score[i].index, costs[j].index): (i, j) in mixed for i, j in pairs}
    graph.set_credit(lambda: credit)
    score_sum: torch.Tensor | None = None  # Σ λ log p · (Ĉ − b) and the baselines' losses
    node_groups: dict[_Key, list[int]] = {}
    for i, v in enumerate(score):
        lp = v.log_prob
        assert lp is not None
        key = (tuple(lp.shape), lp.dtype, lp.device, () if samples is None else samples.layout(v))
        node_groups.setdefault(key, []).append(i)
    for node_key, rows in node_groups.items():
        lp = torch.stack([score[i].log_prob for i in rows])  # type: ignore[misc]  # (r, *shape)
        node_shape = lp.shape[1:]
        c_hat: torch.Tensor | None = None
        for key, cols in cost_groups.items():
            weights = [[w.get((i, j), 0.0) for j in cols] for i in rows]
            if not any(x for row in weights for x in row):
                continue
            small = targets[key]
            if samples is not None or small.shape[1:] != node_shape:  # (aligned already: as it is)
                # (an error names the first credited pair, as the eager plan's `Term.row`/`col`)
                i, j = next((i, j) for i, row in enumerate(weights) for j, x in enumerate(row) if x)
                small = align_batch_to_node(
                    small, key[3], node_key[3], node_shape, costs[cols[j]], score[rows[i]], sizes, expand=False
                )
            if mixed:  # (the whole-plate pairs: the cost summed over the node's batch, `Term.mixed`)
                whole = [[x if (i, j) in mixed else 0.0 for j, x in zip(cols, row)] for i, row in zip(rows, weights)]
                if any(x for row in whole for x in row):
                    weights = [
                        [0.0 if (i, j) in mixed else x for j, x in zip(cols, row)] for i, row in zip(rows, weights)
                    ]
                    wm = torch.tensor(whole, dtype=small.dtype, device=small.device)
                    part = apply_weights(wm, share_beyond(small, len(node_key[3])), len(cols), node_shape)
                    c_hat = part if c_hat is None else c_hat + part
            wt = torch.tensor(weights, dtype=small.dtype, device=small.device)  # (r, q)
            part = apply_weights(wt, small, len(cols), node_shape)
            c_hat = part if c_hat is None else c_hat + part
        if c_hat is None:
            continue
        nodes = [score[i] for i in rows]
        if baselines:
            info = None if samples is None else [samples.info(v) for v in nodes]
            c_hat = apply_baselines(nodes, c_hat, losses, values, info)
        if cv:
            _no_control_variates(nodes)
        term = (lp * c_hat).sum()  # (c_hat is detached)
        part = term if score_scale == 1.0 else score_scale * term
        score_sum = part if score_sum is None else score_sum + part
    for extra in losses:  # the baselines' regression losses
        score_sum = extra if score_sum is None else score_sum + extra
    # added as s − stop_grad(s), as the eager surrogate does: zero in value, the same gradient
    return loss if score_sum is None else loss + (score_sum - score_sum.detach())


#: where dynamo names scg's own modules in a guard: ``scg`` itself, imported by the program
#: (``G['scg']``), and each module whose globals the traced code read (``G['__import_scg_dot_…']``)
_SCG_SOURCES = ("G['scg']", "G['__import_scg_dot_")


def skip_scg_guards(entries: Sequence[GuardFilterEntry]) -> list[bool]:
    """A ``guard_filter_fn`` for ``torch.compile`` that drops the guards on scg's own modules.

    Dynamo guards every global that the traced code read: tracing ``scg.sample``, ``scg.cost``
    and the surrogate reads some fifty functions and constants of scg's modules (each a check of
    a code object's identity before every call), which a small compiled step pays for on each
    call (``docs/performance.md``). They can only fail if scg's own functions are replaced while
    the program runs. The guards on the program's own values (its tensors, its declared
    structure, the baselines' state) are kept::

        step = torch.compile(step, fullgraph=True, options={"guard_filter_fn": skip_scg_guards})
    """
    return [not any(source in e.name for source in _SCG_SOURCES) for e in entries]
