"""``scg.testing.expected_estimate``: an estimator's exact mean E[ĝ] = Σ_runs p(run) ∇ surrogate(run)
over every joint value of a program's finite nodes. It equals ``exact_gradient`` to rounding for an
unbiased estimator, differs by the bias for a biased twin, refuses each bad argument by name, and
leaves the nodes named in ``keep`` to their estimator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Distribution, Gamma, Normal

import scg
import scg.testing as st
from scg.baselines import Constant
from scg.estimators import Enumerate

T = torch.tensor([1.0, 3.0, -1.0], dtype=torch.float64)


def _theta() -> torch.Tensor:
    return torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)


def _chain(theta: torch.Tensor, estimator: Callable[[], scg.estimators.Estimator] | None = None) -> Callable[[], None]:
    """Two plated nodes, z (2,) Bernoulli then e (2,) Categorical from z, with per-element costs
    that also depend on θ pathwise; z has a constant baseline."""

    def program() -> None:
        z = scg.sample(
            Bernoulli(logits=theta),
            name="z",
            estimator=None if estimator is None else estimator(),
            baseline=Constant(0.5),
        )
        logits = z[:, None] * torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64) + theta[:, None]
        e = scg.sample(Categorical(logits=logits), name="e")
        scg.cost((z + theta) ** 2, name="c")
        scg.cost(T[e] * theta.exp(), name="d")

    return program


def test_an_unbiased_estimator_s_exact_mean_is_the_exact_gradient() -> None:
    """Score function with a baseline, each element credited with its own costs: E[ĝ] over the
    (2^2)·(3^2) = 36 runs is ∇E[Σ costs] to rounding."""
    theta = _theta()
    program = _chain(theta)
    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.credit("z", "c") == "per-element" and g.credit("z", "d") == "per-element"
    (exact,) = st.exact_gradient(program, [theta])
    (mean,) = st.expected_estimate(program, [theta])
    assert float(exact.abs().min()) > 0.1
    torch.testing.assert_close(mean, exact, rtol=1e-9, atol=1e-12)
    assert not mean.requires_grad


def test_a_structure_that_under_declares_an_influence_is_biased_by_the_missing_score_term() -> None:
    """A Declared structure in which no node influences any cost drops every score term: the mean
    is E[∂c/∂θ] pathwise only, here 2(σ(θ) + θ) exactly, and far from the exact gradient."""
    theta = _theta()

    def program() -> None:
        z = scg.sample(Bernoulli(logits=theta), name="z")
        scg.cost((z + theta) ** 2, name="c")

    (exact,) = st.exact_gradient(program, [theta])
    torch.testing.assert_close(st.expected_estimate(program, [theta]), [exact], rtol=1e-9, atol=1e-12)
    (missed,) = st.expected_estimate(program, [theta], graph_kwargs={"structure": scg.Declared(lambda v, n: False)})
    with torch.no_grad():
        torch.testing.assert_close(missed, 2 * (torch.sigmoid(theta) + theta), rtol=1e-12, atol=1e-12)
    with torch.no_grad():  # (the bias: the score term's mean, σ'(θ)·((1 + θ)² − θ²))
        s = torch.sigmoid(theta)
        torch.testing.assert_close(exact - missed, s * (1 - s) * (1 + 2 * theta), rtol=1e-9, atol=1e-12)


class _NoScore(scg.ScoreFunction):
    """A custom estimator that forgets its score term (its log-probability detached)."""

    def log_prob(self, dist: Distribution, value: torch.Tensor) -> torch.Tensor:
        return dist.log_prob(value).detach()


def test_a_custom_estimator_missing_its_score_term_differs_from_the_exact_gradient() -> None:
    theta = _theta()
    (exact,) = st.exact_gradient(_chain(theta), [theta])
    (fine,) = st.expected_estimate(_chain(theta, scg.ScoreFunction), [theta])
    (biased,) = st.expected_estimate(_chain(theta, _NoScore), [theta])
    torch.testing.assert_close(fine, exact, rtol=1e-9, atol=1e-12)
    assert float((biased - exact).abs().max()) > 0.05


def test_surrogate_kwargs_reach_the_surrogate() -> None:
    """``score_scale=0`` drops the score terms from each run's surrogate, as the Declared twin did."""
    theta = _theta()

    def program() -> None:
        z = scg.sample(Bernoulli(logits=theta), name="z")
        scg.cost((z + theta) ** 2, name="c")

    (scaled,) = st.expected_estimate(program, theta, surrogate_kwargs={"score_scale": 0.0})
    with torch.no_grad():
        torch.testing.assert_close(scaled, 2 * (torch.sigmoid(theta) + theta), rtol=1e-12, atol=1e-12)


