"""``scg.testing.compare``: a scale-aware z-test (issue 24, item 6).

A coordinate is deterministic only when its estimates agree up to rounding; any real spread is
z-tested, however small the gradient. (The old rule called every coordinate with a standard
error below ``atol`` = 1e-6 deterministic: a correct estimator with small gradients got z = inf,
and a biased one with z = 0 was not tested at all.)
"""

from __future__ import annotations

import math

import torch
from torch.distributions import Categorical

import scg
import scg.testing as st

N = 2000


def _column(mean: float, se: float) -> torch.Tensor:
    """N estimates whose sample mean and standard error are exactly ``mean`` and ``se``."""
    w = torch.randn(N, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    w = (w - w.mean()) / w.std()
    return mean + se * math.sqrt(N) * w


def test_a_small_gradient_within_its_standard_error_passes() -> None:
    """se = 8e-7 < atol and |mean − g| = 1.5 se = 1.2e-6 > atol: z must be 1.5, not inf."""
    est = _column(3e-6, 8e-7)[:, None]
    report = st.compare(est, torch.tensor([3e-6 - 1.5 * 8e-7], dtype=torch.float64))
    assert report.passed, str(report)
    torch.testing.assert_close(report.z, torch.tensor([1.5], dtype=torch.float64))


def test_a_small_gradient_off_by_ten_standard_errors_is_rejected() -> None:
    """se = 5e-8, |mean − g| = 5e-7 < atol: a bias of 10 standard errors must be seen."""
    est = _column(1e-6, 5e-8)[:, None]
    report = st.compare(est, torch.tensor([1e-6 - 5e-7], dtype=torch.float64))
    assert not report.passed
    torch.testing.assert_close(report.z, torch.tensor([10.0], dtype=torch.float64))


def test_deterministic_coordinates_match_to_atol_up_to_rounding() -> None:
    g = torch.tensor([0.1, -0.7, 0.0], dtype=torch.float32)
    # the same value computed differently per run: a few ulps of spread
    est = g + torch.tensor([1, -1, 2, 0], dtype=torch.float32)[:, None] * torch.finfo(torch.float32).eps * g
    assert st.compare(est, g.double()).passed
    report = st.compare(est, (g + torch.tensor([0.0, 1e-3, 0.0])).double())
    assert not report.passed and report.worst == 1 and math.isinf(float(report.z[1]))


def test_score_function_with_tiny_costs_is_tested_not_waved_through() -> None:
    """A correct estimator with gradients ~1e-5 passes with finite z; against a 1.3x exact
    gradient (a biased twin) it is rejected, which the old rule could not see (z = 0)."""
    theta = torch.tensor([0.3, -0.1, 0.2], dtype=torch.float64, requires_grad=True)
    tab = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)

    def run(th: torch.Tensor) -> None:
        z = scg.sample(Categorical(logits=th), name="z")
        scg.cost(1e-5 * tab[z], name="c")

    exact = st.exact_gradient(lambda: run(theta[None]), [theta])[0]
    est = st.estimate_gradients_batched(run, [theta], 8000, particles=8000)
    report = st.compare(est, exact)
    assert report.passed and bool(torch.isfinite(report.z).all()) and float(report.z.abs().max()) > 0.1, str(report)
    assert not st.compare(est, 1.3 * exact).passed


def test_one_infinite_value_fails_its_coordinate_and_lets_the_others_be_tested() -> None:
    """An inf made the rounding scale infinite: every coordinate was "deterministic" and passed, a
    bias of 5 included."""
    est = torch.stack([_column(5.0, 0.03), _column(1.0, 0.03)], 1)
    est[0, 1] = math.inf
    report = st.compare(est, torch.tensor([0.0, 1.0]))
    assert not report.passed and math.isinf(float(report.z[1])) and abs(float(report.z[0])) > 100
    same = torch.full((N, 1), math.inf, dtype=torch.float64)  # (every estimate the exact inf: a match)
    assert st.compare(same, torch.tensor([math.inf])).passed


