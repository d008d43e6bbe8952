"""Gradient breaks: where a pathwise node's influence passes an operation autograd does not differentiate.

A pathwise (reparameterized) node is credited through the gradient of the costs with respect to its
value. Data flow and autograd agree for most operations, but a comparison (``x > 0``), ``round``,
an integer cast, ``detach`` or any operation under ``torch.no_grad`` carries a node's influence
without its gradient: a cost computed through one depends on the node, yet autograd sends it no
gradient, so the pathwise estimate would miss that dependence (``docs/tracking.md``).

The tracker (`scg.graph.tracking`) knows which nodes' values require grad (``grad_nodes``); per
tensor it stores, under ``battr``, the mask of those whose influence reached the tensor through at
least one such operation. `carry_breaks` carries the inputs' breaks to the outputs and adds one
where a pathwise input's influence enters an output that autograd does not connect to it; the
credit code (`scg.credit.soundness.check_pathwise`) checks the costs' breaks when the surrogate
is built. A product with the number 0 carries nothing: ``relu(x) + (x > 0) * 0`` has no broken part.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from scg.graph.ops import F_ZERO_GRAD, flat_tensors

__all__ = ["BreakMarks", "carry_breaks"]

Tensor = torch.Tensor

_PRODUCTS = frozenset({"mul", "mul_", "multiply", "__mul__", "__rmul__", "__imul__"})


class BreakMarks(Protocol):
    """What this module reads and sets of the tracker (`scg.graph.tracking.InfluenceTracker`,
    which imports this module)."""

    battr: str
    grad_nodes: int
    breaks: bool


def carry_breaks(
    tracker: BreakMarks,
    name: str,
    flags: int,
    args: tuple[Any, ...],
    out: Any,
    written: Tensor | None,
    tracked: list[tuple[int, Tensor, int]],
) -> None:
    """Carry the inputs' gradient breaks to the outputs (``out``, and ``written`` for an in-place
    or ``out=`` call), and add one where a pathwise node's influence enters an output that
    autograd does not connect to it."""
    if name in _PRODUCTS and any(type(a) in (int, float) and a == 0 for a in args):
        return
    battr = tracker.battr
    carried = 0
    grad_in = 0
    grad_nodes = tracker.grad_nodes
    for _, a, am in tracked:
        carried |= getattr(a, battr, 0)
        if am & grad_nodes and a.requires_grad:
            grad_in |= am & grad_nodes
    if not (carried or grad_in):
        return  # no break to carry, no pathwise input whose gradient could be cut
    outs = [out] if type(out) is Tensor else flat_tensors(out)
    if isinstance(written, Tensor) and written is not out:
        outs.append(written)
    for o in outs:
        nb = carried
        if grad_in and (flags & F_ZERO_GRAD or not o.requires_grad):
            nb |= grad_in
        if nb:
            setattr(o, battr, getattr(o, battr, 0) | nb)
            tracker.breaks = True
