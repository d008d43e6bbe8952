"""Checks, when the surrogate is built, that the recorded graph still describes the program.

Each check turns a case where the surrogate would silently be a biased (or zero) estimate into an
error or a warning naming the node and where it was created:

* **Writes after registration** (tensor version counters): a cost written in place after
  ``scg.cost`` (its recorded influence would be stale, and the surrogate would use the new
  value); a baseline input written after the sample it must precede (Theorem 2 of Schulman et
  al. 2015 is checked on the inputs' influence when the node was drawn).
* **Nested graphs**: a cost of this graph computed from a sample drawn in a graph nested in it
  (this graph has no score term for that draw).
* **Enumeration across examples**: an enumerated node whose costs mix its batch elements
  (`scg.credit.plates`): enumerating every example's support in lockstep is exact only for
  per-example costs.
* **Pathwise without a path**: a node differentiated pathwise (``rsample``) influences a cost
  only through operations autograd cannot differentiate (a step function, ``detach``, ``no_grad``,
  an integer cast): its pathwise gradient there is silently zero (Mohamed et al. 2020, §5: the
  pathwise estimator needs a differentiable cost). scg warns and points to the score function.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from scg.credit.plates import PlateCheck
from scg.errors import InfluenceLostError, NonDifferentiablePathWarning, SCGError
from scg.estimators.pathwise import Pathwise
from scg.graph.graph import GraphRecord
from scg.graph.masks import bits, with_ancestors
from scg.graph.nodes import CostNode, Node, StochasticNode

__all__ = [
    "check_after_registration",
    "check_baseline_inputs",
    "check_enumerated",
    "check_enumerated_discount",
    "check_pathwise",
]


def check_after_registration(graph: GraphRecord, full: Sequence[int]) -> None:
    """Writes after registration, and costs computed from samples of nested graphs."""
    for c in graph.costs:
        version = c.version
        if version is not None and c.value._version != version:
            raise SCGError(
                f"{c.describe()} was written in place after scg.cost registered "
                "it; the influence scg recorded no longer describes its value. Register "
                "the cost after its last write (or pass a copy: scg.cost(c.clone()))"
            )
    # (baseline inputs are recorded only for nodes registered with a baseline)
    for node in graph.nodes if graph.has_baselines else ():
        inputs = getattr(node, "baseline_inputs", None)
        for t, version in inputs.versions if inputs is not None else ():
            if t._version != version:
                raise SCGError(
                    f"an input of the baseline of {node.describe()} was written in "
                    "place after the node was registered; a baseline may only use "
                    "information from before the sample (Theorem 2), which scg checks "
                    "when the node is drawn. Pass a copy to the baseline (x.clone())"
                )
    if graph.nested:
        nested = sum(1 << i for i in graph.nested)
        for c in graph.cost_nodes:
            hit = full[c.index] & nested
            if hit:
                i = next(iter(bits(hit)))
                raise SCGError(
                    f"{c.describe()} is computed from {graph.nested[i]}, which was "
                    "drawn in a scg.Graph nested inside this one: this graph has no "
                    "score term for it, so the gradient would be biased. Draw it in "
                    "this graph, or keep its costs in the nested graph"
                )


def check_baseline_inputs(graph: GraphRecord, full: Sequence[int]) -> None:
    """Theorem 2: a baseline must not depend on a node it is subtracted for.

    A node baseline b_v must not be computed from v (or from anything v influences); a cost
    baseline b_c is subtracted from the credit of every score node that influences c, so it must
    not be computed from any of them.
    """
    for node in graph.nodes if graph.has_baselines else ():
        inputs = getattr(node, "baseline_inputs", None)
        if inputs is None or not inputs.mask:  # (no node: an untracked graph's inputs, or constants)
            continue
        reach = with_ancestors(inputs.mask, full)
        if isinstance(node, StochasticNode):
            if reach >> node.index & 1:
                raise SCGError(
                    f"the baseline inputs of {node.describe()} are computed from the "
                    "node's own sample; a baseline may only use information from "
                    "before the sample (Theorem 2), otherwise the estimate is biased"
                )
            continue
        for j in bits(reach & full[node.index]):
            v = graph.nodes[j]
            if isinstance(v, StochasticNode) and v.estimator.score:
                raise SCGError(
                    f"the baseline inputs of {node.describe()} are computed from "
                    f"{v.describe()}, which influences the cost: subtracting it from "
                    "the cost would bias that node's gradient (Theorem 2); use a "
                    "baseline that does not depend on it (e.g. an EMA) or attach it "
                    "to a later node"
                )
    for index, escaped in graph.escaped_before.items():
        _check_conditional_cost(graph, full, graph.nodes[index], escaped)


def _check_conditional_cost(graph: GraphRecord, full: Sequence[int], cost: Node, escaped: int) -> None:
    """A cost of a step, with a baseline, made after the values of ``escaped`` left tensor land:
    the step loop may have branched on them (``if done.all(): break``), so whether the cost exists
    can depend on them and on what they were drawn from. Its baseline then enters as
    1{c exists}·b_c, a function of those nodes: subtracted from the credit of one of them, a
    biased gradient. (A cost made without a step is taken to exist on every draw: the check is
    for the per-step costs of an episode that ends early.)"""
    reach = with_ancestors(escaped, full)
    for j in bits(reach & full[cost.index]):
        v = graph.nodes[j]
        if isinstance(v, StochasticNode) and v.estimator.score:
            raise SCGError(
                f"{cost.describe()} has a baseline, and it was made after the value of {v.describe()} (or of a "
                "node drawn from it) left tensor land, where the step loop may branch on it (e.g. "
                "`if done.all(): break`): whether the cost exists may depend on that node, so subtracting the "
                "baseline from its credit biases its gradient (Theorem 2). Put the baseline on the node "
                "(scg.sample(..., baseline=...)), or make the cost on every draw (a zero cost where it does "
                "not apply)"
            )


def check_enumerated(graph: GraphRecord, plates: PlateCheck, costs: Sequence[CostNode]) -> None:
    """An enumerated node must not have costs that mix its batch elements."""
    for v in graph.stochastic_nodes:
        if not v.enumerated:
            continue
        for c in costs:
            if plates.mixed(v, c, every_batch_dim=True):  # (its plates or not: lockstep values)
                name = type(v.estimator).__name__ if v.estimator is not None else "its estimator"
                raise SCGError(
                    f"{c.describe()} mixes the batch elements of the enumerated "
                    f"{v.describe()}: {name}() weights every example's values by their "
                    "probabilities in lockstep, which is exact only when each example's cost depends "
                    "on its own element. Use a score-function estimator, or one example per node"
                )


def check_pathwise(graph: GraphRecord, full: Sequence[int], costs: Sequence[CostNode]) -> None:
    """Warn (raise `InfluenceLostError` in ``strict`` mode) when a pathwise node influences a
    cost through a non-differentiable operation: on every path, or on some of them."""
    pathwise = [v for v in graph.stochastic_nodes if isinstance(v.estimator, Pathwise) and v.value.requires_grad]
    if not pathwise:
        return
    direct = _non_score_closure(graph)
    tracker = graph.live_tracker
    for c in costs:
        wanted = {
            v.value.grad_fn: v for v in pathwise if direct[c.index] >> v.index & 1 and v.value.grad_fn is not None
        }
        for fn in _reachable(c.value.grad_fn, set(wanted)) if wanted else ():
            wanted.pop(fn, None)
        # some path, not every one, through a gradient break (scg.graph.tracking)
        broken = tracker.broken(c.value) & direct[c.index] if tracker is not None else 0
        for v in pathwise if broken else ():
            if broken >> v.index & 1 and v.value.grad_fn not in wanted:
                _report(
                    graph,
                    c,
                    f"{c.describe()} depends on the pathwise {v.describe()} through at least one "
                    "operation autograd does not differentiate (a comparison or step function, "
                    "round, detach(), torch.no_grad(), an integer cast or index), besides "
                    "differentiable paths: the pathwise gradient misses that path's part, which "
                    "is biased unless the cost is continuous there (torch.where(x > 0, x, 0)). "
                    "Use scg.sample(..., estimator=scg.ScoreFunction()) for this node",
                )
        for v in wanted.values():
            _report(
                graph,
                c,
                f"{c.describe()} depends on the pathwise {v.describe()} only through operations "
                "autograd cannot differentiate (a comparison or step function, detach(), "
                "torch.no_grad(), an integer cast): its pathwise gradient there is zero, which "
                "is biased. Use scg.sample(..., estimator=scg.ScoreFunction()) for this node",
            )


def _report(graph: GraphRecord, cost: CostNode, msg: str) -> None:
    """The warning, at the cost's line (an error in ``strict`` mode)."""
    if graph.strict:
        raise InfluenceLostError(msg + " (scg.Graph(strict=True))")
    file, _, line = str(cost.location).rpartition(":")
    warnings.warn_explicit(msg, NonDifferentiablePathWarning, file or "<unknown>", int(line) if line.isdigit() else 0)


