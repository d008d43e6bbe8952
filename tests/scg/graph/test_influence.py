"""scg/graph/influence.py: a sample's parents and foreign positions, taken from its distribution's
parameters (``dist_foreign``, ``sample_influence``)."""

from __future__ import annotations

from typing import Any

import torch
from torch.distributions import Bernoulli, Categorical, Normal, TransformedDistribution
from torch.distributions.transforms import AffineTransform

import scg
import scg.testing as st
from scg.estimators import Enumerate
from scg.testing import expected_estimate


def test_an_unexpanded_parameter_of_lower_rank_is_foreign_from_position_zero() -> None:
    """A parameter with fewer dimensions than the batch (a transform's loc, which torch does not
    broadcast) is read by every batch element, so the nodes it is computed from are foreign from
    position 0, besides the positions it carries. Here loc = φ·Σu mixes u's plate: every v[j]
    depends on every u[i], so u needs whole-plate credit. Without the mark (and with the
    parameter's own positions skipped) u was credited per element: a Monte Carlo mean of ∇_θ
    [-0.120, -0.071] ± [0.016, 0.015] against the exact [-0.218, -0.108], about half."""
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    phi = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    with scg.Graph() as g:
        u = scg.sample(Bernoulli(logits=theta), name="u")  # (2,)
        loc = phi * u.sum()  # 0-dim
        base = Normal(torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
        v = scg.sample(TransformedDistribution(base, [AffineTransform(loc=loc, scale=1.0)]), name="v")
        scg.cost((v - 1.0) ** 2, name="c")
    g.surrogate_loss()
    assert g.credit("u", "c") == "whole-plate"


def _mixed_then_sampled(theta: torch.Tensor, phi: torch.Tensor) -> None:
    a = scg.sample(Bernoulli(logits=theta), name="a")  # (2,)
    v = scg.sample(Bernoulli(logits=(phi * a.sum() - 0.5).expand(2)), n=2, name="v")  # (2_v, 2)
    scg.cost(v * 1.0, name="c")


def test_a_parameters_positions_move_past_the_sample_dimension(assert_credit_and_exact_mean: Any) -> None:
    """The positions a parameter carries are the sample's shifted past its new sample dimensions.
    The logits (φ·Σa).expand(2) carry a at 0; in v (n=2) that is position 1, a batch position of
    the cost, so a needs whole-plate credit. Not shifted, a's mark lies inside the sample dimension;
    when the plate check still ignored a mark there (before 3f254c3: now it is whole-plate there
    too), a was credited per element and the estimator's mean of ∇ was half the exact gradient."""
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    phi = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)

    def program() -> None:
        _mixed_then_sampled(theta, phi)

    assert_credit_and_exact_mean(program, [theta, phi], a__c="whole-plate")


class _UserCategorical(Categorical):
    """Not torch's own class: its draw is tracked, not read from its parameters."""


def _user_enumerated(theta: torch.Tensor) -> None:
    table = torch.tensor([1.0, 3.0, -1.0], dtype=torch.float64)
    u = scg.sample(Bernoulli(logits=theta), name="u")
    logits = u * torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64)
    e = scg.sample(_UserCategorical(logits=logits), estimator=Enumerate(), name="e")
    scg.cost(table[e], name="c")


def test_an_enumerated_node_takes_its_parents_from_its_parameters() -> None:
    """An enumerated node's value is its support, computed without reading the parameters, so its
    parents are taken from the distribution's tensors. For a distribution class that is not
    torch's own, the draw is tracked and the support carries no mask: without those parents u
    did not influence c, got no credit, and the gradient was 0 instead of the exact 0.0756 (the
    surrogate did not even depend on θ)."""
    theta = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)

    def program() -> None:
        _user_enumerated(theta)

    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.influences("u", "c")
    (exact,) = st.exact_gradient(program, [theta])  # (e is enumerated by the oracle: the plain class)
    (mean,) = expected_estimate(program, [theta], keep=("e",))
    torch.testing.assert_close(mean, exact, rtol=1e-9, atol=1e-12)
