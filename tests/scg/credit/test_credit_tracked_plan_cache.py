"""Tracked graphs reuse the credit plan of an earlier graph only when the signature *and* the
relation (each node's parents and foreign positions) are the same: two graphs whose nodes have
the same names, shapes and estimators but whose costs depend on different nodes must not share
one (the second would credit a node with a cost it does not influence). A ``Cached`` check (a
tracked graph) reuses its structure's plan when it finds the relation that plan was built from."""

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


def _cached_run(structure: scg.Cached, cost_uses_z: bool = True) -> torch.Tensor:
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph(structure=structure) as g:
        z = scg.sample(Bernoulli(logits=theta), name="z")
        scg.cost(theta + (z * 2.0 if cost_uses_z else torch.ones(3)), name="c")
    g.surrogate_loss().backward()
    assert theta.grad is not None
    return theta.grad


def test_a_cached_check_that_finds_its_relation_reuses_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Cached``'s checks (tracked graphs) build no plan when the tracked relation is the cached
    one: the untracked graphs keep the plan object (and the terms it computed on first use)."""
    built: list[object] = []
    build = plan_module.build_plan

    def counted(*args: object, **kwargs: object) -> plan_module.CreditPlan:
        plan = build(*args, **kwargs)  # type: ignore[arg-type]
        built.append(plan)
        return plan

    monkeypatch.setattr(plan_module, "build_plan", counted)
    structure = scg.Cached(check_every=None)
    torch.manual_seed(0)
    first = _cached_run(structure)  # tracked: learns the relation
    _cached_run(structure)  # untracked: the plan the tracked graph built and kept
    assert structure.stats == {"tracked": 1, "reused": 1, "fallback": 0}
    ((key, plan),) = structure.plans.items()
    assert built == [plan]
    structure.check_every = 1  # every graph from now on is a check
    for _ in range(3):
        torch.manual_seed(0)
        assert torch.equal(_cached_run(structure), first)
    assert structure.stats == {"tracked": 4, "reused": 1, "fallback": 0}
    assert built == [plan]  # the checks found the cached relation: no plan built
    assert structure.plans == {key: plan} and structure.plans[key] is plan


def test_a_cached_check_with_another_relation_is_refused_not_served(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same signature with a relation the structure has not seen: the check does not reuse
    the plan (its relation differs) and refuses the changed structure."""
    structure = scg.Cached(check_every=None)
    _cached_run(structure)
    _cached_run(structure)
    structure.check_every = 1
    with pytest.raises(scg.SCGError, match="the structure changed"):
        _cached_run(structure, cost_uses_z=False)
    assert structure.plans == {}


def _mixing_run(structure: scg.Cached, mixes: bool) -> None:
    """z (3,) and a cost of the same shape whose elements are z's own (per-example credit) or
    the mean over the examples (whole-plate credit): the same signature and influence."""
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph(structure=structure) as g:
        z = scg.sample(Bernoulli(logits=theta), name="z")
        scg.cost(theta + (z.mean().expand(3) if mixes else z), name="c")
    g.surrogate_loss()


def test_a_cached_check_whose_credit_changed_is_refused() -> None:
    """A check whose relation differs only in its foreign positions (a cost that now mixes the
    examples) gets its own plan, and the credit comparison refuses the change."""
    structure = scg.Cached(check_every=None)
    _mixing_run(structure, mixes=False)
    _mixing_run(structure, mixes=False)
    structure.check_every = 1
    with pytest.raises(scg.SCGError, match="structure changed"):
        _mixing_run(structure, mixes=True)


def test_a_plan_reused_across_relations_would_hide_the_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """The biased twin: if a check reused the cached plan whatever its relation (the relation
    left out of the comparison), the stale plan's credit would be compared with itself, and the
    mixing cost would be credited per example (check above)."""
    monkeypatch.setattr(plan_module, "_relation_of", lambda graph: ())
    structure = scg.Cached(check_every=None)
    _mixing_run(structure, mixes=False)
    _mixing_run(structure, mixes=False)
    structure.check_every = 1
    _mixing_run(structure, mixes=True)  # not refused
