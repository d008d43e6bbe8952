"""DiCE and Loaded DiCE: Hessians against the exact Hessian by enumeration.

The exact objective E[Σ c] is a differentiable function of θ (scg.testing enumerates every run;
Normal nodes by Gauss-Hermite quadrature; on random graphs the particle-batched enumeration of
``_estimators_util``), so its Hessian is exact. The surrogate's Hessian is
estimated particle-batched (one graph, P independent estimates) and z-tested per entry with a
Bonferroni budget (alpha = 1e-3 per test).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
from _estimators_util import check, estimates, exact_hessian_batched, hessian_estimates
from hypothesis import HealthCheck, given, settings
from torch.distributions import Bernoulli, Categorical, Normal

import scg
import scg.testing as st
from scg.testing.strategies import SCGSpec, scgs

TAB = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)


def theta() -> torch.Tensor:
    return torch.tensor([0.3, -0.2, 0.5, 0.7], dtype=torch.float64, requires_grad=True)


def chain(baseline: Any = None, n: int | None = None):  # type: ignore[no-untyped-def]
    """z → x → cost, the cost also depending on θ directly (pathwise meets score)."""

    def run(th: torch.Tensor) -> None:
        z = scg.sample(Categorical(logits=th[:, :3]), name="z", step=0, n=n, baseline=baseline)
        x = scg.sample(Bernoulli(logits=th[:, 3] * (z.to(th.dtype) - 1)), name="x", step=1, baseline=baseline)
        scg.cost(TAB[z] * (1 + x) + th[:, 0] * x + th[:, 1] ** 2, name="c", step=1)
        scg.cost(th[:, 2] * TAB[z], name="d", step=0)

    return run


def exact_hessian(run: Any, th: torch.Tensor, quadrature: int = 32) -> torch.Tensor:
    return st.exact_hessian(lambda: run(th.unsqueeze(0)), [th], quadrature=quadrature)


@functools.cache
def exact_chain_hessian() -> torch.Tensor:
    """``exact_hessian(chain(), theta())``, the reference of six tests here: enumerated once
    (scg.testing's enumeration, one graph per run: ~0.07 s of CPU each time)."""
    return exact_hessian(chain(), theta())


def test_classic_surrogate_hessian_is_biased_and_dice_is_not() -> None:
    th = theta()
    exact = exact_chain_hessian()
    classic = check(hessian_estimates(chain(), th, 20000, seed=1), exact)
    assert not classic.passed, str(classic)
    dice = check(hessian_estimates(chain(), th, 20000, seed=1, dice=True), exact)
    assert dice.passed, str(dice)


def _check_spec(spec: SCGSpec, **kwargs: Any) -> None:
    th = spec.init_params(0)
    exact = exact_hessian_batched(spec.batched(), th, quadrature=32)  # one graph for every run
    report = check(hessian_estimates(spec.batched(), th, 6000, seed=2, **kwargs), exact)
    assert report.passed, f"{spec}: {report}"


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(scgs(max_nodes=3, max_costs=3, continuous=False))
def test_dice_hessian_is_unbiased_on_random_discrete_graphs(spec: SCGSpec) -> None:
    _check_spec(spec, dice=True)


@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(scgs(max_nodes=2, max_costs=2, continuous=True))
def test_dice_hessian_is_unbiased_with_pathwise_nodes(spec: SCGSpec) -> None:
    _check_spec(spec, dice=True)


def test_dice_first_derivative_equals_algorithm_1() -> None:
    th = theta()
    for bl in (None, scg.baselines.Constant(0.7)):
        classic = estimates(chain(bl), th, 300, seed=3, particles=300)
        for kwargs in ({"dice": True}, {"dice_lambda": 1.0}, {"dice_lambda": 0.3}):
            torch.testing.assert_close(estimates(chain(bl), th, 300, seed=3, particles=300, **kwargs), classic)


def test_dice_first_derivative_subtracts_cost_baselines() -> None:
    """DiCE's first derivative is Algorithm 1's, baselines included: a cost baseline b_c enters
    through each node's b_v = Σ_{v≺c} ω b_c (scg.credit.dice). In a graph whose only baseline is
    a cost baseline, dice=True and dice_lambda must give the default surrogate's gradient on the
    same draw; with the cost baseline ignored they gave plain REINFORCE's ([1.051, 1.479]
    against [0.200, 0.281] per sample: unbiased, the variance reduction silently lost)."""
    th = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    grads = []
    for kwargs in ({}, {"dice": True}, {"dice_lambda": 1.0}):
        torch.manual_seed(3)
        with scg.Graph() as g:
            z = scg.sample(Bernoulli(logits=th), name="z")
            scg.cost((z - 0.3) ** 2 * 3.0 + 1.0, name="c", baseline=scg.baselines.Constant(2.0))
        grads.append(torch.autograd.grad(g.surrogate_loss(**kwargs), [th])[0])
    torch.testing.assert_close(grads[1], grads[0])
    torch.testing.assert_close(grads[2], grads[0])


@pytest.mark.parametrize("baseline", ["constant", "ema", "loo"])
def test_dice_baselines_keep_the_hessian_unbiased(baseline: str) -> None:
    th = theta()
    n = 3 if baseline == "loo" else None
    bl = {
        "constant": scg.baselines.Constant(2.0),
        "ema": scg.baselines.EMA(0.5, init=1.5),
        "loo": scg.baselines.LeaveOneOut(),
    }[baseline]
    exact = exact_chain_hessian()
    report = check(hessian_estimates(chain(bl, n), th, 12000, seed=4, dice=True), exact)
    assert report.passed, str(report)


def test_dice_cost_baselines_keep_the_hessian_unbiased() -> None:
    th = theta()

    def run(t: torch.Tensor) -> None:
        z = scg.sample(Categorical(logits=t[:, :3]), name="z")
        scg.cost(TAB[z] * t[:, 3] + 3.0, name="c", baseline=scg.baselines.Constant(2.5))

    report = check(hessian_estimates(run, th, 20000, seed=5, dice=True), exact_hessian(run, th))
    assert report.passed, str(report)


def test_dice_with_multi_sample_and_enumeration() -> None:
    th = theta()
    exact = exact_chain_hessian()
    report = check(hessian_estimates(chain(n=4), th, 20000, seed=6, dice=True), exact)
    assert report.passed, str(report)

    def enum(t: torch.Tensor) -> None:
        z = scg.sample(Categorical(logits=t[:, :3]), name="z", step=0, estimator=scg.estimators.Enumerate())
        x = scg.sample(Bernoulli(logits=t[:, 3] * (z.to(t.dtype) - 1)), name="x", step=1)
        scg.cost(TAB[z] * (1 + x) + t[:, 0] * x + t[:, 1] ** 2, name="c", step=1)
        scg.cost(t[:, 2] * TAB[z], name="d", step=0)

    report = check(hessian_estimates(enum, th, 20000, seed=7, dice=True), exact)
    assert report.passed, str(report)


def test_loaded_dice_lambda_one_is_dice_on_a_sequential_program() -> None:
    th = theta()
    dice = hessian_estimates(chain(), th, 2000, seed=8, dice=True)
    loaded = hessian_estimates(chain(), th, 2000, seed=8, dice_lambda=1.0)
    torch.testing.assert_close(loaded, dice)


def test_loaded_dice_lambda_below_one_damps_the_hessian() -> None:
    th = theta()
    exact = exact_chain_hessian()
    first = check(
        estimates(chain(), th, 4000, seed=9, dice_lambda=0.0),
        st.exact_gradient(lambda: chain()(th.unsqueeze(0)), [th])[0],
    )
    assert first.passed, str(first)  # first derivatives stay unbiased for every λ
    biased = check(hessian_estimates(chain(), th, 20000, seed=10, dice_lambda=0.0), exact)
    assert not biased.passed, str(biased)


def test_loaded_dice_is_not_exact_on_independent_branches() -> None:
    """Two independent nodes meeting in one cost: the per-node form misses their cross term."""
    th = theta()

    def run(t: torch.Tensor) -> None:
        a = scg.sample(Bernoulli(logits=t[:, 0]), name="a", step=0)
        b = scg.sample(Bernoulli(logits=t[:, 1]), name="b", step=0)
        scg.cost(3.0 * a * b + a, name="c", step=0)

    exact = exact_hessian(run, th)
    assert check(hessian_estimates(run, th, 20000, seed=11, dice=True), exact).passed
    assert not check(hessian_estimates(run, th, 20000, seed=11, dice_lambda=1.0), exact).passed


def test_dice_refuses_a_cost_mixing_a_node_s_elements_without_sending_to_loaded_dice() -> None:
    """The refusal recommended dice_lambda=1.0 as "the same derivatives"; its second derivative
    across the node's elements is exactly 0 there (the exact ∂²/∂θ0∂θ1 is 0.363). It now says so
    and names the way to exact higher derivatives: the elements as one node."""
    th = torch.tensor([0.3, -0.2], dtype=torch.float64, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(3.0 * z.flip(0) * z, name="c")
    with pytest.raises(scg.SCGError, match=r"no surrogate gives exact higher derivatives.*Independent") as err:
        g.surrogate_loss(dice=True)
    assert "same derivatives" not in str(err.value)
    with scg.Graph() as g:  # (lambda = 1 on it: the cross term is 0)
        z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(3.0 * z.flip(0) * z, name="c")
    (grad,) = torch.autograd.grad(g.surrogate_loss(dice_lambda=1.0), th, create_graph=True)
    (row,) = torch.autograd.grad(grad[0], th, allow_unused=True, materialize_grads=True)
    assert float(row[1]) == 0.0 and float(st.exact_hessian(_flip_program(th), [th])[0, 1]) > 0.1


def _flip_program(th: torch.Tensor) -> Any:
    def program() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(3.0 * z.flip(0) * z, name="c")

    return program


def test_dice_forward_value_and_errors() -> None:
    th = theta()
    for kwargs in ({"dice": True}, {"dice_lambda": 0.5}, {"dice": True, "score_scale": 0.2}):
        with scg.Graph() as g:
            chain(scg.baselines.Constant(1.0))(th.unsqueeze(0))
        total = g.node("c").value.sum() + g.node("d").value.sum()
        torch.testing.assert_close(g.surrogate_loss(**kwargs), total)
    with scg.Graph() as g:
        chain()(th.unsqueeze(0))
    with pytest.raises(scg.SCGError, match="dice=True, discount"):
        g.surrogate_loss(dice=True, discount=0.9)
    with scg.Graph() as g:
        chain()(th.unsqueeze(0))
    with pytest.raises(scg.SCGError, match="dice_lambda=.*in \\[0, 1\\]"):
        g.surrogate_loss(dice_lambda=1.5)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=th[:3]), name="z")
        x = scg.sample(Bernoulli(logits=TAB[z]), name="x")
        scg.cost(x**2, name="c")
    with pytest.raises(scg.SCGError, match="dice_lambda=0.5.*'z'.*has no step"):
        g.surrogate_loss(dice_lambda=0.5)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=th[:3]), name="z", estimator=scg.estimators.RELAX(lambda zz: zz.sum(-1)))
        scg.cost(TAB[z], name="c")
    with pytest.raises(scg.SCGError, match="'z' .*RELAX.*higher derivatives"):
        g.surrogate_loss(dice=True)