def _with_enumerated(theta: torch.Tensor, calls: list[int]) -> Callable[[], None]:
    def program() -> None:
        calls[0] += 1
        u = scg.sample(Bernoulli(logits=theta[0]), name="u")
        logits = u * torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64) + theta[1]
        e = scg.sample(Categorical(logits=logits), estimator=Enumerate(), name="e")
        scg.cost(T[e] + u * theta[1], name="c")

    return program


def test_a_kept_enumerated_node_draws_its_own_support() -> None:
    """With ``keep=("e",)`` only u is enumerated (2 runs): e stays ``Enumerate()`` and weights its
    support itself; the mean is still the exact gradient, from fewer runs than when e is forced
    (then a score-function node: 2·3 runs)."""
    theta = _theta()
    kept, forced = [0], [0]
    (exact,) = st.exact_gradient(_with_enumerated(theta, [0]), [theta])
    (mean,) = st.expected_estimate(_with_enumerated(theta, kept), [theta], keep=("e",))
    torch.testing.assert_close(mean, exact, rtol=1e-9, atol=1e-12)
    (all_forced,) = st.expected_estimate(_with_enumerated(theta, forced), [theta])
    torch.testing.assert_close(all_forced, exact, rtol=1e-9, atol=1e-12)
    assert kept[0] < forced[0], (kept, forced)


def test_a_kept_continuous_node_is_drawn_and_the_rest_is_exact() -> None:
    """x ~ Normal(μ, 1), kept (drawn pathwise); b ~ Bernoulli(θ) enumerated. Every run draws the
    same x (the generator seeded alike before each), so b's score term (2b + x)·∇log p(b) has the
    mean 2σ'(θ) whatever x is: the θ coordinate is exact. (The kept draw moves torch's generator:
    not refused as hidden randomness.) The same seed gives the same result, and the caller's
    generator is left as it was."""
    theta = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    mu = torch.tensor(0.1, dtype=torch.float64, requires_grad=True)

    def program() -> None:
        x = scg.sample(Normal(mu, 1.0), name="x")
        b = scg.sample(Bernoulli(logits=theta), name="b")
        scg.cost(2 * b + x, name="c")

    state = torch.random.get_rng_state()
    g_theta, g_mu = st.expected_estimate(program, [theta, mu], keep=("x",), seed=3)
    assert torch.equal(state, torch.random.get_rng_state())
    s = torch.sigmoid(theta.detach())
    torch.testing.assert_close(g_theta, 2 * s * (1 - s), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(g_mu, torch.tensor(1.0, dtype=torch.float64))
    assert torch.equal(st.expected_estimate(program, [theta, mu], keep=("x",), seed=3)[0], g_theta)


def test_a_cached_structure_sees_only_complete_runs() -> None:
    """The enumeration's stopped runs are graphs of their own: a Cached structure given in
    graph_kwargs learns from the complete runs only, and the mean is exact."""
    theta = _theta()
    program = _chain(theta)
    (exact,) = st.exact_gradient(program, [theta])
    (mean,) = st.expected_estimate(program, [theta], graph_kwargs={"structure": scg.Cached()})
    torch.testing.assert_close(mean, exact, rtol=1e-9, atol=1e-12)


def test_a_parameter_no_run_reaches_gets_zeros() -> None:
    """The estimator's mean, not the exact gradient's check: a parameter whose surrogate gradient
    is never reached is a zero estimate (``exact_gradient`` refuses such params)."""
    theta = _theta()
    other = torch.ones(3, dtype=torch.float64, requires_grad=True)
    mean, zero = st.expected_estimate(_chain(theta), [theta, other])
    assert float(mean.abs().min()) > 0.1
    assert torch.equal(zero, torch.zeros(3, dtype=torch.float64))


def _bernoulli(theta: torch.Tensor) -> Callable[[], None]:
    def program() -> None:
        z = scg.sample(Bernoulli(logits=theta), name="z")
        scg.cost(z * theta, name="c")

    return program


def _normal(theta: torch.Tensor) -> None:
    x = scg.sample(Normal(theta, 1.0), name="x")
    scg.cost(x**2, name="c")


def _gamma(theta: torch.Tensor) -> None:
    x = scg.sample(Gamma(theta.exp(), 1.0), name="g")
    scg.cost(x, name="c")


def _own_graph(theta: torch.Tensor) -> None:
    with scg.Graph():
        _bernoulli(theta)()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda t: st.expected_estimate(lambda x: None, t),
            r"expected_estimate: program must be callable with no arguments",
        ),
        (lambda t: st.expected_estimate(3, t), r"expected_estimate: program must be a function of no arguments"),
        (
            lambda t: st.expected_estimate(_bernoulli(t), t.detach()),
            r"expected_estimate: params\[0\] \(shape \(2,\)\) does not require grad",
        ),
        (lambda t: st.expected_estimate(_bernoulli(t), []), r"expected_estimate: params is empty"),
        (lambda t: st.expected_estimate(_bernoulli(t), "t"), r"expected_estimate: params must be a tensor"),
        (
            lambda t: st.expected_estimate(_bernoulli(t), t, surrogate_kwargs={"discout": 0.5}),
            r"expected_estimate: surrogate_kwargs has unknown key\(s\) \['discout'\]",
        ),
        (
            lambda t: st.expected_estimate(_bernoulli(t), t, graph_kwargs={"stric": True}),
            r"expected_estimate: graph_kwargs has unknown key\(s\) \['stric'\]",
        ),
        (
            lambda t: st.expected_estimate(_bernoulli(t), t, graph_kwargs=[("strict", True)]),
            r"expected_estimate: graph_kwargs must be a dict",
        ),
        (
            lambda t: st.expected_estimate(_bernoulli(t), t, graph_kwargs={"intervene": lambda *a: None}),
            r"expected_estimate: graph_kwargs has the key 'intervene'",
        ),
        (
            lambda t: st.expected_estimate(_bernoulli(t), t, keep="z"),
            r"keep must be a collection of node names.*\('z',\)",
        ),
        (lambda t: st.expected_estimate(_bernoulli(t), t, keep=(1,)), r"keep must hold node names \(str\), got 1"),
        (
            lambda t: st.expected_estimate(_bernoulli(t), t, keep=("y",)),
            r"expected_estimate: keep names node\(s\) \['y'\] that the program never drew; its nodes are \['z'\]",
        ),
        (
            lambda t: st.expected_estimate(_bernoulli(t), t, max_runs=0),
            r"expected_estimate: max_runs must be an int >= 1",
        ),
        (
            lambda t: st.expected_estimate(_bernoulli(t), t, seed=0.5),
            r"expected_estimate: seed must be an int, got 0.5",
        ),
        (
            lambda t: st.expected_estimate(lambda: _normal(t), t),
            r"expected_estimate: node 'x' has a Normal, which has no finite support.*keep=",
        ),
        (
            lambda t: st.expected_estimate(lambda: _gamma(t), t),
            r"expected_estimate: node 'g' has a Gamma, which has no finite support",
        ),
        (
            lambda t: st.expected_estimate(lambda: _own_graph(t), t),
            r"expected_estimate: the program opened its own scg.Graph",
        ),
    ],
)
def test_each_bad_argument_is_refused_by_name(call: Callable[[torch.Tensor], Any], message: str) -> None:
    with pytest.raises(scg.SCGError, match=message):
        call(_theta())


