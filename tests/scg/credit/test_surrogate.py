"""``scg.credit.objective`` (scg/credit/surrogate.py): the objective a surrogate evaluates to."""

from __future__ import annotations

import torch
from torch.distributions import Categorical

import scg
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
