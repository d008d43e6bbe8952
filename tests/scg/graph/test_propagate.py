"""scg.graph.propagate: what an output of a tracked call takes from its tracked inputs."""

from __future__ import annotations

from typing import Any

import torch
from torch.distributions import Bernoulli

import scg
import scg.testing
from scg.graph.ops import F_ELEMENTWISE, F_GETITEM
from scg.graph.positions import rule_for
from scg.graph.propagate import paired_inputs, propagate
from scg.graph.tracking import InfluenceTracker


def _tracker(max_dim: int = 2) -> InfluenceTracker:
    tracker = InfluenceTracker("_scg_test_mask", lambda *event: None)
    tracker.max_dim = max_dim
    return tracker


def _marked(tracker: InfluenceTracker, t: torch.Tensor, mask: int) -> torch.Tensor:
    setattr(t, tracker.attr, mask)
    return t


def test_an_elementwise_output_of_the_same_shape_keeps_its_positions() -> None:
    tr = _tracker()
    a = _marked(tr, torch.ones(3, 2), 0b1)
    o = a * 2
    propagate(tr, torch.mul, "mul", rule_for("mul"), F_ELEMENTWISE, (a, 2), None, o, 0b1, [(0, a, 0b1)], False)
    assert getattr(o, tr.attr) == 0b1
    assert getattr(o, tr.fattr, None) is None


def test_a_reduction_over_the_rows_makes_the_node_foreign_from_position_0() -> None:
    tr = _tracker()
    a = _marked(tr, torch.ones(3, 2), 0b10)
    o = a.sum(0)
    propagate(tr, torch.sum, "sum", rule_for("sum"), 0, (a, 0), None, o, 0b10, [(0, a, 0b10)], False)
    assert getattr(o, tr.attr) == 0b10
    assert getattr(o, tr.fattr) == {0: 0b10}


def test_positions_at_or_beyond_the_deepest_node_value_are_dropped() -> None:
    tr = _tracker(max_dim=1)  # (no node value has a second dimension to compare with)
    a = _marked(tr, torch.ones(3, 2), 0b1)
    o = a.sum(1)  # rows kept: foreign from position 1
    propagate(tr, torch.sum, "sum", rule_for("sum"), 0, (a, 1), None, o, 0b1, [(0, a, 0b1)], False)
    assert getattr(o, tr.fattr, None) is None


def test_nodes_known_only_through_a_written_storage_are_foreign_from_position_0() -> None:
    tr = _tracker()
    a = _marked(tr, torch.ones(3, 2), 0b1)
    o = a * 2
    tracked = [(0, a, 0b11)]  # bit 1 came through an alias's write into a's storage
    propagate(tr, torch.mul, "mul", rule_for("mul"), F_ELEMENTWISE, (a, 2), None, o, 0b11, tracked, True)
    assert getattr(o, tr.attr) == 0b11
    assert getattr(o, tr.fattr) == {0: 0b10}


def test_a_boolean_index_marks_a_data_dependent_shape() -> None:
    tr = _tracker()
    a = _marked(tr, torch.arange(4.0), 0b1)
    index = a > 1
    o = a[index]
    assert not tr.any_dynamic
    propagate(
        tr,
        torch.Tensor.__getitem__,
        "__getitem__",
        rule_for("__getitem__"),
        F_GETITEM,
        (a, index),
        None,
        o,
        0b1,
        [(0, a, 0b1)],
        False,
    )
    assert tr.any_dynamic
    assert getattr(o, tr.dattr) == 0b1


def test_paired_outputs_take_their_own_argument_only() -> None:
    tr = _tracker()
    a = _marked(tr, torch.ones(3, 1), 0b01)
    b = _marked(tr, torch.ones(1, 2), 0b10)
    oa, ob = torch.broadcast_tensors(a, b)
    (o1, m1, t1), (o2, m2, t2) = paired_inputs(tr, (a, b), (oa, ob))
    assert (o1 is oa, m1, t1) == (True, 0b01, [(0, a, 0b01)])
    assert (o2 is ob, m2, t2) == (True, 0b10, [(1, b, 0b10)])


def test_an_input_returned_as_it_is_keeps_its_own_marks() -> None:
    tr = _tracker()
    a = _marked(tr, torch.ones(2), 0b01)
    b = _marked(tr, torch.ones(2), 0b10)
    assert paired_inputs(tr, ((a, b),), (a, b)) == []  # equal shapes: the arguments themselves


def test_outputs_that_do_not_pair_with_the_arguments_take_every_input() -> None:
    tr = _tracker()
    a = _marked(tr, torch.ones(2), 0b01)
    b = _marked(tr, torch.ones(2), 0b10)
    out = torch.ones(2)  # one output for two tensor arguments
    ((o, m, tracked),) = paired_inputs(tr, (a, b), out)
    assert (o is out, m, [k for k, _, _ in tracked]) == (True, 0b11, [0, 1])


def test_an_elementwise_broadcast_of_one_tracked_input_is_foreign_from_position_0(
    assert_credit_and_exact_mean: Any,
) -> None:
    """An elementwise op keeps its one tracked input's positions only when the input has the
    output's shape. ``z (3,) * w (3, 1)`` puts z[j] in column j of every row: row i of the cost is
    not z[i]'s, so z needs whole-plate credit. Credited per row (every elementwise output lined
    up), z[i] got w_i Σ_j z[j]: the estimator's mean w_i ∇E z_i instead of (Σ_k w_k) ∇E z_i,
    [0.244, 0.481, −0.940] against the exact [−0.244, −0.240, −0.235]."""
    theta = torch.tensor([0.3, -0.4, 0.5], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([[1.0], [2.0], [-4.0]], dtype=torch.float64)

    def program() -> None:
        z = scg.sample(Bernoulli(logits=theta), name="z")  # (3,)
        scg.cost(z * w, name="c")  # (3, 3): c[i, j] = w[i] z[j]

    assert_credit_and_exact_mean(program, [theta], z__c="whole-plate")
