"""Aliases torch makes without a torch call (issue 11, classes 2/3): ``nn.Parameter(z)``,
``z.as_subclass(C)``, ``Tensor._make_subclass(C, z)``, ``p.data = z``. No torch function mode sees
them, so before ``scg.graph.aliases`` a cost computed from them carried no influence (a zero
score term, silently). They now adopt the influence of the node value whose storage they share.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
from torch.distributions import Bernoulli

import scg
import scg.testing as st

W = torch.tensor([1.5, -2.0, 0.7], dtype=torch.float64)


class Tagged(torch.Tensor):
    """A user tensor subclass (inherits torch's __torch_function__)."""


def _data_set(z: torch.Tensor) -> torch.Tensor:
    p = torch.nn.Parameter(torch.zeros_like(z), requires_grad=False)
    _ = p * 2.0  # used (and checked) before the assignment
    p.data = z
    return p


ALIASES: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], str]] = {
    "nn.Parameter": (lambda z: torch.nn.Parameter(z, requires_grad=False), "per-element"),
    "as_subclass": (lambda z: z.as_subclass(Tagged), "per-element"),
    "_make_subclass": (lambda z: torch.Tensor._make_subclass(Tagged, z, False), "per-element"),
    "p.data = z": (_data_set, "per-element"),
    # part of the value: its positions are not the node's, so conservatively whole-plate
    "nn.Parameter(view)": (lambda z: torch.nn.Parameter(z[:, :2], requires_grad=False), "whole-plate"),
}


@pytest.mark.parametrize("kind", sorted(ALIASES))
def test_subclass_alias_of_a_sample_carries_its_influence(kind: str) -> None:
    make, credit = ALIASES[kind]
    th = torch.zeros(4, 3, dtype=torch.float64, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")  # (B=4, 3)
        a = make(z)
        assert type(a) is not torch.Tensor
        scg.cost((a * 2.0).sum(-1).detach(), name="c")  # (4,)
    g.surrogate_loss()
    assert g.influences("z", "c"), kind
    assert g.credit("z", "c") == credit, kind


def test_cost_that_is_a_subclass_alias_itself() -> None:
    th = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(torch.nn.Parameter(z, requires_grad=False), name="c")
    assert g.influences("z", "c")


def test_parameter_alias_gradient_is_unbiased() -> None:
    th = torch.tensor([0.4, -0.6, 0.9], dtype=torch.float64, requires_grad=True)

    def run(th: torch.Tensor) -> None:  # θ (3,) or (P, 3): one particle per row
        z = scg.sample(Bernoulli(logits=th), name="z")
        p = torch.nn.Parameter(z, requires_grad=False)
        scg.cost(p * W, name="c")

    exact = st.exact_gradient(lambda: run(th), [th])
    assert float(exact[0].abs().min()) > 0.1
    st.assert_unbiased(lambda: run(th), [th], n=4000, exact=exact, batched=run, particles=4000)


def test_model_weights_and_unrelated_subclasses_gain_no_influence() -> None:
    """No false positive: Parameters of a model (their own storage) and subclass tensors built
    from data stay uninfluenced; credit through a layer stays per-example."""
    lin = torch.nn.Linear(3, 2).double()
    data = torch.randn(4, 3, dtype=torch.float64).as_subclass(Tagged)
    th = torch.zeros(4, 3, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with scg.Graph(strict=True) as g:
            z = scg.sample(Bernoulli(logits=th), name="z")
            scg.cost(lin(z).pow(2).sum(-1), name="fit")
            scg.cost(lin.weight.pow(2).sum(), name="decay")
            scg.cost(lin(data.as_subclass(torch.Tensor)).sum(-1) + data.sum(-1), name="data")
            assert g.mask(lin.weight) == 0 and g.mask(data) == 0
        g.surrogate_loss().backward()
    assert g.credit("z", "fit") == "per-element"
    assert not g.influences("z", "decay") and not g.influences("z", "data")


#: aliases of a value *computed* from the sample, and plain-tensor aliases (``as_subclass(Tensor)``
#: returns a plain tensor): the alias shares a derived value's storage, or the plain alias is not
#: of a subclass type; both carried no influence before (a zero score term, silently)
DERIVED: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], str]] = {
    "nn.Parameter(z * 2)": (lambda z: torch.nn.Parameter(z * 2, requires_grad=False), "per-element"),
    "nn.Parameter((z * 2)[:, 1:])": (lambda z: torch.nn.Parameter((z * 2)[:, 1:], requires_grad=False), "whole-plate"),
    "z.float().as_subclass(Tensor)": (lambda z: z.float().as_subclass(torch.Tensor), "per-element"),
    "(z + 1).as_subclass(Tensor)": (lambda z: (z + 1).as_subclass(torch.Tensor), "per-element"),
    "(z * 2).as_subclass(Tagged)": (lambda z: (z * 2).as_subclass(Tagged), "per-element"),
}


@pytest.mark.parametrize("kind", sorted(DERIVED))
def test_alias_of_a_derived_value_or_plain_alias_carries_influence(kind: str) -> None:
    make, credit = DERIVED[kind]
    th = torch.zeros(4, 3, dtype=torch.float64, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")  # (B=4, 3)
        a = make(z)
        scg.cost((a * 2.0).sum(-1).detach(), name="c")  # (4,) or (2,)
    g.surrogate_loss()
    assert g.influences("z", "c"), kind
    assert g.credit("z", "c") == credit, kind


def test_derived_parameter_alias_gradient_is_unbiased() -> None:
    th = torch.tensor([0.4, -0.6, 0.9], dtype=torch.float64, requires_grad=True)

    def run(th: torch.Tensor) -> None:  # θ (3,) or (P, 3): one particle per row
        z = scg.sample(Bernoulli(logits=th), name="z")
        p = torch.nn.Parameter(z * 2 - 1, requires_grad=False)
        scg.cost((p * W).as_subclass(torch.Tensor), name="c")

    exact = st.exact_gradient(lambda: run(th), [th])
    assert float(exact[0].abs().min()) > 0.1
    st.assert_unbiased(lambda: run(th), [th], n=4000, exact=exact, batched=run, particles=4000)


def test_dead_derived_storage_is_not_adopted() -> None:
    """A tensor allocated where a freed value computed from the sample lived gains nothing."""
    th = torch.zeros(64, dtype=torch.float64, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        for _ in range(20):
            (z * 3.0).sum()  # freed at once: its storage is reused by the allocator
        fresh = [torch.nn.Parameter(torch.ones(64, dtype=torch.float64)) for _ in range(20)]
        assert all(g.mask(p) == 0 for p in fresh)
