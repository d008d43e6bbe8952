"""The tracker's deferred records (issue 25): the storages of tracked values are read only when an
alias made without a torch call (``nn.Parameter(h)``) is looked up, and before an operation that
may move a recorded value to another storage; a sample's parents are read from its
distribution's tensors, each once."""

from __future__ import annotations

import torch
from torch.distributions import Bernoulli, Independent, Normal

import scg
from scg.graph.influence import dist_tensors


def _node_and_cost(replace: bool) -> scg.Graph:
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(probs=torch.full((4, 3), 0.5)), name="z")
        h = z * 2.0  # a tracked value that does not require grad: its storage is recorded lazily
        p = torch.nn.Parameter(h, requires_grad=False)  # shares h's storage (no torch call)
        if replace:
            h.data = torch.zeros(4, 3)  # h now points elsewhere; p keeps the old storage
        scg.cost(p.sum(-1), name="c")
    return g


def test_alias_of_a_value_keeps_its_influence_after_the_value_moves_storage() -> None:
    for replace in (False, True):
        g = _node_and_cost(replace)
        assert g.influences("z", "c"), f"replace={replace}"


def test_alias_of_an_untracked_value_gains_no_influence() -> None:
    with scg.Graph() as g:
        scg.sample(Bernoulli(probs=torch.full((4, 3), 0.5)), name="z")
        h = torch.ones(4, 3) * 2.0
        p = torch.nn.Parameter(h, requires_grad=False)
        scg.cost(p.sum(-1), name="c")
    assert not g.influences("z", "c")


def test_exact_alias_of_a_transposed_value_is_not_credited_per_element() -> None:
    """The alias takes the value's positions as they are when it is looked up: after an in-place
    transpose the rows are no longer the node's examples."""
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(probs=torch.full((3, 3), 0.5)), name="z")
        h = z * 2.0
        h.t_()
        p = torch.nn.Parameter(h, requires_grad=False)
        scg.cost(p.sum(-1), name="c")
    c = g.node("c")
    assert g.influences("z", "c")
    assert c.foreign.get(0, 0) & 1, c.foreign  # z is foreign from position 0: whole-plate credit


def test_dist_tensors_lists_each_tensor_once_through_nested_distributions() -> None:
    loc = torch.zeros(2, 3)
    d = Independent(Normal(loc, 1.0), 1)
    got = dist_tensors(d)
    assert [id(t) for t in got] == [id(d.base_dist.loc), id(d.base_dist.scale)]
    b = Bernoulli(logits=loc)  # logits and _param are one tensor
    assert [id(t) for t in dist_tensors(b)] == [id(b.logits)]
