"""Tracked graphs reuse the credit plan of an earlier graph only when the signature *and* the
relation (each node's parents and foreign positions) are the same: two graphs whose nodes have
the same names, shapes and estimators but whose costs depend on different nodes must not share
one (the second would credit a node with a cost it does not influence)."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Bernoulli

import scg
from scg.credit import plan as plan_module


def _theta_grad(cost_uses_z: bool) -> torch.Tensor:
    theta = torch.zeros(3, requires_grad=True)
    torch.manual_seed(0)
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=theta), name="z")
        # the same shape and dtype either way: only the relation tells the two graphs apart
        cost = theta + (z * 2.0 if cost_uses_z else torch.ones(3))
        scg.cost(cost, name="c")
    g.surrogate_loss().backward()
    assert theta.grad is not None
    return theta.grad


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> dict[object, object]:
    cache: dict[object, object] = {}
    monkeypatch.setattr(plan_module, "_TRACKED_PLANS", cache)
    return cache


def test_a_repeated_tracked_graph_reuses_its_plan(fresh_cache: dict[object, object]) -> None:
    first = _theta_grad(cost_uses_z=True)
    assert len(fresh_cache) == 1
    again = _theta_grad(cost_uses_z=True)
    assert len(fresh_cache) == 1  # the same signature and relation: no second plan
    assert torch.equal(first, again)


def test_a_graph_with_another_relation_gets_its_own_plan(fresh_cache: dict[object, object]) -> None:
    assert not torch.equal(_theta_grad(cost_uses_z=True), torch.ones(3))  # z is credited with c: a score term
    # c no longer depends on z: no score term, only dc/dtheta = 1
    assert torch.equal(_theta_grad(cost_uses_z=False), torch.ones(3))
    assert len(fresh_cache) == 2


def test_a_plan_keyed_by_signature_alone_would_credit_z_wrongly(
    fresh_cache: dict[object, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The biased twin: without the relation in the key the second graph reuses the first's
    plan and z is credited with a cost it does not influence (the check above catches it)."""
    monkeypatch.setattr(plan_module, "_relation_of", lambda graph: ())
    _theta_grad(cost_uses_z=True)
    assert not torch.equal(_theta_grad(cost_uses_z=False), torch.ones(3))