def test_the_critical_value_of_a_tiny_alpha_is_finite() -> None:
    """1 − alpha/(2d) rounded to 1 for alpha/(2d) below 1e-16: an infinite critical value passed anything."""
    report = st.compare(_column(5.0, 0.0).reshape(N, 1) + 0.0, torch.tensor([0.0]), alpha=1e-17)
    assert math.isfinite(report.critical) and abs(report.critical - 8.5739) < 1e-3 and not report.passed


def test_a_deterministic_coordinate_matches_to_its_own_rounding() -> None:
    """float32: a coordinate missing its whole gradient (always 0 against 0.005) passed beside one of
    1000, whose rounding set the tolerance of both."""
    est = torch.stack([torch.full((N,), 1000.0), torch.zeros(N)], 1).float()
    assert not st.compare(est, torch.tensor([1000.0, 0.005])).passed
    assert st.compare(est, torch.tensor([1000.0, 0.0])).passed


def test_a_random_coordinate_below_the_problems_rounding_is_still_z_tested() -> None:
    """float32: a score-function coordinate of about 0.01 beside a deterministic one of 1e4 varied
    by less than the problem's rounding (64 eps 1e4), was called deterministic and passed with a
    bias as large as its spread (mean 0.0049 against 0.0025: z of 15.7). Its twin without the
    bias passes, and a coordinate zero in exact arithmetic whose estimates are rounding noise of
    the problem's scale is not z-tested into a failure."""
    gen = torch.Generator().manual_seed(0)
    noise = torch.bernoulli(torch.full((N,), 0.5), generator=gen) * 0.01 - 0.005  # (N,) mean 0, sd 0.005
    exact = torch.tensor([1e4, 0.0025])
    fair = torch.stack([torch.full((N,), 1e4), 0.0025 + noise], 1).float()
    biased = torch.stack([torch.full((N,), 1e4), 0.0049 + noise], 1).float()
    assert st.compare(fair, exact).passed
    report = st.compare(biased, exact)
    assert not report.passed and report.worst == 1 and 10 < abs(float(report.z[1])) < math.inf
    rounding = torch.stack([torch.full((N,), 1.0), 1e-18 + noise.double() * 1e-19], 1)  # (float64 noise)
    assert st.compare(rounding, torch.tensor([1.0, -3e-18], dtype=torch.double)).passed


def _rare(scale: float, logits: torch.Tensor) -> None:
    z = scg.sample(Categorical(logits=logits), name="z")  # category 1 has probability 9e-4
    scg.cost(scale * (z == 1).double(), name="c")


def test_a_rare_event_never_drawn_is_drawn_for_before_a_bias_is_declared() -> None:
    """The score function is unbiased, but at seed 2 its 1000 estimates never draw category 1
    (probability 0.40 at each seed): every estimate was 0 against an exact -0.91, z = inf, and it
    was rejected at 8 of 20 seeds (helper-92). 15 000 more estimates draw it."""
    logits = torch.tensor([0.0, -7.0], dtype=torch.float64, requires_grad=True)
    exact = st.exact_gradient(lambda: _rare(1000.0, logits), [logits])
    report = st.check_unbiased(
        lambda: _rare(1000.0, logits),
        [logits],
        seed=2,
        exact=exact,
        batched=lambda lg: _rare(1000.0, lg),
        particles=4000,
    )
    assert report.passed, str(report)
    assert report.n == 16000  # (the first 1000 never varied)


def test_a_deterministic_bias_is_still_rejected_and_said_to_never_vary() -> None:
    """A biased twin whose estimates are all equal: the 15 000 more estimates do not save it."""
    logits = torch.tensor([0.0, -7.0], dtype=torch.float64, requires_grad=True)
    exact = [torch.tensor([-0.5, 0.5], dtype=torch.float64)]  # (not the program's gradient, 0)
    report = st.check_unbiased(lambda: _rare(0.0, logits), [logits], n=50, exact=exact)
    assert not report.passed and report.n == 800
    assert "never varied" in str(report)
