"""Straight-through Gumbel-Softmax and Bernoulli: the forward value is the hard sample, the
gradient is the relaxed one, in closed form (issue 30).

With the noise fixed, y = softmax((l + g)/τ) and a linear cost w·v, the straight-through gradient
is ∂(w·y)/∂l = y ⊙ (w − y·w)/τ (not 0, as for the hard sample alone, and not the soft value's
forward). For Bernoulli y = σ((l + L)/τ), L logistic noise: ∂(w y)/∂l = w y (1 − y)/τ.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.distributions import Bernoulli, OneHotCategorical, RelaxedBernoulli, RelaxedOneHotCategorical

import scg

TAU = 0.7


def test_straight_through_gumbel_softmax_value_and_gradient() -> None:
    logits = torch.tensor([[0.3, -0.5, 1.0, 0.1]] * 6, dtype=torch.float64, requires_grad=True)
    w = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)
    torch.manual_seed(5)
    with scg.Graph() as g:
        v = scg.sample(
            OneHotCategorical(logits=logits), name="v", estimator=scg.estimators.GumbelSoftmax(TAU, hard=True)
        )
        scg.cost(v @ w, name="c")
    (grad,) = torch.autograd.grad(g.surrogate_loss(), logits)
    torch.manual_seed(5)
    y = RelaxedOneHotCategorical(torch.tensor(TAU, dtype=torch.float64), logits=logits.detach()).rsample()
    torch.testing.assert_close(v.detach(), F.one_hot(y.argmax(-1), 4).to(y.dtype), rtol=0, atol=0)
    assert len(set(y.argmax(-1).tolist())) > 1  # the rows differ: the noise matters
    want = y * (w - (y * w).sum(-1, keepdim=True)) / TAU
    torch.testing.assert_close(grad, want)


def test_straight_through_bernoulli_value_and_gradient() -> None:
    logits = torch.tensor([0.3, -0.5, 1.0, 0.1, -1.2, 0.8], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([1.0, -2.0, 0.5, 3.0, 1.5, -1.0], dtype=torch.float64)
    torch.manual_seed(6)
    with scg.Graph() as g:
        v = scg.sample(Bernoulli(logits=logits), name="v", estimator=scg.estimators.GumbelSoftmax(TAU, hard=True))
        scg.cost((w * v).sum(), name="c")
    (grad,) = torch.autograd.grad(g.surrogate_loss(), logits)
    torch.manual_seed(6)
    y = RelaxedBernoulli(torch.tensor(TAU, dtype=torch.float64), logits=logits.detach()).rsample()
    torch.testing.assert_close(v.detach(), (y > 0.5).to(y.dtype), rtol=0, atol=0)
    assert 0 < int((y > 0.5).sum()) < 6
    torch.testing.assert_close(grad, w * y * (1 - y) / TAU)
