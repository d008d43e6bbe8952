"""Statistical properties of the surrogate: unbiasedness against enumeration, baselines,
causal credit, pathwise gradients, and that the checker catches a biased estimator.

Every test is seeded; tolerances come from standard errors (scg.testing's z-test with a
Bonferroni budget, alpha = 1e-3 per test). On random graphs the exact gradient comes from the
particle-batched enumeration of ``_estimators_util`` (checked here against ``scg.testing``'s) and
the estimates from one particle-batched graph, so a case costs a few forward passes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
import torch
from _estimators_util import exact_gradient_batched, exact_hessian_batched
from hypothesis import HealthCheck, given, settings
from torch.distributions import Bernoulli, Categorical, Gumbel, Normal

import scg
import scg.testing as st
from scg.baselines import Baseline, BaselineResult
from scg.graph.nodes import Node
from scg.testing.strategies import CostSpec, NodeSpec, SCGSpec, scgs

#: estimates per random graph (one particle-batched graph each): a bias of 6 % of a coordinate's
#: per-draw standard deviation is found with probability ~1/2 (z* ≈ 4 at d ≈ 10; 4 / √4000)
N_RANDOM = 4000


def _check_spec(
    spec: SCGSpec,
    *,
    baseline: Baseline | None = None,
    seed: int = 1,
    theta_seed: int = 0,
    particles: int = N_RANDOM,
    exact: torch.Tensor | None = None,
) -> None:
    theta = spec.init_params(theta_seed)
    if exact is None:
        exact = exact_gradient_batched(spec.batched(), theta)
    report = st.check_unbiased(
        spec.program(theta),
        [theta],
        n=N_RANDOM,
        exact=[exact],
        batched=spec.batched(baseline),
        particles=particles,
        seed=seed,
    )
    assert report.passed, f"{spec} {baseline!r}: {report}"


def test_batched_enumeration_matches_scg_testing() -> None:
    """The fast oracle of the random-graph tests against ``scg.testing``'s (one graph per run):
    a chain, a diamond and a tree of every node kind (a vector of independent categoricals
    enumerated jointly), gradients and Hessians."""
    specs = [
        SCGSpec(
            [NodeSpec("categorical", 3, ()), NodeSpec("onehot", 2, (0,)), NodeSpec("bernoulli", 1, (0, 1))],
            [(0, CostSpec((0,), True, 1.0)), (2, CostSpec((1, 2), True, 2.0))],
        ),
        SCGSpec(
            [NodeSpec("normal", 1, ()), NodeSpec("bernoulli", 1, (0,))],
            [(1, CostSpec((0, 1), True, 0.5)), (0, CostSpec((0,), True, 1.0))],
        ),
        SCGSpec([NodeSpec("indcat", 2, ())], [(0, CostSpec((0,), True, 1.5))]),
    ]
    for spec in specs:
        theta = spec.init_params(3)
        # (no second, coarser quadrature: both oracles integrate with the same 6 points)
        want = st.exact_gradient(spec.program(theta), [theta], quadrature=6, check_quadrature=False)[0]
        torch.testing.assert_close(exact_gradient_batched(spec.batched(), theta, quadrature=6), want)
        want_h = st.exact_hessian(spec.program(theta), [theta], quadrature=6)
        torch.testing.assert_close(exact_hessian_batched(spec.batched(), theta, quadrature=6), want_h)
        assert float(want.abs().min()) > 0  # every parameter matters: nothing passes as 0 == 0


# ~30 ms of CPU per graph (enumeration, one particle-batched graph, hypothesis): the default suite
# checks 50 + 30 + 15 graphs at full power, test_many_random_scgs_are_unbiased (slow) 800 more
@settings(max_examples=50, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(scgs(continuous=False))
def test_random_discrete_scgs_are_unbiased(spec: SCGSpec) -> None:
    _check_spec(spec)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(scgs(max_nodes=3, continuous=True))
def test_random_mixed_scgs_are_unbiased(spec: SCGSpec) -> None:
    _check_spec(spec)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(scgs(continuous=False))
def test_baselines_leave_the_mean_unchanged(spec: SCGSpec) -> None:
    exact = exact_gradient_batched(spec.batched(), spec.init_params(1))
    _check_spec(spec, baseline=scg.baselines.Constant(0.7), seed=2, theta_seed=1, exact=exact)
    # four graphs of 1000 particles: the EMA moves between them
    _check_spec(spec, baseline=scg.baselines.EMA(0.3, init=0.2), seed=2, theta_seed=1, particles=1000, exact=exact)


@pytest.mark.slow  # ~1 min: the random-graph tests above with ten times the graphs
@settings(max_examples=800, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(scgs(continuous=True))
def test_many_random_scgs_are_unbiased(spec: SCGSpec) -> None:
    _check_spec(spec, seed=3)
    _check_spec(spec, baseline=scg.baselines.EMA(0.3, init=0.2), seed=4, particles=1000)


class _UpdateFirstEMA(Baseline):
    """A wrong EMA that updates with the current sample before subtracting (as a peer does)."""

    def __init__(self, beta: float) -> None:
        self.beta = beta
        self.value = 0.0

    def __call__(self, nodes: Sequence[Node], targets: torch.Tensor, info: object) -> BaselineResult:
        b = self.value + self.beta * (targets - self.value)  # includes the current sample
        self.value = float(b.mean())
        return BaselineResult(b)


def _one_node_program(theta: torch.Tensor, baseline: Baseline | None = None):  # type: ignore[no-untyped-def]
    def run(th: torch.Tensor) -> None:
        z = scg.sample(Categorical(logits=th), name="z", baseline=baseline)
        scg.cost((z.to(th.dtype) - 1.0) ** 2 + 1.0, name="c")

    return (lambda: run(theta.unsqueeze(0))), run


def test_checker_catches_a_biased_baseline() -> None:
    theta = torch.tensor([0.2, -0.4, 0.1], dtype=torch.float64, requires_grad=True)
    program, batched = _one_node_program(theta, _UpdateFirstEMA(0.5))
    report = st.check_unbiased(program, [theta], n=4000, batched=batched, particles=1000)
    assert not report.passed, str(report)
    assert report.p_value < 1e-6
    # The same program with the correct EMA passes, with the same seed and n.
    program, batched = _one_node_program(theta, scg.baselines.EMA(0.5))
    assert st.check_unbiased(program, [theta], n=4000, batched=batched, particles=1000).passed


def test_update_first_ema_halves_the_gradient() -> None:
    """The measured bias of the update-first EMA: every gradient scaled by (1 − β)."""
    theta = torch.tensor([0.2, -0.4, 0.1], dtype=torch.float64, requires_grad=True)
    program, batched = _one_node_program(theta, _UpdateFirstEMA(0.5))
    exact = torch.cat(st.exact_gradient(program, [theta]))
    est = st.estimate_gradients_batched(batched, [theta], 20000, particles=2000)
    ratio = (est.mean(0) @ exact) / (exact @ exact)
    se = float((est @ exact).std() / (exact @ exact)) / math.sqrt(est.shape[0])
    assert abs(float(ratio) - 0.5) < 4 * se + 1e-3, (float(ratio), se)


def test_causal_credit_lowers_variance() -> None:
    """Crediting z1 with c2 (which it does not influence) keeps the mean but adds variance."""
    theta = torch.tensor([0.3, -0.2, 0.5, 0.1], dtype=torch.float64, requires_grad=True)

    def run(th: torch.Tensor, credit_all: bool) -> None:
        z1 = scg.sample(Bernoulli(logits=th[:, 0]), name="z1")
        z2 = scg.sample(Bernoulli(logits=th[:, 1]), name="z2")
        c1 = z1 * 2.0 + th[:, 2]
        c2 = (z2 * 5.0 + th[:, 3]) ** 2
        scg.cost(c1, name="c1")
        scg.cost(scg.influenced_by(c2, z1, per_element=True) if credit_all else c2, name="c2")

    def prog(credit_all: bool):  # type: ignore[no-untyped-def]
        return lambda: run(theta.unsqueeze(0), credit_all)

    causal = st.estimate_gradients_batched(lambda t: run(t, False), [theta], 8000, particles=2000)
    full = st.estimate_gradients_batched(lambda t: run(t, True), [theta], 8000, particles=2000)
    exact = torch.cat(st.exact_gradient(prog(False), [theta]))
    assert st.compare(causal, exact).passed and st.compare(full, exact).passed
    v_causal, v_full = causal[:, 0].var(), full[:, 0].var()
    # Variance ratio test: F statistic with 7999 dof each; require a clear margin.
    assert float(v_full / v_causal) > 1.5, (float(v_causal), float(v_full))


@pytest.mark.parametrize("dist", ["normal", "gumbel"])
def test_pathwise_matches_analytic_gradient(dist: str) -> None:
    mu = torch.tensor([0.4], dtype=torch.float64, requires_grad=True)
    log_s = torch.tensor([-0.3], dtype=torch.float64, requires_grad=True)
    a = 1.5

    def run(m: torch.Tensor, ls: torch.Tensor) -> None:
        d = Normal(m, ls.exp()) if dist == "normal" else Gumbel(m, ls.exp())
        x = scg.sample(d, name="x")
        scg.cost(((x - a) ** 2).sum(-1), name="c")

    s = float(log_s.detach().exp())
    if dist == "normal":  # E = (μ − a)² + σ²
        exact = [2 * (mu.detach() - a), torch.tensor([2 * s * s], dtype=torch.float64)]
    else:  # Gumbel: E[x] = μ + sγ, Var = π²s²/6
        g = 0.5772156649015329
        mean = float(mu.detach()) + s * g
        exact = [
            torch.tensor([2 * (mean - a)], dtype=torch.float64),
            torch.tensor([2 * (mean - a) * s * g + 2 * math.pi**2 * s * s / 6], dtype=torch.float64),
        ]
    report = st.check_unbiased(
        lambda: run(mu[None], log_s[None]), [mu, log_s], n=20000, exact=exact, batched=run, particles=5000
    )
    assert report.passed, str(report)


def test_discount_weights_costs_by_lag() -> None:
    theta = torch.zeros(3, 2, requires_grad=True)
    with scg.Graph() as g:
        zs = [scg.sample(Categorical(logits=theta[t]), name="z", step=t) for t in range(3)]
        cs = [scg.cost(sum(z.float() for z in zs[: t + 1]) + t + 1.0, name="c", step=t) for t in range(3)]
    assert not g.influences(zs[2], cs[1]) and g.influences(zs[0], cs[2])
    grad = torch.autograd.grad(g.surrogate_loss(discount=0.5), theta)[0]
    t2 = theta.detach().requires_grad_()
    manual = sum(
        Categorical(logits=t2[t]).log_prob(zs[t]) * sum(0.5 ** (s - t) * float(cs[s]) for s in range(t, 3))
        for t in range(3)
    )
    torch.testing.assert_close(grad, torch.autograd.grad(manual, t2)[0])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "n"),
    [
        (scg.estimators.Enumerate, None),
        (lambda: scg.estimators.RaoBlackwellized(1), None),
        (scg.estimators.UnorderedSet, 2),
        (scg.estimators.ScoreFunction, None),
    ],
    ids=["enumerate", "rao-blackwell", "unordered-set", "score"],
)
def test_discount_over_an_enumerating_node_is_refused(make: object, n: int | None) -> None:
    """An enumerating node is credited through its weights ω, which multiply the whole cost: a
    later step's cost reached it undiscounted (its mean d/dθ 2.214, the score function's with
    γ = 0.5 1.724, silently). Refused when a cost at a later step depends on it; a cost at its own
    step (γ^0) and ``discount=1`` are accepted, and a score node is discounted as before."""
    theta = torch.tensor([[0.3, -0.2], [-0.4, 0.1]], dtype=torch.float64, requires_grad=True)
    table = torch.tensor([1.0, -2.0], dtype=torch.float64)

    def build(later: bool) -> scg.Graph:
        with scg.Graph() as g:
            z = scg.sample(Categorical(logits=theta), name="z", estimator=make(), step=0, **({"n": n} if n else {}))  # type: ignore[operator]
            scg.cost(table[z] * 0.5, name="c0", step=0)
            if later:
                scg.cost(table[z] ** 2, name="c1", step=1)
        return g

    if n is None and make is scg.estimators.ScoreFunction:
        build(True).surrogate_loss(discount=0.5)
        return
    with pytest.raises(scg.SCGError, match=r"discount=0.5\): stochastic node 'z'.*cost node 'c1'.*γ\^1"):
        build(True).surrogate_loss(discount=0.5)
    build(False).surrogate_loss(discount=0.5)
    build(True).surrogate_loss(discount=1.0)


def test_cost_baseline_is_subtracted_before_discount() -> None:
    """The C2F paper's A_t = (r_t − b_t) + γ A_{t+1} with an EMA per step on the cost."""
    theta = torch.zeros(3, 2, requires_grad=True)
    ema = scg.baselines.EMA(0.1, init=0.5)
    with scg.Graph() as g:
        zs = [scg.sample(Categorical(logits=theta[t]), name="z", step=t) for t in range(3)]
        cs = [scg.cost(sum(z.float() for z in zs[: t + 1]) + 1.0, name="r", step=t, baseline=ema) for t in range(3)]
    grad = torch.autograd.grad(g.surrogate_loss(discount=0.5), theta)[0]
    t2 = theta.detach().requires_grad_()
    adv = [float(cs[t]) - 0.5 for t in range(3)]
    manual = sum(
        Categorical(logits=t2[t]).log_prob(zs[t]) * sum(0.5 ** (s - t) * adv[s] for s in range(t, 3)) for t in range(3)
    )
    torch.testing.assert_close(grad, torch.autograd.grad(manual, t2)[0])  # type: ignore[arg-type]
    # After the update, each step's average moved by beta toward its reward.
    for t in range(3):
        assert float(ema.value("r", t)) == pytest.approx(0.5 + 0.1 * (float(cs[t]) - 0.5))
