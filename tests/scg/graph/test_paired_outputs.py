"""Issue 24 item 5: an operation whose output k comes from argument k alone
(``torch.broadcast_tensors``, which returns its arguments themselves when their shapes are
equal) must not give one argument the influence of another; nor may any operation that returns
an argument as it is (``x.type_as(y)``)."""

from __future__ import annotations

import torch
from torch.distributions import Bernoulli

import scg
import scg.testing

W = torch.tensor([[0.4, -0.3], [0.1, 0.5]], requires_grad=True)


def belief_network_of(w: torch.Tensor) -> None:
    """A two-layer sigmoid belief network: the reconstruction cost of the first layer, then a
    later cost of the first layer alone (which the second layer does not influence). ``w``: the
    weights (2, 2), or (P, 2, 2) for P particles (each its own row of every node and cost)."""
    h1 = scg.sample(Bernoulli(logits=torch.zeros(1, 2) + w[..., :1, :]), name="h1")  # (1, 2) or (P, 1, 2)
    h2 = scg.sample(Bernoulli(logits=h1 @ w), name="h2")
    scg.cost(-Bernoulli(logits=h2 @ w).log_prob(h1).sum(-1), name="c2")
    scg.cost((h1 * torch.tensor([1.0, -2.0])).sum(-1), name="c1")


def belief_network() -> None:
    belief_network_of(W)


def h2_not_before_c1(v: scg.StochasticNode, node: scg.Node) -> bool:
    return not (v.name == "h2" and node.name == "c1")


def test_broadcast_tensors_keeps_each_output_with_its_own_input() -> None:
    with scg.Graph() as g:
        h1 = scg.sample(Bernoulli(logits=torch.zeros(4, 3)), name="h1")
        h2 = scg.sample(Bernoulli(logits=torch.zeros(4, 3)), name="h2")
        a, b = torch.broadcast_tensors(h2 * 2.0, h1)
        c, d = torch.broadcast_tensors(h2[:, :1], h1 + 1.0)  # a real broadcast
        scg.cost(h1.sum(-1), name="c_h1")
        scg.cost(b.sum(-1), name="c_b")
        scg.cost(d.sum(-1), name="c_d")
        scg.cost(c.sum(-1), name="c_c")
        scg.cost((h1 * 1.0).type_as(h2 * 1.0).sum(-1), name="c_type_as")
    g.surrogate_loss()
    for cost in ("c_h1", "c_b", "c_d", "c_type_as"):
        assert not g.influences("h2", cost), cost
        assert g.credit("h1", cost) == "per-element", cost
    assert g.influences("h2", "c_c") and not g.influences("h1", "c_c")


def test_log_prob_of_an_earlier_sample_does_not_credit_its_costs_to_a_later_node() -> None:
    with scg.Graph() as g:
        belief_network()
    g.surrogate_loss()
    assert not g.influences("h2", "c1")
    assert g.credit("h2", "c2") == "per-element" and g.credit("h1", "c1") == "per-element"


def test_check_structure_accepts_the_correct_declaration() -> None:
    scg.testing.check_structure(belief_network, scg.Declared(h2_not_before_c1), runs=2)


def test_declared_and_cached_belief_network_are_unbiased() -> None:
    """400 estimates in 4 particle-batched graphs each (the cached structure reuses the first's credit)."""
    exact = scg.testing.exact_gradient(belief_network, [W])
    for structure in (scg.Declared(h2_not_before_c1), scg.Cached()):
        report = scg.testing.check_unbiased(
            belief_network,
            [W],
            n=400,
            exact=exact,
            batched=belief_network_of,
            particles=100,
            graph_kwargs={"structure": structure},
        )
        assert report.passed, (structure, str(report))