def _non_score_closure(graph: GraphRecord) -> list[int]:
    """Influence along paths that pass through no score-function node (those carry the credit
    through their score terms, not through autograd)."""
    out: list[int] = []
    for node in graph.nodes:
        acc = node.parents
        for j in bits(node.parents):
            parent: Node = graph.nodes[j]
            if not (isinstance(parent, StochasticNode) and parent.estimator.score):
                acc |= out[j]
        out.append(acc)
    return out


def _reachable(root: Any, targets: set[Any]) -> set[Any]:
    """The members of ``targets`` reachable from the autograd node ``root``."""
    found: set[Any] = set()
    if root is None:
        return found
    seen = {root}
    stack = [root]
    while stack and len(found) < len(targets):
        fn = stack.pop()
        if fn in targets:
            found.add(fn)
        for nxt, _ in getattr(fn, "next_functions", ()):
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return found


def check_enumerated_discount(graph: GraphRecord, full: Sequence[int], costs: Sequence[Node], gamma: float) -> None:
    """Refuse ``discount=γ < 1`` where an enumerating node influences a cost at a later step: its
    credit is the gradient of its weights ω, which multiply the whole cost, so the cost would be
    credited with weight 1, not γ^(s − t) (a score-function node of the same program gets
    γ^(s − t): swapping the estimator silently changed the mean, d/dθ 2.214 against 1.724)."""
    for v in graph.stochastic:
        if not v.enumerated or v.step is None:
            continue
        for c in costs:
            if c.step is not None and c.step > v.step and full[c.index] >> v.index & 1:
                raise SCGError(
                    f"surrogate_loss(discount={gamma}): {v.describe()} uses {v.estimator!r}, which "
                    f"enumerates its values and is credited through their weights, so {c.describe()} would "
                    f"reach it undiscounted instead of with γ^{c.step - v.step}; "
                    "use a score-function estimator on a node a discount applies to, or discount=None"
                )