def _bit_then_normal(th: torch.Tensor, baseline: scg.baselines.Baseline | None = None) -> None:
    z = scg.sample(Bernoulli(logits=th), name="z", baseline=baseline)  # score function
    x = scg.sample(Normal(th * z, 1.0), name="x")  # pathwise
    scg.cost((x - 1.0) ** 2 + 2.0 * z, name="c")


@pytest.mark.parametrize("lam", [0.0, 0.5, 2.0])
def test_dice_score_scale_scales_the_score_terms(lam: float) -> None:
    """``surrogate_loss(score_scale=λ)`` multiplies every score-function term, and DiCE's ⊡ − 1
    parts, by λ: DiCE's first derivative must equal the default surrogate's at the same λ on the
    same draw (the pathwise part unscaled, the score part times λ). A DiCE cost term c·⊡(τ) that
    ignores λ disagrees at every λ ≠ 1."""
    th = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    grads = []
    for dice in (False, True):
        torch.manual_seed(5)
        with scg.Graph() as g:
            _bit_then_normal(th)
        grads.append(torch.autograd.grad(g.surrogate_loss(score_scale=lam, dice=dice), [th])[0])
    torch.testing.assert_close(grads[1], grads[0])


def test_dice_value_is_the_objective_with_a_learned_baseline() -> None:
    """A DiCE surrogate evaluates to the objective Σ_c Σ ω c (⊡ = 1); a baseline's regression loss
    ℓ is added as ℓ − ⊥ℓ, zero in value, so a logged loss is the objective whatever the baselines.
    Adding ℓ itself put the regression loss into the value (the gradient unchanged)."""
    th = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    torch.manual_seed(0)
    learned = scg.baselines.Learned(torch.nn.Linear(1, 1).double())
    with scg.Graph() as g:
        _bit_then_normal(th, baseline=learned.given(torch.ones(2, 1, dtype=torch.float64)))
    total = g.node("c").value.sum().detach()
    torch.testing.assert_close(g.surrogate_loss(dice=True).detach(), total)


def test_magic_box() -> None:
    x = torch.tensor(0.7, requires_grad=True)
    box = scg.credit.dice.magic_box(3.0 * x)
    assert float(box.detach()) == 1.0
    (d1,) = torch.autograd.grad(box, x, create_graph=True)
    (d2,) = torch.autograd.grad(d1, x)
    assert float(d1.detach()) == pytest.approx(3.0) and float(d2) == pytest.approx(9.0)