def test_too_many_runs_are_refused_before_any_is_differentiated() -> None:
    """4 Categorical(3) nodes with batch 2: 9^4 = 6561 runs, over max_runs=1000; refused along the
    first run's path (5 program calls), with the count."""
    theta = torch.zeros(4, 2, 3, dtype=torch.float64, requires_grad=True)
    calls = [0]

    def program() -> None:
        calls[0] += 1
        for i in range(4):
            z = scg.sample(Categorical(logits=theta[i]), name=f"z{i}")
            scg.cost(z.to(torch.float64), name=f"c{i}")

    with pytest.raises(
        scg.SCGError, match=r"expected_estimate: 6561 runs exceed max_runs=1000.*'z0': 3\^2 joint values"
    ):
        st.expected_estimate(program, theta, max_runs=1000)
    assert calls[0] <= 5, calls[0]


def test_a_program_that_draws_hidden_randomness_is_refused() -> None:
    theta = _theta()

    def program() -> None:
        z = scg.sample(Bernoulli(logits=theta), name="z")
        scg.cost(z * theta + torch.rand(()), name="c")

    with pytest.raises(scg.SCGError, match=r"expected_estimate: the program drew random numbers outside scg.sample"):
        st.expected_estimate(program, theta)


def test_a_node_of_coupled_samples_is_refused_unless_kept() -> None:
    """DisARM's two samples are an antithetic pair: enumerated as independent draws, weighted by
    the product of their probabilities, its exact mean came out as d/dθ (0.140, 0.366) against
    the exact (0.244, 0.588), an unbiased estimator reported biased. Refused, naming the node;
    kept, it is drawn as its estimator draws it."""
    th = torch.tensor([0.3, -0.5], dtype=torch.float64, requires_grad=True)

    def program() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z", n=2, estimator=scg.estimators.DisARM())
        scg.cost(z * torch.tensor([1.0, 2.5], dtype=torch.float64), name="c")

    with pytest.raises(
        scg.SCGError, match=r"expected_estimate: stochastic node 'z'.*DisARM\(\).*coupled.*keep=\('z',\)"
    ):
        st.expected_estimate(program, [th])
    (mean,) = st.expected_estimate(program, [th], keep=("z",))
    assert bool(torch.isfinite(mean).all())
