"""The tracker's deferred records (issue 25): the storages of tracked values are read only when an
alias made without a torch call (``nn.Parameter(h)``) is looked up, and before an operation that
may move a recorded value to another storage; a sample's parents are read from its
distribution's tensors, each once."""

from __future__ import annotations

import torch
from torch.distributions import (
    AffineTransform,
    Bernoulli,
    Distribution,
    Independent,
    Normal,
    Transform,
    TransformedDistribution,
    constraints,
)

import scg
from scg.graph.influence import torch_dist_tensors


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
    got = torch_dist_tensors(d)
    assert got is not None
    assert [id(t) for t in got] == [id(d.base_dist.loc), id(d.base_dist.scale)]
    b = Bernoulli(logits=loc)  # logits and _param are one tensor
    assert [id(t) for t in torch_dist_tensors(b) or []] == [id(b.logits)]
    t = TransformedDistribution(Normal(loc, 1.0), [AffineTransform(loc, 2.0 * torch.ones(2, 3))])
    got_t = [id(x) for x in torch_dist_tensors(t) or []]  # (the transform's, as well as the base's)
    assert sorted(got_t) == sorted(
        {id(t.base_dist.loc), id(t.base_dist.scale), id(t.transforms[0].loc), id(t.transforms[0].scale)}
    )


class _Shift(Transform):
    """A user transform: its parameter is not one of torch's attributes."""

    bijective = True
    domain = constraints.real
    codomain = constraints.real

    def __init__(self, shift: torch.Tensor) -> None:
        super().__init__()
        self.shift = shift

    def _call(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.shift


def test_a_distribution_with_a_user_transform_is_not_read_from_its_attributes() -> None:
    """None (drawn under tracking) when a transform nested in the distribution, even in a list,
    is not torch's own, and when the nesting is deeper than the walk goes."""
    loc = torch.zeros(3)
    assert torch_dist_tensors(TransformedDistribution(Normal(loc, 1.0), [_Shift(loc)])) is None
    deep: Distribution = Normal(loc, 1.0)
    for _ in range(8):
        deep = Independent(deep, 0)
    assert torch_dist_tensors(deep) is None
    assert torch_dist_tensors(Independent(Normal(loc, 1.0), 0)) is not None
