"""The surrogate inside ``torch.compile``: Algorithm 1 with no NumPy and no host reads.

:func:`scg.credit.surrogate.surrogate_loss` builds its credit matrices with NumPy and caches them per
graph signature; it checks that the costs are finite with one host read. Neither can be traced
by dynamo. When a program that opens a ``scg.Graph(structure=scg.Declared(...))`` is compiled
(``torch.compile(step, fullgraph=True)``), the surrogate is built here instead, from the same
declared relation, as plain Python over the nodes and torch operations on their values:

    L = Σ_c sum(c) + λ Σ_G sum((log p_G − stop_grad(log p_G)) ⊙ Ĉ_G),
    Ĉ_G = Σ_H  W_GH @ align(stop_grad(stack(c ∈ H))),

for each group G of score-function nodes with one log-probability shape and each group H of
costs with one shape, with W_GH[v, c] = 1 (or γ^(s_c − t_v) with ``discount=γ``) when v ≺ c under
the declaration and 0 otherwise. W_GH is a constant of the traced graph: the structure is fixed
when the program is traced (dynamo re-traces when it changes). The value and the gradient equal
the eager surrogate's for the same draws (``tests/test_compile.py``).

What the traced surrogate covers is what a compiled training step of a declared model needs:
score-function and pathwise nodes, per-example credit, ``discount`` and ``score_scale``. It
refuses, naming the node, what needs the eager surrogate: baselines (they keep state across
steps), multi-sample and enumerated nodes, declared ``plates=``, per-example declarations other
than ``True``, control variates (RELAX) and DiCE. Checks that need a host read (finite costs) or
a version counter (writes after ``scg.cost``) are not made while tracing.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from scg.credit.sample_dims import align_batch_to_node
from scg.errors import SCGError
from scg.estimators.base import Estimator
from scg.graph.graph import Graph
from scg.graph.nodes import CostNode, StochasticNode
from scg.graph.structure import Declared, declared_relation
from scg.graph.tracking import closure

__all__ = ["traced_surrogate_loss"]


def _refuse(what: str) -> SCGError:
    return SCGError(f"surrogate_loss() inside torch.compile: {what}; build the surrogate outside "
                    "the compiled function (compile the model's functions only), or drop the "
                    "feature from the compiled step (docs/performance.md)")


def _check_supported(graph: Graph, dice: bool, dice_lambda: float | None) -> Declared:
    structure = graph.structure
    if not isinstance(structure, Declared):  # (Graph._enter_traced refuses the others first)
        raise _refuse(f"the graph's structure is {structure!r}, not scg.Declared")
    if dice or dice_lambda is not None:
        raise _refuse("DiCE objectives (dice=, dice_lambda=) are not traced")
    if structure.per_example is not True:
        raise _refuse(f"{structure!r} declares per_example={structure.per_example!r}; only "
                      "per_example=True is traced")
    for v in graph._stochastic:
        if v.n is not None or v.extra.get("enumerated"):
            raise _refuse(f"{v.describe()} has a sample dimension (n= or Enumerate)")
        if v.baseline is not None:
            raise _refuse(f"{v.describe()} has a baseline (baselines keep state across steps)")
        if v.extra.get("plates") is not None:
            raise _refuse(f"{v.describe()} declares plates=")
        if type(v.estimator).control_variate is not Estimator.control_variate:
            raise _refuse(f"{v.describe()} uses {v.estimator!r}, whose control variates are "
                          "not traced")
    for c in graph._costs:
        if c.baseline is not None:
            raise _refuse(f"{c.describe()} has a baseline (baselines keep state across steps)")
    return structure


def _weight(v: StochasticNode, c: CostNode, full: Sequence[int], discount: float | None) -> float:
    """W[v, c]: 1 (or γ^(s_c − t_v)) when v influences c, else 0."""
    if not full[c.index] >> v.index & 1:
        return 0.0
    if discount is None:
        return 1.0
    if v.step is None or c.step is None:
        who = v if v.step is None else c
        raise SCGError(f"surrogate_loss(discount={discount}): {who.describe()} has no step, but "
                       f"{v.describe()} influences {c.describe()}; give both a step=")
    if c.step < v.step:
        raise SCGError(f"surrogate_loss(discount={discount}): {v.describe()} influences "
                       f"{c.describe()} at an earlier step; steps must not decrease along data "
                       "flow")
    return float(discount) ** (c.step - v.step)


def _groups(items: Sequence[torch.Tensor]) -> dict[tuple[torch.Size, torch.dtype], list[int]]:
    out: dict[tuple[torch.Size, torch.dtype], list[int]] = {}
    for i, t in enumerate(items):
        out.setdefault((t.shape, t.dtype), []).append(i)
    return out


def traced_surrogate_loss(graph: Graph, *, discount: float | None, dice: bool,
                          dice_lambda: float | None, score_scale: float) -> torch.Tensor:
    """The surrogate of ``graph`` (a declared graph opened inside ``torch.compile``), equal in
    value and gradient to :func:`scg.credit.surrogate.surrogate_loss`'s for the features above."""
    structure = _check_supported(graph, dice, dice_lambda)
    if discount is not None and not 0.0 <= discount <= 1.0:
        raise SCGError(f"surrogate_loss(discount=...): expected a number in [0, 1], got "
                       f"{discount!r}")
    relation = declared_relation(graph, structure.influences, True)
    for node, (parents, _) in zip(graph.nodes, relation):
        node.parents = parents
    full = closure([p for p, _ in relation])
    graph._full = full
    costs = graph._costs
    score = [v for v in graph._stochastic if v.log_prob is not None and v.estimator.score]

    cost_groups = _groups([c.value for c in costs])
    stacks = {key: torch.stack([costs[j].value for j in cols]) for key, cols in cost_groups.items()}
    loss: torch.Tensor | None = None
    for stack in stacks.values():
        part = stack.sum()
        loss = part if loss is None else loss + part
    assert loss is not None  # (surrogate_loss refuses a graph without costs)

    credit: dict[tuple[int, int], bool] = {}
    logps = [v.log_prob for v in score]
    for rows in _groups(logps).values():  # type: ignore[arg-type]
        members = [score[i] for i in rows]
        logp = torch.stack([logps[i] for i in rows])  # type: ignore[misc]  # (r, *shape)
        node_shape = logp.shape[1:]
        c_hat: torch.Tensor | None = None
        for key, cols in cost_groups.items():
            w = [[_weight(v, costs[j], full, discount) for j in cols] for v in members]
            if not any(x for row in w for x in row):
                continue
            for v in members:
                for j in cols:
                    if full[costs[j].index] >> v.index & 1:
                        credit[(v.index, costs[j].index)] = False
            aligned = align_batch_to_node(stacks[key].detach(), (), (), node_shape,
                                          costs[cols[0]], members[0], {})  # (q, *node_shape)
            weights = torch.tensor(w, dtype=aligned.dtype, device=aligned.device)  # (r, q)
            part = (weights @ aligned.reshape(len(cols), -1)).reshape(len(rows), *node_shape)
            c_hat = part if c_hat is None else c_hat + part
        if c_hat is None:
            continue
        term = ((logp - logp.detach()) * c_hat).sum()
        loss = loss + (term if score_scale == 1.0 else score_scale * term)
    graph._credit = credit
    return loss
