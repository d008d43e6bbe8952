"""``scg.log_prob``: a stochastic node's log-probability, equal in value and gradient to
``dist.log_prob(value)``, computed once per node (the score term's tensor in an untracked
graph), seen by tracking in a tracked graph, and refused for anything but a node of the open
graph."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.distributions import Bernoulli, Distribution, Normal

import scg
from scg.estimators import ARM

MODES: dict[str, Callable[[], scg.Declared | scg.Cached | None]] = {
    "tracked": lambda: None,
    "declared": scg.Declared,
    "cached": lambda: scg.Cached(check_every=None),
}


def _graphs(mode: str) -> list[scg.Graph]:
    """The graphs a mode's steps run in: for Cached, a tracked one and an untracked one."""
    structure = MODES[mode]()
    return [scg.Graph(structure=structure) for _ in range(2 if mode == "cached" else 1)]


def _grad(t: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    (g,) = torch.autograd.grad(t.sum(), theta, retain_graph=True)
    return g


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize(
    ("make", "estimator", "n"),
    [
        (lambda th: Bernoulli(logits=th), None, None),  # score function: the score term's tensor
        (lambda th: Normal(th, th.exp()), None, 3),  # pathwise: computed on demand
        (lambda th: Bernoulli(logits=th), ARM(), 2),  # a score whose gradient differs: on demand
    ],
    ids=["score", "pathwise", "arm"],
)
def test_equals_dist_log_prob_in_value_and_gradient(
    mode: str, make: Callable[[torch.Tensor], Distribution], estimator: ARM | None, n: int | None
) -> None:
    torch.manual_seed(0)
    theta = torch.linspace(-1.0, 1.0, 4).requires_grad_()
    for g in _graphs(mode):
        with g:
            dist = make(theta)
            z = scg.sample(dist, name="z", estimator=estimator, n=n)
            lp = scg.log_prob(z)
            expected = dist.log_prob(z)
            grads = _grad(lp, theta), _grad(expected, theta)
            again = scg.log_prob(z), scg.log_prob(g.node("z"))  # type: ignore[arg-type]
            scg.cost(lp + z, name="c")
        assert lp.shape == expected.shape == ((n,) if n else ()) + dist.batch_shape
        assert torch.equal(lp, expected)
        assert torch.equal(*grads)
        assert grads[0].abs().sum() > 0
        assert again[0] is lp and again[1] is lp  # computed once
        node = g.node("z")
        assert isinstance(node, scg.StochasticNode)
        if not g.tracked and estimator is None and node.log_prob is not None:
            assert lp is node.log_prob  # not computed again: scg.sample's own
        g.surrogate_loss()


def test_a_cost_from_it_is_influenced_by_the_node_when_tracked() -> None:
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=theta), name="z")
        scg.cost(scg.log_prob(z), name="c")
    assert g.tracked and g.influences("z", "c")
    g.surrogate_loss()
    assert g.credit("z", "c") == "per-element"


def test_a_declared_step_gives_the_hand_written_gradient() -> None:
    """The surrogate's score term and the user's cost share one tensor: the gradient of a
    hand-written step that computes the log-probability once."""
    theta = torch.linspace(-1.0, 1.0, 5).requires_grad_()
    torch.manual_seed(1)
    with scg.Graph(structure=scg.Declared()) as g:
        z = scg.sample(Bernoulli(logits=theta), name="z")
        scg.cost(scg.log_prob(z) + 2.0 * z, name="c")
    (got,) = torch.autograd.grad(g.surrogate_loss(), theta)
    torch.manual_seed(1)
    d = Bernoulli(logits=theta)
    h = d.sample()
    lp = d.log_prob(h)
    c = lp + 2.0 * h
    (want,) = torch.autograd.grad(c.sum() + (lp * c.detach()).sum(), theta)
    assert torch.equal(got, want)


def test_refusals_name_the_argument_and_what_was_found() -> None:
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph(structure=scg.Declared()) as other:
        foreign = scg.sample(Bernoulli(logits=theta), name="z")
    with pytest.raises(
        scg.SCGError, match=r"scg.log_prob\(value\) at .*test_log_prob.py:\d+ was called outside a graph"
    ):
        scg.log_prob(foreign)
    with scg.Graph(structure=scg.Declared()):
        z = scg.sample(Bernoulli(logits=theta), name="z")
        c = scg.cost(z * 2.0, name="c")
        with pytest.raises(scg.SCGError, match=r"expected the tensor scg.sample returned, found int"):
            scg.log_prob(3)  # type: ignore[arg-type]
        with pytest.raises(scg.SCGError, match=r"found a tensor that is not the value of a node"):
            scg.log_prob(z + 1)
        with pytest.raises(scg.SCGError, match=r"found a tensor that is not the value of a node"):
            scg.log_prob(foreign)
        with pytest.raises(scg.SCGError, match=r"found the value of cost node 'c'"):
            scg.log_prob(c)
        with pytest.raises(scg.SCGError, match=r"expected a stochastic node of the open graph, found stochastic"):
            scg.log_prob(other.node("z"))  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["tracked", "declared"])
def test_a_value_written_in_place_before_the_call(mode: str) -> None:
    """Untracked, a score node's log-probability was computed when it was drawn (from a private
    copy): the write does not change it. Otherwise it would be computed from the written value:
    refused."""
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph(structure=MODES[mode]()) as g:
        d = Bernoulli(logits=theta)
        z = scg.sample(d, name="z")
        drawn = z.clone()
        z.fill_(1.0 - z[0])  # (allowed: the node scored a private copy)
        if g.tracked:
            with pytest.raises(scg.SCGError, match=r"stochastic node 'z'.* was written in place"):
                scg.log_prob(z)
        else:
            assert torch.equal(scg.log_prob(z), d.log_prob(drawn))


def test_a_value_drawn_in_a_nested_graph_is_refused_in_the_outer_one() -> None:
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph(structure=scg.Declared()):  # (a tracked outer graph would see the inner draw)
        with scg.Graph():
            z = scg.sample(Bernoulli(logits=theta), name="z")
            inner = scg.log_prob(z)
        with pytest.raises(
            scg.SCGError, match=r"found the value of stochastic node 'z'.*, drawn in a scg.Graph nested"
        ):
            scg.log_prob(z)
    assert inner.shape == (3,)
