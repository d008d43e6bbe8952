"""scg.graph.queries: what users ask of a recorded graph, tracked or declared."""

from __future__ import annotations

import pytest
import torch
from _graph_modes import graph_in
from torch.distributions import Bernoulli, Normal

import scg


@pytest.mark.parametrize("mode", ["tracked", "declared"])  # (a Cached graph answers as the one it learned)
def test_the_questions_of_a_two_step_chain(mode: str) -> None:
    theta = torch.zeros(2, requires_grad=True)
    with graph_in(mode) as g:
        z = scg.sample(Bernoulli(logits=theta), name="z", step=0)
        x = scg.sample(Normal(z, 1.0), name="x", step=1)
        scg.cost(x.square(), name="c", step=1)
    assert [n.name for n in g.stochastic_nodes] == ["z", "x"]
    assert [n.name for n in g.cost_nodes] == ["c"]
    assert g.node("z").value is z and g.node(x) is g.node("x", step=1) is g.nodes[1]
    assert g.influences("z", "c") and g.influences("x", "c") and not g.influences("c", "z")
    assert [n.name for n in g.parents("x")] == ["z"]
    with pytest.raises(scg.SCGError, match=r"build the surrogate first"):
        g.credit("z", "c")
    g.surrogate_loss()
    assert (g.credit("z", "c"), g.credit("x", "c"), g.credit("c", "z")) == ("per-element", "pathwise", "none")
    assert g.credit_pairs == {(0, 2): False}
    g.credit_pairs.clear()  # a copy
    assert g.credit_pairs == {(0, 2): False}


def test_a_name_at_several_steps_needs_its_step() -> None:
    with scg.Graph() as g:
        for t in range(2):
            scg.cost(torch.ones(()) * t, name="c", step=t)
    assert g.node("c", step=1).step == 1
    with pytest.raises(scg.SCGError, match=r"node 'c' exists at several steps \(0, 1\); pass step="):
        g.node("c")
    for step in (5, "0"):  # (a step it does not have: said so, not "pass step=")
        with pytest.raises(scg.SCGError, match=rf"node 'c' has no step {step!r}; its steps: 0, 1"):
            g.node("c", step=step)  # type: ignore[arg-type]
    with pytest.raises(scg.SCGError, match=r"no node named 'd' in this graph \(known nodes: 'c'\)"):
        g.node("d")
