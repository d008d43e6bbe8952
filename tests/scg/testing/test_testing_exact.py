"""``scg.testing.exact_gradient``: runs counted before enumerating, and quadrature that says when
it is not exact (issue 24, item 6)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Normal

import scg
import scg.testing as st


def test_a_batch_too_large_to_enumerate_is_refused_with_its_count_before_enumerating() -> None:
    """6 Categorical(3) nodes with batch 2: 9^6 = 531441 runs. Refused after the first run's
    path (7 program calls), not after enumerating 200000 runs."""
    theta = torch.zeros(6, 2, 3, dtype=torch.float64, requires_grad=True)
    calls = [0]

    def program() -> None:
        calls[0] += 1
        total = torch.zeros(2, dtype=torch.float64)
        for i in range(6):
            z = scg.sample(Categorical(logits=theta[i]), name=f"z{i}")
            total = total + z.to(torch.float64)
        scg.cost(total, name="c")

    with pytest.raises(scg.SCGError, match=r"531441 runs exceed max_runs=200000.*'z0': 3\^2 joint values"):
        st.exact_gradient(program, [theta])
    assert calls[0] <= 7, calls[0]


def _normal(cost: str) -> tuple[torch.Tensor, object]:
    mu = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)

    def program() -> None:
        x = scg.sample(Normal(mu, 1.0), name="x", estimator=scg.ScoreFunction())
        c = (x > 0.5).to(torch.float64) if cost == "step" else x**3 - 2 * x**2
        scg.cost(c, name="c")

    return mu, program


def test_quadrature_of_a_step_cost_warns_that_it_is_not_exact() -> None:
    """d/dμ P(x > 0.5) = φ(0.3) = 0.3814; 48 points give 0.3628 (and 24 give 0.4059)."""
    mu, program = _normal("step")
    with pytest.warns(st.QuadratureWarning, match="48 points give 0.3628.*24 give 0.4058.*not smooth"):
        (g,) = st.exact_gradient(program, [mu])
    assert abs(float(g) - math.exp(-0.045) / math.sqrt(2 * math.pi)) > 0.01  # indeed not exact


def test_quadrature_of_a_polynomial_cost_is_exact_and_silent() -> None:
    """E[x³ − 2x²] = μ³ + 3μ − 2(μ² + 1): derivative 3μ² + 3 − 4μ, exactly, no warning."""
    mu, program = _normal("polynomial")
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.QuadratureWarning)
        (g,) = st.exact_gradient(program, [mu], quadrature=8)
    torch.testing.assert_close(g, torch.tensor(3 * 0.04 + 3 - 0.8, dtype=torch.float64))


_TABLE = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)


@pytest.mark.parametrize(
    ("estimator", "n"),
    [
        (lambda: scg.estimators.RaoBlackwellized(1), None),
        (lambda: scg.estimators.UnorderedSet(), 2),
        (lambda: scg.estimators.IndeCateR(), None),
        (lambda: scg.estimators.Enumerate(), None),
    ],
)
def test_the_exact_gradient_does_not_depend_on_the_programs_estimators(estimator, n) -> None:  # type: ignore[no-untyped-def]
    """Estimators that draw their own values (a set, the support, points) drew them before the
    enumeration's intervention was asked: the "exact" gradient was one random estimate (a
    different one per seed), and check_unbiased rejected correct estimators (max |z| = 70.7)."""
    th = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64, requires_grad=True)

    def program(est: scg.estimators.Estimator | None, k: int | None) -> st.Program:
        def run() -> None:
            z = scg.sample(Categorical(logits=th), name="z", estimator=est, n=k)
            scg.cost(_TABLE[z] ** 2, name="c")

        return run

    reference = st.exact_gradient(program(None, None), th)[0]
    for seed in (0, 1):
        torch.manual_seed(seed)
        torch.testing.assert_close(st.exact_gradient(program(estimator(), n), th)[0], reference)


def test_an_intervention_replaces_an_enumerating_estimators_draw() -> None:
    """A greedy rerun of a node drawn by Enumerate got the whole support, not the mode."""
    logits = torch.tensor([0.1, 2.0, -1.0])
    with scg.Graph(intervene=scg.estimators.greedy) as g:
        z = scg.sample(Categorical(logits=logits), name="z", estimator=scg.estimators.Enumerate())
        scg.cost(_TABLE[z], name="c")
    assert z.shape == () and int(z) == 1 and not g.node("z").enumerated  # type: ignore[attr-defined]


def test_a_sample_edited_in_place_is_enumerated_from_its_own_copy() -> None:
    """Each run shared the forced value: a program editing its sample in place changed the later
    runs' values (E = 4.84 against the true 2.95)."""
    th = torch.tensor([0.3, -0.5], dtype=torch.float64, requires_grad=True)

    def program() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z")
        z.mul_(3.0)
        scg.cost(z.sum(), name="c")

    want = 3.0 * torch.sigmoid(th).sum()
    torch.testing.assert_close(st.exact_expectation(program), want)


def test_a_program_catching_exceptions_around_a_draw_is_still_enumerated() -> None:
    th = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)

    def program() -> None:
        try:
            z = scg.sample(Bernoulli(logits=th), name="z")
        except Exception:  # (a fallback of the program's own must not see the enumeration's control flow)
            z = torch.zeros(1, dtype=torch.float64)
        scg.cost(5.0 * z.sum(), name="c")

    torch.testing.assert_close(st.exact_expectation(program), 5.0 * torch.sigmoid(th).sum())


