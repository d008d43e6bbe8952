"""scg/credit/signals.py: the learning signals a surrogate weights the scores with (sample weights ω,
baselines)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli, Categorical

import scg
import scg.testing as st
from scg.baselines import Baseline, BaselineResult, Constant
from scg.graph.nodes import Node, SampleInfo
from scg.testing import expected_estimate


def _sampled_with_cost_baseline(theta: torch.Tensor) -> None:
    z = scg.sample(Bernoulli(logits=theta), n=2, name="z")  # (2, 2): a sample dimension
    scg.cost((z - 0.3) ** 2 * 3.0 + 1.0, name="c", baseline=Constant(2.0))


@pytest.mark.parametrize(
    "kwargs", [{}, {"dice": True}, {"dice_lambda": 1.0}, {"dice_lambda": 0.5}], ids=["default", "dice", "1.0", "0.5"]
)
def test_dice_with_a_cost_baseline_and_a_sample_dimension_is_unbiased(kwargs: dict[str, Any]) -> None:
    """A cost group's ``raw`` is ω ⊙ c (its sample weights applied, as ``target``'s are), so that
    DiCE's node baseline Ĉ(raw) − Ĉ(target) = Σ ω b_c does not depend on the sample. With raw left
    unweighted it is (1 − ω) c + ω b, a function of the node's own sample: dice=True and dice_lambda
    were biased (the estimator's mean [0, 0] against the exact gradient [0.293, 0.288])."""
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)

    def program() -> None:
        _sampled_with_cost_baseline(theta)

    (exact,) = st.exact_gradient(program, [theta])
    assert float(exact.abs().min()) > 0.1
    (mean,) = expected_estimate(program, [theta], surrogate_kwargs=kwargs)
    torch.testing.assert_close(mean, exact, rtol=1e-9, atol=1e-12)


class _LiveBaseline(Baseline):
    """A user baseline whose value is computed from a parameter (it requires grad)."""

    def __init__(self, w: torch.Tensor) -> None:
        self.w = w

    def __call__(self, nodes: Sequence[Node], targets: torch.Tensor, info: Sequence[SampleInfo]) -> BaselineResult:
        return BaselineResult(self.w * torch.ones((), dtype=targets.dtype))


def test_a_baseline_value_that_requires_grad_is_detached() -> None:
    """Algorithm 1 subtracts ⊥b_v: the surrogate detaches a baseline's value whatever the baseline
    returns (``apply_baselines``). A value kept live adds −log p · ∇b to the gradient of whatever b
    is computed from (here θ itself: a biased gradient), so the gradient must be the one of the
    same value given as a constant."""
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)

    def grad(baseline: Baseline) -> torch.Tensor:
        torch.manual_seed(0)
        with scg.Graph() as g:
            z = scg.sample(Bernoulli(logits=theta), name="z", baseline=baseline)
            scg.cost(z * 2.0 + 1.0, name="c")
        return torch.autograd.grad(g.surrogate_loss(), [theta])[0]

    live = grad(_LiveBaseline(theta.sum() * 0.5 + 1.0))
    fixed = grad(Constant(float(theta.detach().sum() * 0.5 + 1.0)))
    torch.testing.assert_close(live, fixed)


class _LiveScale(Baseline):
    """A user baseline of value 0 whose scale is computed from a parameter (it requires grad)."""

    def __init__(self, w: torch.Tensor) -> None:
        self.w = w

    def __call__(self, nodes: Sequence[Node], targets: torch.Tensor, info: Sequence[SampleInfo]) -> BaselineResult:
        return BaselineResult(torch.zeros((), dtype=targets.dtype), scale=self.w * torch.ones((), dtype=targets.dtype))


def test_a_baseline_scale_that_requires_grad_is_detached() -> None:
    """The signal is (Ĉ − b)·⊥scale: a scale kept live adds log p · (Ĉ − b) · ∇scale to the gradient
    of whatever it is computed from (here θ), so the gradient must be the one of the same scale
    detached."""
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)

    def grad(scale: torch.Tensor) -> torch.Tensor:
        torch.manual_seed(0)
        with scg.Graph() as g:
            z = scg.sample(Bernoulli(logits=theta), name="z", baseline=_LiveScale(scale))
            scg.cost(z * 2.0 + 1.0, name="c")
        return torch.autograd.grad(g.surrogate_loss(), [theta])[0]

    live = theta.sum() * 0.5 + 1.0
    torch.testing.assert_close(grad(live), grad(live.detach()))


PER_SLICE = torch.tensor([0.0, 5.0, -3.0], dtype=torch.float64)


