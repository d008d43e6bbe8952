"""Measure-valued derivatives (Normal, Bernoulli): unbiased for a step-function cost, where the
pathwise gradient is zero, and inside a graph with score-function nodes before and after; a twin
without the σ-derivative's negative part is caught."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from _estimators_util import check, estimates, exact_gradient_batched
from torch.distributions import Bernoulli, Normal

import scg
from scg.estimators import MeasureValued, ScoreFunction
from scg.graph.nodes import StochasticNode

A = 0.25


def theta() -> torch.Tensor:
    return torch.tensor([0.3, -0.4, 0.5, 0.2], dtype=torch.float64, requires_grad=True)


def step_program(estimator: Any):  # type: ignore[no-untyped-def]
    def run(th: torch.Tensor) -> None:
        x = scg.sample(Normal(th[:, 0], th[:, 1].exp()), name="x", estimator=estimator)
        scg.cost((x > A).to(x.dtype) + th[:, 2] * x, name="c")

    return run


def step_exact(th: torch.Tensor) -> torch.Tensor:
    """∇ of E[1(x > a) + θ2 x] = Φ((μ − a)/σ) + θ2 μ, in closed form."""
    mu, sigma = th[0], th[1].exp()
    value = 0.5 * (1 + torch.erf((mu - A) / (sigma * math.sqrt(2.0)))) + th[2] * mu
    (grad,) = torch.autograd.grad(value, [th])
    return grad


class NoNegativePart(MeasureValued):
    """The σ-derivative without its negative part −E[f(x)]/σ."""

    def weights(self, node: StochasticNode) -> torch.Tensor:
        w = super().weights(node)
        return torch.cat([w[:1].detach(), w[1:]])


def test_step_cost_unbiased_where_pathwise_is_not() -> None:
    th = theta()
    ex = step_exact(th)
    report = check(estimates(step_program(MeasureValued()), th, 6000, seed=31), ex)
    assert report.passed, str(report)
    with pytest.warns(scg.NonDifferentiablePathWarning, match="pathwise stochastic node 'x'"):  # and scg says why
        pathwise = check(estimates(step_program(scg.Pathwise()), th, 2000, seed=31), ex)
    assert not pathwise.passed  # the step's gradient is zero almost everywhere


def test_twin_without_the_negative_part_is_caught() -> None:
    th = theta()
    report = check(estimates(step_program(NoNegativePart()), th, 6000, seed=31), step_exact(th))
    assert not report.passed, str(report)


def chain(estimator: Any = None, bernoulli: bool = False):  # type: ignore[no-untyped-def]
    """u ~ Bern(σ(θ3)) scored; x (Normal or Bernoulli) measure-valued; y ~ Bern(σ(x)) scored."""

    def run(th: torch.Tensor) -> None:
        est = {} if estimator is None else {"estimator": estimator}
        u = scg.sample(Bernoulli(logits=th[:, 3]), name="u", estimator=ScoreFunction())
        if bernoulli:
            x = scg.sample(Bernoulli(logits=th[:, 0] + u), name="x", **est)
        else:
            x = scg.sample(Normal(th[:, 0] + u, th[:, 1].exp()), name="x", **est)
        y = scg.sample(Bernoulli(logits=x - 0.5), name="y", estimator=ScoreFunction())
        scg.cost(torch.sin(2 * x) + th[:, 2] * x**2 + u * x + y * (1 - 2 * u), name="c")

    return run


@pytest.mark.parametrize("bernoulli", [False, True])
def test_unbiased_between_score_function_nodes(bernoulli: bool) -> None:
    th = theta()
    ex = exact_gradient_batched(chain(bernoulli=bernoulli), th)  # scg.testing's enumeration, one pass
    report = check(estimates(chain(MeasureValued(), bernoulli), th, 6000, seed=32), ex)
    assert report.passed, str(report)


def test_the_objective_comes_from_the_ordinary_sample() -> None:
    th = theta()
    torch.manual_seed(0)
    with scg.Graph() as g:
        x = scg.sample(Normal(th[0].expand(5), th[1].exp()), name="x", estimator=MeasureValued())
        scg.cost(x**2, name="c")
    assert x.shape == (4, 5)
    torch.testing.assert_close(g.surrogate_loss(), (x[0] ** 2).sum())
    assert bool((x[1] > th[0]).all()) and bool((x[2] < th[0]).all())


def test_errors() -> None:
    with scg.Graph():
        with pytest.raises(scg.SCGError, match=r"name='g'.*Normal and Bernoulli.*Gamma"):
            scg.sample(torch.distributions.Gamma(torch.ones(2), 1.0), name="g", estimator=MeasureValued())
        with pytest.raises(scg.SCGError, match=r"name='x', n=2"):
            scg.sample(Normal(torch.zeros(2), 1.0), name="x", n=2, estimator=MeasureValued())
    th = theta()
    with scg.Graph() as g:
        x = scg.sample(Normal(th[:2], 1.0), name="x", estimator=MeasureValued())
        scg.cost(x.sum(-1), name="c")
    with pytest.raises(scg.SCGError, match=r"do not line up.*enumerated.*'x'"):
        g.surrogate_loss()
    with scg.Graph() as g:
        x = scg.sample(Normal(th[:2], 1.0), name="x", estimator=MeasureValued())
        scg.cost(x, name="c")
    with pytest.raises(scg.SCGError, match=r"dice=True.*'x'.*MeasureValued.*higher derivatives"):
        g.surrogate_loss(dice=True)