def test_a_value_of_probability_zero_with_an_infinite_cost_is_left_out() -> None:
    """0 · inf was NaN: the exact value and gradient of a correct program."""
    th = torch.tensor([0.3, -0.2], dtype=torch.float64, requires_grad=True)

    def program() -> None:
        logits = torch.cat([th, torch.tensor([-math.inf], dtype=torch.float64)])
        z = scg.sample(Categorical(logits=logits), name="z")
        scg.cost(torch.tensor([1.0, 2.0, math.inf], dtype=torch.float64)[z], name="c")

    value = st.exact_expectation(program)
    p = torch.softmax(th, 0)
    torch.testing.assert_close(value, p[0] + 2.0 * p[1])
    assert bool(torch.isfinite(st.exact_gradient(program, [th])[0]).all())


def test_a_binomial_of_several_total_counts_is_refused_by_name() -> None:
    def program() -> None:
        z = scg.sample(torch.distributions.Binomial(torch.tensor([2.0, 3.0]), probs=torch.tensor([0.3, 0.6])), name="z")
        scg.cost(z.sum(), name="c")

    with pytest.raises(scg.SCGError, match=r"Binomial whose total_count differs"):
        st.exact_expectation(program)


def test_randomness_outside_scg_sample_is_refused() -> None:
    """A draw scg does not force (a hidden torch.bernoulli, dropout) made the "exact" values differ
    from call to call (0.58, 0.60, 0.29), or dropped a parameter's whole gradient."""
    th = torch.tensor([0.3, 0.2], dtype=torch.float64, requires_grad=True)

    def program() -> None:
        z = scg.sample(Bernoulli(logits=th[:1]), name="z")
        hidden = torch.bernoulli(torch.sigmoid(th[1:]).detach())
        scg.cost((z + hidden).sum(), name="c")

    with pytest.raises(scg.SCGError, match=r"drew random numbers outside scg.sample"):
        st.exact_expectation(program)


def test_a_program_opening_its_own_graph_is_told_the_helpers_open_it() -> None:
    """Its draws were not forced, and the refusal blamed randomness outside scg.sample."""
    th = torch.zeros(3, requires_grad=True)

    def program() -> None:
        with scg.Graph():
            scg.cost(scg.sample(Categorical(logits=th), name="z").float(), name="c")

    with pytest.raises(scg.SCGError, match=r"the program opened its own scg.Graph; the helpers open the graph"):
        st.exact_gradient(program, th)


def test_a_node_drawn_under_no_grad_is_refused_not_agreed_with() -> None:
    """The oracle scored the forced value under the program's no_grad too, so it lost the same
    score term as the surrogate (1.0 against d/dθ E = 1 + 3p(1−p) = 1.73) and check_unbiased
    agreed with the biased estimate."""
    th = torch.tensor(0.3, requires_grad=True)

    def program() -> None:
        with torch.no_grad():
            a = scg.sample(Bernoulli(logits=th), name="a")
        scg.cost(3.0 * a + th, name="c")

    with pytest.raises(scg.SCGError, match=r"node 'a' is drawn under torch.no_grad\(\)"):
        st.exact_gradient(program, th)


def _arm_program(th: torch.Tensor, hidden: bool = False) -> Any:
    def program() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z", n=2, estimator=scg.estimators.ARM())
        scg.cost((z - 0.3) ** 2 * 3.0 + (torch.rand(()) if hidden else 0.0), name="c")

    return program


def test_an_arm_node_s_own_noise_is_not_taken_for_hidden_randomness() -> None:
    """ARM scores a value by redrawing its u given the pair, forced values included: that moved
    torch's generator in every run of the enumeration, and exact_gradient, exact_expectation,
    check_unbiased and assert_unbiased refused every program with an ARM node ("drew random numbers
    outside scg.sample"). The noise is scg's own, and the objective (each slice of the pair is
    distributed as the node, and its costs are per slice) does not depend on it: the exact
    gradient is 3σ'(θ)(0.7² − 0.3²), and the estimator passes the z-test against it.
    expected_estimate refuses the forced pair for its coupling, the real reason. A hidden draw in
    the same program is still refused, and an ordinary graph's ARM still redraws its u."""
    th = torch.tensor([0.3, -0.2], dtype=torch.float64, requires_grad=True)
    s = torch.sigmoid(th.detach())
    (grad,) = st.exact_gradient(_arm_program(th), [th])
    torch.testing.assert_close(grad, 3.0 * s * (1 - s) * 0.4, rtol=1e-12, atol=0.0)
    value = st.exact_expectation(_arm_program(th))
    torch.testing.assert_close(value.detach(), 3.0 * (s * 0.49 + (1 - s) * 0.09).sum(), rtol=1e-12, atol=0.0)
    st.assert_unbiased(_arm_program(th), [th], n=100, seed=1)
    with pytest.raises(scg.SCGError, match=r"stochastic node 'z'.*ARM\(\).*coupled.*keep=\('z',\)"):
        st.expected_estimate(_arm_program(th), [th])
    for check in (st.exact_expectation, lambda p: st.exact_gradient(p, [th])):
        with pytest.raises(scg.SCGError, match=r"drew random numbers outside scg.sample"):
            check(_arm_program(th, hidden=True))
    state = torch.random.get_rng_state()
    with scg.Graph(intervene=lambda name, step, dist, shape: torch.ones(2, 2, dtype=torch.float64)):
        _arm_program(th)()
    assert not torch.equal(state, torch.random.get_rng_state())