def _enumerated_after_a_score_node(theta: torch.Tensor, baseline: Any, upstream: bool = True) -> None:
    """u ~ Bern(θ3) scored; z ~ Cat(θ[:3] (+ u·(2, −1, 0))) enumerated; c = t[z]² + u, with a cost
    baseline."""
    u = scg.sample(Bernoulli(logits=theta[3]), name="u")
    shift = u * torch.tensor([2.0, -1.0, 0.0], dtype=theta.dtype) if upstream else 0.0
    z = scg.sample(Categorical(logits=theta[:3] + shift), name="z", estimator=scg.estimators.Enumerate())
    scg.cost(torch.tensor([1.0, -2.0, 3.0], dtype=theta.dtype)[z] ** 2 + u, name="c", baseline=baseline())


@pytest.mark.parametrize(
    "baseline",
    [lambda: Constant(PER_SLICE), lambda: scg.baselines.SelfCritical(lambda node: PER_SLICE)],
    ids=["Constant", "SelfCritical"],
)
@pytest.mark.parametrize("kwargs", [{}, {"dice": True}], ids=["default", "dice"])
def test_a_cost_baseline_that_differs_between_an_enumeration_s_slices_is_refused(
    baseline: Any, kwargs: dict[str, Any]
) -> None:
    # u's credit is Σ_s p(z_s | u)(c_s − b_s): with b_s not all equal, Σ_s p(z_s | u) b_s depends
    # on u (E[ĝ_u] was −0.4449 against the exact −0.4605)
    theta = torch.tensor([0.3, -0.2, 0.5, 0.4], dtype=torch.float64, requires_grad=True)
    with pytest.raises(scg.SCGError, match=r"of cost node 'c'.*per slice of the enumerated stochastic node 'z'"):
        expected_estimate(
            lambda: _enumerated_after_a_score_node(theta, baseline), [theta], keep=("z",), surrogate_kwargs=kwargs
        )


@pytest.mark.parametrize(
    ("baseline", "upstream"),
    [
        (lambda: Constant(PER_SLICE), False),  # (z drawn from no score node: p(z_s) does not depend on u)
        (lambda: Constant(2.0), True),
        (lambda: scg.baselines.SelfCritical(torch.tensor(1.5, dtype=torch.float64)), True),  # (broadcast over z)
        (lambda: scg.baselines.EMA(0.5, init=1.0), True),
    ],
    ids=["per-slice-no-upstream", "scalar", "self-critical", "ema"],
)
def test_a_cost_baseline_equal_on_an_enumeration_s_slices_stays_exactly_unbiased(baseline: Any, upstream: bool) -> None:
    theta = torch.tensor([0.3, -0.2, 0.5, 0.4], dtype=torch.float64, requires_grad=True)

    def program() -> None:
        _enumerated_after_a_score_node(theta, baseline, upstream)

    (mean,) = expected_estimate(program, [theta], keep=("z",))
    torch.testing.assert_close(mean, st.exact_gradient(program, [theta])[0], rtol=1e-9, atol=1e-12)


def test_a_per_slice_cost_baseline_is_refused_beside_another_nodes_sample_dimension() -> None:
    """The check runs when any of the cost's sample dimensions is an enumeration, not only when
    all are: w ~ Bern drawn with n=2 after the enumerated z, the cost (2_w, 3_z) with a baseline
    per slice of z (read only for all-enumerated layouts, it was accepted with d/dθ_u −0.1955
    against the exact −0.2111: a mutation sweep)."""
    theta = torch.tensor([0.3, -0.2, 0.5, 0.4], dtype=torch.float64, requires_grad=True)

    def program(baseline: Any) -> None:
        u = scg.sample(Bernoulli(logits=theta[3]), name="u")
        shift = u * torch.tensor([2.0, -1.0, 0.0], dtype=theta.dtype)
        z = scg.sample(Categorical(logits=theta[:3] + shift), name="z", estimator=scg.estimators.Enumerate())
        w = scg.sample(Bernoulli(logits=theta[3] - 0.5), name="w", n=2)
        t = torch.tensor([1.0, -2.0, 3.0], dtype=theta.dtype)
        scg.cost(t[z] ** 2 + w[:, None] + u, name="c", baseline=baseline)

    (mean,) = expected_estimate(lambda: program(Constant(2.0)), [theta], keep=("z",))
    torch.testing.assert_close(mean, st.exact_gradient(lambda: program(None), [theta])[0], rtol=1e-9, atol=1e-12)
    with pytest.raises(scg.SCGError, match=r"of cost node 'c'.*per slice of the enumerated stochastic node 'z'"):
        expected_estimate(lambda: program(Constant(PER_SLICE)), [theta], keep=("z",))
