"""``scg.credit.objective`` (scg/credit/surrogate.py): the objective a surrogate evaluates to."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Normal

import scg
import scg.testing as st
from scg.credit import objective
from scg.estimators import Enumerate


def test_objective_weights_an_enumerated_node_by_its_probabilities() -> None:
    """``objective(g)`` is Σ_c Σ ω ⊙ c, with ω = p(value) for an enumerated node (its docstring;
    scg.testing's exact oracle is built on it): here E[table[z]] exactly, equal to the surrogate's
    value, and differentiable to the exact gradient. Without the factor ω it was Σ_z table[z] (the
    table's sum, 3.0, instead of its mean under p, −0.297), with a wrong gradient."""
    theta = torch.tensor([0.2, -0.5, 0.9], dtype=torch.float64, requires_grad=True)
    table = torch.tensor([1.0, 4.0, -2.0], dtype=torch.float64)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=theta), estimator=Enumerate(), name="z")
        scg.cost(table[z], name="c")
    want = (torch.softmax(theta, -1) * table).sum()
    got = objective(g)
    torch.testing.assert_close(got, want)
    (grad,) = torch.autograd.grad(got, [theta])
    (exact,) = torch.autograd.grad(want, [theta])
    torch.testing.assert_close(grad, exact)
    torch.testing.assert_close(g.surrogate_loss().detach(), want.detach())


TAB = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)


def _vimco_like(th: torch.Tensor, n: int) -> Callable[[], None]:
    """z: n samples of a Categorical; x | z_i per sample; c a log-sum-exp over the samples,
    declared ``reduced=z`` (VIMCO/IWAE), and d a per-sample cost."""

    def run() -> None:
        z = scg.sample(Categorical(logits=th[:3]), name="z", n=n, step=0)
        x = scg.sample(Bernoulli(logits=th[3] * TAB[z]), name="x", step=1)
        scg.cost(-torch.logsumexp(TAB[z] * th[0] + x * th[1], 0), name="c", reduced=z, step=1)
        scg.cost(th[2] * x, name="d", step=1)

    return run


def _expected_derivatives(
    program: Callable[[], None], th: torch.Tensor, n: int, **options: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """E[∇ surrogate] and E[∇² surrogate] of `_vimco_like` exactly: every joint value of z and x
    forced, weighted by its probability (held fixed)."""
    grad, hess = torch.zeros_like(th), torch.zeros(th.numel(), th.numel(), dtype=th.dtype)
    for zs in itertools.product(range(3), repeat=n):
        for xs in itertools.product((0.0, 1.0), repeat=n):
            values = {"z": torch.tensor(zs), "x": torch.tensor(xs, dtype=th.dtype)}
            logp: list[torch.Tensor] = []

            def force(name: str, step: int | None, dist: Any, shape: torch.Size) -> torch.Tensor:
                logp.append(dist.log_prob(values[name]).sum().detach())  # noqa: B023
                return values[name].clone()  # noqa: B023

            with scg.Graph(intervene=force) as g:
                program()
            weight = torch.stack(logp).sum().exp()
            (g1,) = torch.autograd.grad(g.surrogate_loss(**options), th, create_graph=True)
            grad += weight * g1.detach()
            rows = [
                torch.autograd.grad(g1[i], th, retain_graph=True, materialize_grads=True)[0] for i in range(th.numel())
            ]
            hess += weight * torch.stack(rows)
    return grad, hess


def test_loaded_dice_refuses_a_reduced_cost_and_dice_is_exact_there() -> None:
    """A cost declared ``reduced=z`` credits z's n samples (and those of x, drawn per sample of z)
    jointly, with the whole cost. Loaded DiCE's factors are per element, so the cross terms
    between the samples that meet in the cost came out as 0: dice_lambda=1.0 gave the Hessian
    H[1, 1] 0.1012 against the exact 0.1211 and H[2, 2] −0.0308 against −0.0062 (one node z,
    n=2, c = −logmeanexp), silently. It is refused, naming the cost and the node and pointing to
    dice=True, whose first and second derivatives are exact here (pinned), as the default
    surrogate's first derivative is. With n=1 there are no cross terms: accepted, and exact."""
    th = torch.tensor([0.3, -0.2, 0.5, 0.7], dtype=torch.float64, requires_grad=True)
    program = _vimco_like(th, 2)
    for lam in (1.0, 0.5):
        with scg.Graph() as g:
            program()
        with pytest.raises(scg.SCGError, match=r"cost node 'c'.*reduced=.*node 'z'.*\(n=2\).*dice=True"):
            g.surrogate_loss(dice_lambda=lam)
    (exact_grad,) = st.exact_gradient(program, [th])
    exact_hess = st.exact_hessian(program, [th])
    grad, hess = _expected_derivatives(program, th, 2, dice=True)
    torch.testing.assert_close(grad, exact_grad, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(hess, exact_hess, rtol=1e-9, atol=1e-12)
    grad, _ = _expected_derivatives(program, th, 2)
    torch.testing.assert_close(grad, exact_grad, rtol=1e-9, atol=1e-12)
    one = _vimco_like(th, 1)
    grad, hess = _expected_derivatives(one, th, 1, dice_lambda=1.0)
    torch.testing.assert_close(grad, st.exact_gradient(one, [th])[0], rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(hess, st.exact_hessian(one, [th]), rtol=1e-9, atol=1e-12)


def test_loaded_dice_refuses_a_node_drawn_per_sample_of_a_reduced_pathwise_node() -> None:
    """The joint credit reaches a score node x drawn per sample of a pathwise node u that the cost
    reduces (x's samples along u's dimension meet in the cost): refused naming x and u."""
    th = torch.tensor([0.3, -0.2], dtype=torch.float64, requires_grad=True)
    with scg.Graph() as g:
        u = scg.sample(Normal(th[0], 1.0), name="u", n=3)
        x = scg.sample(Bernoulli(logits=th[1] * u), name="x")
        scg.cost(torch.logsumexp(u * x, 0), name="c", reduced=u)
    with pytest.raises(scg.SCGError, match=r"cost node 'c'.*node 'u'.*\(n=3\).*samples of stochastic node 'x'"):
        g.surrogate_loss(dice_lambda=1.0)
