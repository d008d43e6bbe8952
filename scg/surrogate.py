"""The surrogate loss of Algorithm 1 (Schulman, Heess, Weber & Abbeel 2015).

For a graph with stochastic nodes S, cost nodes C and parameters θ, Theorem 1 gives

    ∇_θ E[Σ_{c∈C} c] = E[ Σ_{v∈S, θ≺v} ∇_θ log p(v | parents_v) · (Ĉ_v − b_v)  +  Σ_{c∈C, θ≺c} ∇_θ c ],

with Ĉ_v = Σ_{c ∈ C, v ≺ c} ĉ the sum of the costs that v *influences* (v ≺ c: a data-flow path from
v to c) and b_v a baseline that does not depend on v's descendants (Theorem 2). Algorithm 1 turns
this into a scalar whose ordinary gradient is the estimate:

    L(θ) = Σ_c c + Σ_v log p(v | parents_v) · stop_gradient(Ĉ_v − b_v).

This module builds L exactly, with two refinements:

* Each element of a batched node is credited with the matching elements of the costs (leading
  dimensions line up), so examples in a batch do not share credit.
* The score term is written ``(log p − stop_gradient(log p)) · A``: its value is exactly zero, so
  ``L`` *evaluates* to Σ c (loggable) while its gradient is unchanged.

Ĉ is computed for all nodes at once: the influence relation becomes a 0/1 matrix (discount weights
γ^(s_c − t_v) with ``discount=γ``), and Ĉ = W @ stack(costs), one matrix product per group of equally
shaped nodes and costs instead of a Python loop over (node, cost) pairs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import torch

from scg.baselines.base import Baseline
from scg.errors import SCGError
from scg.graph.graph import Graph
from scg.graph.nodes import CostNode, Node, StochasticNode
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
    return unpacked[:, [r.index for r in rows]].T.astype(bool)


def _discount_weights(
    a: np.ndarray, rows: Sequence[Node], cols: Sequence[Node], gamma: float
) -> np.ndarray:
    """γ^(s_c − t_v) where v influences c; errors name nodes with missing or inverted steps."""
    if not 0.0 <= gamma <= 1.0:
        raise SCGError(f"surrogate_loss(discount=...): expected a number in [0, 1], got {gamma!r}")
    t = np.array([np.nan if r.step is None else r.step for r in rows], dtype=float)
    s = np.array([np.nan if c.step is None else c.step for c in cols], dtype=float)
    lag = s[None, :] - t[:, None]
    bad = a & np.isnan(lag)
    if bad.any():
        i, j = (int(x[0]) for x in np.nonzero(bad))
        who = rows[i] if rows[i].step is None else cols[j]
        raise SCGError(f"surrogate_loss(discount={gamma}): {who.describe()} has no step, but "
                       f"{rows[i].describe()} influences {cols[j].describe()}; give both a step=")
    back = a & (lag < 0)
    if back.any():
        i, j = (int(x[0]) for x in np.nonzero(back))
        raise SCGError(f"surrogate_loss(discount={gamma}): {rows[i].describe()} influences "
                       f"{cols[j].describe()} at an earlier step; steps must not decrease along "
                       "data flow")
    w: np.ndarray = np.where(a, np.power(gamma, np.where(a, lag, 0.0)), 0.0)
    return w


def _align(stack: torch.Tensor, node_shape: torch.Size, cost: CostNode, node: Node) -> torch.Tensor:
    """Reduce/broadcast stacked costs ``(q, *S_c)`` to ``(q, *S_v)``, aligning leading dims.

    A cost dimension beyond the node's is summed; a dimension where the node has size 1 and the
    cost does not is summed; a cost dimension of size 1 (or missing) is broadcast.
    """
    cost_shape = stack.shape[1:]
    k = len(node_shape)
    x = stack
    if len(cost_shape) > k:
        x = x.sum(dim=tuple(range(1 + k, 1 + len(cost_shape))))
    sum_dims = []
    for i in range(min(len(cost_shape), k)):
        ci, vi = cost_shape[i], node_shape[i]
        if ci == vi or ci == 1:
            continue
        if vi == 1:
            sum_dims.append(1 + i)
            continue
        raise SCGError(
            f"{cost.describe()} has shape {tuple(cost_shape)}, which does not line up with the "
            f"batch shape {tuple(node_shape)} of {node.describe()} that influences it: scg aligns "
            "leading (batch) dimensions, so dimension "
            f"{i} must be {vi} or 1 (or the node's must be 1); reshape the cost or the node"
        )
    if sum_dims:
        x = x.sum(dim=tuple(sum_dims), keepdim=True)
    missing = k - (x.dim() - 1)
    if missing > 0:
        x = x.reshape(*x.shape, *([1] * missing))
    return x.expand(x.shape[0], *node_shape)


def _group(items: Sequence[Node], key_fn: object) -> dict[object, list[int]]:
    groups: dict[object, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups[key_fn(item)].append(i)  # type: ignore[operator]
    return groups


def _apply_baselines(
    nodes: Sequence[Node], baselines: Sequence[Baseline | None], targets: torch.Tensor,
    losses: list[torch.Tensor],
) -> torch.Tensor:
    """``targets − b`` for each row; rows sharing a baseline object are evaluated together."""
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
        if not torch.isfinite(value).all():
            raise SCGError(f"the baseline {objects[key]!r} of {nodes[idx[0]].describe()} returned "
                           "a non-finite value")
        if len(idx) == len(nodes):
            out = targets - value
        else:
            out[idx] = targets[idx] - value
        if result.loss is not None:
            losses.append(result.loss)
    return out


def _check_finite(stack: torch.Tensor, costs: Sequence[CostNode]) -> None:
    if bool(torch.isfinite(stack).all()):
        return
    for c in costs:
        if not bool(torch.isfinite(c.value).all()):
            raise SCGError(f"{c.describe()} is not finite (it contains NaN or inf)")


def _check_baseline_inputs(full: Sequence[int], node: StochasticNode) -> None:
    mask = int(node.extra.get("baseline_inputs_mask", 0))
    reach = mask
    for j in bits(mask):
        reach |= full[j]
    if reach >> node.index & 1:
        raise SCGError(f"the baseline inputs of {node.describe()} are computed from the node's own "
                       "sample; a baseline may only use information from before the sample "
                       "(Theorem 2), otherwise the estimate is biased")


def surrogate_loss(graph: Graph, *, discount: float | None = None) -> torch.Tensor:
    """Build the surrogate loss of ``graph`` (Algorithm 1; see the module docstring).

    Args:
        graph: a graph whose program has run (usually after its ``with`` block).
        discount: γ in [0, 1]. A cost at step s then credits a node at step t ≤ s with weight
            γ^(s − t) (the C2F paper's discounted reward-to-go); every node and cost connected
            by influence needs a ``step``.

    Returns:
        A scalar equal in value to the sum of all costs, whose gradient is an unbiased estimate
        of ∇_θ E[Σ costs] for unbiased estimators.
    """
    if graph._surrogate_built:
        raise SCGError("surrogate_loss() was already called on this graph; a graph records one "
                       "run of the program, so build a new scg.Graph() for the next estimate")
    costs = graph.cost_nodes
    if not costs:
        raise SCGError("surrogate_loss() on a graph with no cost nodes: add costs with scg.cost()")
    graph._surrogate_built = True
    full = graph.full_influence()
    extra_losses: list[torch.Tensor] = []

    # Costs, grouped by shape: (q, *S_c) stacks; cost baselines give ĉ = c − b_c.
    cost_groups = _group(costs, lambda c: (tuple(c.value.shape), c.value.dtype, c.value.device))
    total: torch.Tensor | None = None
    adjusted: dict[object, torch.Tensor] = {}
    for key, idx in cost_groups.items():
        members = [costs[i] for i in idx]
        stack = torch.stack([c.value for c in members])
        _check_finite(stack.detach(), members)
        part = stack.sum()
        total = part if total is None else total + part
        adjusted[key] = _apply_baselines(members, [c.baseline for c in members], stack.detach(),
                                         extra_losses)
    assert total is not None

    score = [v for v in graph.stochastic_nodes if v.log_prob is not None and v.estimator.score]
    term: torch.Tensor | None = None
    if score:
        a = influence_matrix(full, score, costs)  # (|S|, |C|)
        w = a.astype(float) if discount is None else _discount_weights(a, score, costs, discount)
        node_groups = _group(score, lambda v: (tuple(v.log_prob.shape), v.log_prob.dtype))
        for (shape, _), rows in node_groups.items():
            members = [score[i] for i in rows]
            node_shape = torch.Size(shape)
            c_hat: torch.Tensor | None = None
            for key, cols in cost_groups.items():
                sub = w[np.ix_(rows, cols)]
                if not sub.any():
                    continue
                stack = adjusted[key]
                i, j = (int(x[0]) for x in np.nonzero(sub))
                aligned = _align(stack, node_shape, costs[cols[j]], members[i])
                weights = torch.as_tensor(sub, dtype=stack.dtype, device=stack.device)
                part = (weights @ aligned.reshape(len(cols), -1)).reshape(len(rows), *node_shape)
                c_hat = part if c_hat is None else c_hat + part
            if c_hat is None:
                continue
            for v in members:
                if "baseline_inputs_mask" in v.extra:
                    _check_baseline_inputs(full, v)
            adv = _apply_baselines(members, [v.baseline for v in members], c_hat, extra_losses)
            logp = torch.stack([v.log_prob for v in members])  # type: ignore[misc]
            part = ((logp - logp.detach()) * adv).sum()
            term = part if term is None else term + part
    loss = total
    if term is not None:
        loss = loss + term
    for extra in extra_losses:
        loss = loss + (extra - extra.detach())
    return loss


def objective(graph: Graph) -> torch.Tensor:
    """The objective's value for this run: Σ_c sum(c), differentiable through the costs.

    ``scg.testing`` weights it by the probability of each enumerated run to get E[Σ c] exactly.
    """
    costs = graph.cost_nodes
    if not costs:
        raise SCGError("objective() on a graph with no cost nodes: add costs with scg.cost()")
    total = costs[0].value.sum()
    for c in costs[1:]:
        total = total + c.value.sum()
    return total
