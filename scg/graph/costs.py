"""``scg.cost``: record a cost node (in a tracked graph, with the stochastic nodes that influence
its value)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from scg.baselines.base import check_baseline
from scg.errors import SCGError
from scg.graph.build import baseline_inputs, outside_graph
from scg.graph.graph import current_graph, eager_graph, is_compiling
from scg.graph.influence import reduced_mask
from scg.graph.nodes import CostNode, Node, caller_location
from scg.graph.threads import check_untracked

if TYPE_CHECKING:
    from scg.baselines.base import Baseline

__all__ = ["cost"]


def cost(
    value: torch.Tensor,
    *,
    name: str | None = None,
    step: int | None = None,
    baseline: Baseline | None = None,
    reduced: torch.Tensor | Node | Sequence[torch.Tensor | Node] | None = None,
) -> torch.Tensor:
    """Add a cost node. The objective is E[sum of all elements of all costs] (minimized).

    Args:
        value: a dense (strided) floating-point tensor; its leading dimensions line up with the
            batch dimensions of the stochastic nodes it depends on, so each example's
            log-probability is credited with that example's own cost.
        name: the node's name (unique together with ``step``); default ``cost_<i>``.
        step: the time step of the cost (for ``surrogate_loss(discount=γ)``).
        baseline: subtracted from the cost before it is credited to stochastic nodes (Algorithm
            1's ĉ ← ĉ − b_c), e.g. an ``EMA`` per decoder step as in the C2F paper.
        reduced: multi-sample node(s) (their values or nodes) whose sample dimension ``value``
            has already reduced itself, e.g. with a log-mean-exp (VIMCO, IWAE). Without it, a
            cost influenced by a node drawn with ``n=k`` must carry that node's sample
            dimension, and the objective averages over it (`scg.credit.sample_dims`).

    Returns:
        ``value`` itself, for chaining.
    """
    compiling = is_compiling()  # (`open_graph` inline, as in `sample`)
    g = current_graph(True) if compiling else eager_graph()
    location = caller_location(compiling)
    if g is None:
        raise outside_graph("cost", name, location)
    if not isinstance(value, torch.Tensor):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise SCGError(
                f"scg.cost(name={name!r}) at {location}: got a Python number ({value!r}); a cost "
                "must be a tensor so that scg can see which stochastic nodes it depends on"
                + (" (it is not finite)" if not math.isfinite(value) else "")
            )
        raise SCGError(f"scg.cost(name={name!r}) at {location}: expected a tensor, got {type(value).__name__}")
    tracked = g.tracked  # (untracked: the parents come from the graph's structure)
    if tracked:  # (scg's own reads of the value: not through the tracker's mode)
        with torch._C.DisableTorchFunction():
            floating = value.is_floating_point()
            layout = value.layout
            nested = value.is_nested
    else:
        floating = value.is_floating_point()
        layout = value.layout
        nested = value.is_nested
    if not floating:
        raise SCGError(
            f"scg.cost(name={name!r}) at {location}: a cost must be a floating-point "
            f"tensor, got dtype {value.dtype}; convert it with .float()"
        )
    if layout is not torch.strided or nested:  # (the surrogate expands and multiplies costs as dense
        # tensors; a strided nested tensor has no sizes to read)
        found, fix = ("a nested tensor", ".to_padded_tensor(0.0)") if nested else (f"layout {layout}", ".to_dense()")
        raise SCGError(
            f"scg.cost(name={name!r}) at {location}: a cost must be a dense (strided) tensor, got {found}; "
            f"convert it with {fix}"
        )
    inputs = None
    if baseline is not None:
        check_baseline(baseline, "scg.cost", name, location)
        inputs = baseline_inputs(g, baseline)
    vmask = g.mask(value) if tracked else 0
    reduced_nodes = reduced_mask(g, reduced, name, location) if reduced is not None else 0
    node = g.new_node(CostNode, name, "cost", step, location, value, vmask, g.foreign(value) if tracked else {})
    node.baseline = baseline
    node.reduced = reduced_nodes
    node.baseline_inputs = inputs
    g.record(node)
    if tracked:
        check_untracked(g, node, [value], vmask)
        if baseline is not None and step is not None and g.escaped:
            # (a cost of a step, made after values left tensor land: the step loop may have
            # branched on them, `if done.all(): break`; a cost made once, after the loop, exists
            # whatever the draws, as self-critical training's terminal reward)
            g.escaped_before[node.index] = g.escaped
    return value
