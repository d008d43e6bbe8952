"""The untracked graphs' short path through ``scg.sample`` / ``scg.cost`` (Declared, and Cached
between its tracked graphs) names nodes and records inputs as the tracked path does, and its
signatures are the structure's first objects of each kind (issue 25; its refusals, in every mode:
``test_core_errors.py``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch
from _graph_modes import MODES, graph_in
from torch.distributions import Bernoulli

import scg

# (a Cached graph of a new signature that is not tracked warns so: expected here)
pytestmark = pytest.mark.filterwarnings("ignore:scg.Cached:RuntimeWarning")


@pytest.mark.parametrize("mode", MODES)
def test_default_names_and_counts(mode: str) -> None:
    with graph_in(mode) as g:
        a = scg.sample(Bernoulli(logits=torch.zeros(3)))
        scg.cost(a)
        b = scg.sample(Bernoulli(logits=torch.zeros(3)), step=0)
        scg.deterministic(b * 2, name="twice")
        scg.cost(b)
    assert [n.name for n in g.nodes] == ["sample_0", "cost_0", "sample_1", "twice", "cost_1"]
    assert repr(g) == "<scg.Graph closed: 2 stochastic, 2 cost, 1 deterministic>"
    assert g.surrogate_loss().requires_grad is False  # (no parameters: the value is the costs' sum)


@pytest.mark.parametrize("mode", MODES)
def test_every_field_of_the_records_is_set(mode: str) -> None:
    # scg.sample and scg.cost store the slots of their records one by one (not through the
    # dataclass's __init__): a field they missed would be unset, and reading it would raise
    with graph_in(mode) as g:
        z = scg.sample(Bernoulli(logits=torch.zeros(3)), name="z", baseline=scg.baselines.EMA(0.9))
        scg.cost(z * 2.0, name="c", baseline=scg.baselines.EMA(0.9))
    for node, cls in ((g.node("z"), scg.StochasticNode), (g.node("c"), scg.CostNode)):
        assert type(node) is cls
        unset = [f.name for f in dataclasses.fields(cls) if not hasattr(node, f.name)]
        assert unset == [], f"{cls.__name__} fields never set: {unset}"
    assert str(g.node("z").location).startswith(__file__)


@pytest.mark.parametrize("mode", MODES)
def test_every_field_of_the_surrogates_groups_is_set(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the surrogate makes its cost and node groups slot by slot too (`scg.credit.signals`)
    from scg.credit import signals, surrogate
    from scg.credit.signals import CostGroup, NodeGroup

    made: list[object] = []

    def keeping(real: Any) -> Any:
        def fn(*args: Any) -> Any:
            out = real(*args)
            made.extend(out)
            return out

        return fn

    for name in ("cost_groups", "node_groups"):
        monkeypatch.setattr(surrogate, name, keeping(getattr(signals, name)))
    theta = torch.zeros(3, requires_grad=True)
    with graph_in(mode) as g:
        z = scg.sample(Bernoulli(logits=theta), name="z")
        scg.cost(z * 2.0, name="c")
    g.surrogate_loss().backward()
    assert {type(x) for x in made} == {CostGroup, NodeGroup}
    for x in made:
        unset = [f.name for f in dataclasses.fields(x) if not hasattr(x, f.name)]  # type: ignore[arg-type]
        assert unset == [], f"{type(x).__name__} fields never set: {unset}"


def _step(structure: scg.Declared, length: int) -> scg.Graph:
    theta = torch.zeros(4, requires_grad=True)
    with scg.Graph(structure=structure) as g:
        b = torch.zeros(3)
        for t in range(length):
            b = scg.sample(Bernoulli(logits=theta[t] + b), name="b", step=t)
            scg.cost(b, name="c", step=t)
    return g


def test_signatures_are_the_first_equal_object_whatever_the_order() -> None:
    declared = scg.Declared()
    first2, again2, first3, third2, again3 = (_step(declared, k).signature() for k in (2, 2, 3, 2, 3))
    assert first2 is again2 is third2 and first3 is again3
    assert first2 != first3 and len(first2) == 4 and len(first3) == 6
    declared.clear()
    fresh = _step(declared, 2).signature()
    assert fresh == first2 and fresh is not first2  # (forgotten: a new first object)


def test_a_changed_node_after_a_repeated_graph_gets_its_own_relation() -> None:
    # the relation is the structure's per signature: a graph whose third node differs from the
    # last graph's (here its step) is not served the last graph's relation
    def run(step: int) -> scg.Graph:
        with scg.Graph(structure=declared) as g:
            x = scg.sample(Bernoulli(logits=torch.zeros(2)), name="x", step=1)
            scg.cost(x, name="early", step=0)
            scg.cost(x, name="late", step=step)
        g.surrogate_loss()
        return g

    declared = scg.Declared()
    run(2)
    same = run(2)
    assert same.influences("x", "late") and not same.influences("x", "early")
    changed = run(0)
    assert changed.signature() != same.signature()
    assert not changed.influences("x", "late")
    assert len(declared.relations) == 2


class _Sum(torch.nn.Module):
    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return sum((x.reshape(x.shape[0], -1).sum(-1) for x in inputs), torch.zeros(()))


@pytest.mark.parametrize("mode", MODES)
def test_learned_inputs_are_recorded_in_every_mode(mode: str) -> None:
    # the tuple of a Learned baseline's inputs is read in one loop: each tensor's version and
    # mask, as the recursive walk read them
    learned = scg.baselines.Learned(_Sum())
    with graph_in(mode) as g:
        z0 = scg.sample(Bernoulli(logits=torch.zeros(4)), name="z0")
        early, late = z0[:, None] * 1.0, torch.ones(4, 2)
        z1 = scg.sample(Bernoulli(logits=torch.zeros(4)), name="z1", baseline=learned.given(early, late))
        scg.cost(z1, name="c")
        late.add_(1.0)  # written after z1 was drawn: the baseline saw other values
    inputs = g.node("z1").baseline_inputs
    assert inputs is not None and [t for t, _ in inputs.versions] == [early, late]
    assert inputs.mask == (1 if mode == "tracked" else 0)  # (an untracked graph's inputs name no node)
    with pytest.raises(scg.SCGError, match=r"an input of the baseline of stochastic node 'z1'.*written in place"):
        g.surrogate_loss()


@pytest.mark.parametrize("mode", MODES)
def test_a_list_of_learned_inputs_is_versioned_in_every_mode(mode: str) -> None:
    # a list among the inputs (an RNN's hidden states, ``given(hs)``) is walked as a tuple is: a
    # write into one of its tensors after the draw is refused
    learned = scg.baselines.Learned(_Sum())
    with graph_in(mode) as g:
        early, late = torch.zeros(4, 2), torch.ones(4, 2)
        z1 = scg.sample(Bernoulli(logits=torch.zeros(4)), name="z1", baseline=learned.given([early, late]))
        scg.cost(z1, name="c")
        late.add_(1.0)
    inputs = g.node("z1").baseline_inputs
    assert inputs is not None and [t for t, _ in inputs.versions] == [early, late]
    with pytest.raises(scg.SCGError, match=r"an input of the baseline of stochastic node 'z1'.*written in place"):
        g.surrogate_loss()
