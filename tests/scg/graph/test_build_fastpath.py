"""The untracked graphs' short path through ``scg.sample`` / ``scg.cost`` (Declared, and Cached
between its tracked graphs) makes every refusal the tracked path makes, names nodes alike, and
its signatures are the structure's first objects of each kind (issue 25)."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Distribution

import scg

# (a Cached graph of a new signature that is not tracked warns so: expected here)
pytestmark = pytest.mark.filterwarnings("ignore:scg.Cached:RuntimeWarning")

#: a tracked graph, a declared one, and a Cached one past its first (tracked) graph
MODES = ["tracked", "declared", "cached"]


def _graph(mode: str) -> scg.Graph:
    if mode == "tracked":
        return scg.Graph()
    if mode == "declared":
        return scg.Graph(structure=scg.Declared())
    cached = scg.Cached(check_every=None)
    with scg.Graph(structure=cached):  # (the first graph is tracked; the next one is not)
        pass
    return scg.Graph(structure=cached)


class _NoLogProb(Distribution):
    arg_constraints: dict[str, object] = {}

    def __init__(self) -> None:
        super().__init__(torch.Size([2]), validate_args=False)

    def sample(self, sample_shape: torch.Size = torch.Size()) -> torch.Tensor:
        return torch.zeros(sample_shape + torch.Size([2]))


class _WrongLogProb(_NoLogProb):
    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return value.sum()  # () instead of the batch shape (2,)


@pytest.mark.parametrize("mode", MODES)
def test_refusals_name_the_node_in_every_mode(mode: str) -> None:
    with _graph(mode) as g:
        assert g.tracked == (mode == "tracked")
        with pytest.raises(scg.SCGError, match=r"'bad'.*does not implement log_prob"):
            scg.sample(_NoLogProb(), name="bad")
        with pytest.raises(scg.SCGError, match=r"'wrong'.*log_prob has shape \(\), expected .*\(2,\)"):
            scg.sample(_WrongLogProb(), name="wrong")
        with pytest.raises(scg.SCGError, match=r"scg.sample\(name='z'\) at .*test_build_fastpath.py:\d+.*no rsample"):
            scg.sample(Categorical(logits=torch.zeros(2)), name="z", estimator=scg.Pathwise())
        with pytest.raises(scg.SCGError, match=r"scg.cost\(name='c'\) at .*test_build_fastpath.py:\d+.*dtype"):
            scg.cost(torch.zeros(2, dtype=torch.long), name="c")
        z = scg.sample(Bernoulli(logits=torch.zeros(2)), name="z")
        with pytest.raises(scg.SCGError, match="duplicate node name 'z'"):
            scg.sample(Bernoulli(logits=torch.zeros(2)), name="z")
        scg.cost(z, name="c")
        g.surrogate_loss()
        with pytest.raises(scg.SCGError, match=r"scg.cost\(name='late'\) at .*surrogate_loss\(\) was already built"):
            scg.cost(z, name="late")
    with pytest.raises(
        scg.SCGError, match=r"scg.sample\(name='out'\) at .*test_build_fastpath.py:\d+.*outside a graph"
    ):
        scg.sample(Bernoulli(logits=torch.zeros(2)), name="out")


@pytest.mark.parametrize("mode", MODES)
def test_default_names_and_counts(mode: str) -> None:
    with _graph(mode) as g:
        a = scg.sample(Bernoulli(logits=torch.zeros(3)))
        scg.cost(a)
        b = scg.sample(Bernoulli(logits=torch.zeros(3)), step=0)
        scg.deterministic(b * 2, name="twice")
        scg.cost(b)
    assert [n.name for n in g.nodes] == ["sample_0", "cost_0", "sample_1", "twice", "cost_1"]
    assert repr(g) == "<scg.Graph closed: 2 stochastic, 2 cost, 1 deterministic>"
    assert g.surrogate_loss().requires_grad is False  # (no parameters: the value is the costs' sum)


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
    with _graph(mode) as g:
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
