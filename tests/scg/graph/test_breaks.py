"""scg.graph.breaks: which outputs carry a gradient break of a pathwise node."""

from __future__ import annotations

import torch

from scg.graph.breaks import carry_breaks
from scg.graph.ops import F_ZERO_GRAD
from scg.graph.tracking import InfluenceTracker


def _tracker() -> InfluenceTracker:
    tracker = InfluenceTracker("_scg_test_mask", lambda *event: None)
    tracker.grad_nodes = 0b1  # node 0 is pathwise (its value requires grad)
    return tracker


def test_a_comparison_of_a_pathwise_value_is_a_break() -> None:
    tr = _tracker()
    x = torch.ones(2, requires_grad=True)
    out = x > 0  # no grad_fn: autograd does not connect it to x
    carry_breaks(tr, "gt", 0, (x, 0), out, None, [(0, x, 0b1)])
    assert tr.breaks
    assert tr.broken(out) == 0b1


def test_a_differentiable_output_carries_no_new_break() -> None:
    tr = _tracker()
    x = torch.ones(2, requires_grad=True)
    out = x * 3
    carry_breaks(tr, "mul", 0, (x, 3), out, None, [(0, x, 0b1)])
    assert not tr.breaks
    assert tr.broken(out) == 0


def test_an_operation_with_a_zero_gradient_is_a_break_even_if_the_output_requires_grad() -> None:
    tr = _tracker()
    x = torch.ones(2, requires_grad=True)
    out = x.round()  # requires grad, but its gradient is zero everywhere
    carry_breaks(tr, "round", F_ZERO_GRAD, (x,), out, None, [(0, x, 0b1)])
    assert tr.broken(out) == 0b1


def test_a_break_is_carried_to_outputs_and_to_the_written_tensor() -> None:
    tr = _tracker()
    x = torch.ones(2, requires_grad=True)
    b = (x > 0).float()
    setattr(b, tr.battr, 0b1)
    target = torch.zeros(2)
    out = torch.add(b, 1.0)
    carry_breaks(tr, "add", 0, (b, 1.0), out, target, [(0, b, 0b1)])
    assert (tr.broken(out), tr.broken(target)) == (0b1, 0b1)


def test_a_product_with_the_number_0_carries_nothing() -> None:
    tr = _tracker()
    x = torch.ones(2, requires_grad=True)
    b = (x > 0).float()
    setattr(b, tr.battr, 0b1)
    out = b * 0
    carry_breaks(tr, "mul", 0, (b, 0), out, None, [(0, b, 0b1)])
    assert tr.broken(out) == 0
    out = b * 2
    carry_breaks(tr, "mul", 0, (b, 2), out, None, [(0, b, 0b1)])
    assert tr.broken(out) == 0b1
