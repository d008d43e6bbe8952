"""Baselines: EMA semantics and state, Learned baselines (training and Theorem 2), Constant."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Categorical

import scg
import scg.testing as st


def test_ema_subtracts_the_value_from_before_the_update() -> None:
    ema = scg.baselines.EMA(0.5, init=1.0)
    theta = torch.zeros(2, requires_grad=True)
    seen = []
    for _ in range(3):
        with scg.Graph() as g:
            z = scg.sample(Categorical(logits=theta), name="z", step=0, baseline=ema)
            c = scg.cost(z.float() * 0 + 3.0, name="c")
        before = float(ema.value("z", 0))
        grad = torch.autograd.grad(g.surrogate_loss(), theta)[0]
        lp_grad = torch.autograd.grad(Categorical(logits=theta).log_prob(z), theta)[0]
        torch.testing.assert_close(grad, lp_grad * (float(c) - before))
        seen.append(before)
    assert seen == [1.0, 2.0, 2.5]  # b <- b + 0.5 (3 - b)
    assert float(ema.value("z", 0)) == 2.75


def test_ema_state_dict_round_trip_and_per_step_keys() -> None:
    ema = scg.baselines.EMA(0.1)
    with scg.Graph() as g:
        for t in range(3):
            scg.cost(torch.tensor([1.0, 2.0]) * (t + 1), name="r", step=t, baseline=ema)
    g.surrogate_loss()
    values = [float(ema.value("r", t)) for t in range(3)]
    assert values == pytest.approx([0.15, 0.3, 0.45])
    other = scg.baselines.EMA(0.5)
    state = ema.state_dict()
    other.load_state_dict(state)
    assert [float(other.value("r", t)) for t in range(3)] == values and other.beta == 0.1
    twin = scg.baselines.EMA(0.5)
    twin.load_state_dict(state)
    with scg.Graph() as g:  # (the loaded table is updated in place: the state, and the twin, stay)
        scg.cost(torch.tensor([9.0, 9.0]), name="r", step=0, baseline=other)
    g.surrogate_loss()
    assert float(other.value("r", 0)) != values[0]
    assert float(twin.value("r", 0)) == values[0] and float(state["values"][0]) == values[0]


def test_learned_baseline_is_trained_by_regression_and_unbiased() -> None:
    torch.manual_seed(0)
    theta = torch.tensor([0.3, -0.1, 0.2], dtype=torch.float64, requires_grad=True)
    module = torch.nn.Linear(2, 1).double()
    learned = scg.baselines.Learned(module)
    features = torch.tensor([[1.0, -0.5]], dtype=torch.float64)

    def run(th: torch.Tensor) -> None:
        z = scg.sample(Categorical(logits=th), name="z", baseline=learned.given(features.expand(th.shape[0], 2)))
        scg.cost((z.to(th.dtype) - 0.5) ** 2 + 2.0, name="c")

    report = st.check_unbiased(lambda: run(theta[None]), [theta], n=4000, batched=run, particles=1000)
    assert report.passed, str(report)
    # Optimizer steps on the surrogate move the baseline toward the mean cost (20 steps: within 3%).
    opt = torch.optim.SGD(module.parameters(), lr=0.125)
    before = float(module(features).detach())
    for _ in range(20):
        with scg.Graph() as g:
            run(theta.detach()[None].expand(64, 3))
        opt.zero_grad()
        g.surrogate_loss().backward()
        opt.step()
    after = float(module(features).detach())
    target = float(st.exact_expectation(lambda: run(theta.detach()[None])))
    assert abs(after - target) < abs(before - target) / 4


def test_learned_baseline_value_of_surrogate_is_sum_of_costs() -> None:
    learned = scg.baselines.Learned(torch.nn.Linear(1, 1))
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=torch.zeros(4, 3)), name="z", baseline=learned.given(torch.ones(4, 1)))
        c = scg.cost(z.float() + 1.0, name="c")
    torch.testing.assert_close(g.surrogate_loss().detach(), c.sum())


def test_learned_baseline_inputs_must_not_depend_on_the_node() -> None:
    learned = scg.baselines.Learned(torch.nn.Linear(1, 1))
    with scg.Graph() as g:
        z0 = scg.sample(Categorical(logits=torch.zeros(4, 3)), name="z0")
        feats = z0.float()[:, None]
        bound = learned.given(feats)
        z1 = scg.sample(Categorical(logits=torch.zeros(4, 3)), name="z1", baseline=bound)
        scg.cost(z1.float(), name="c")
    g.surrogate_loss()  # z0 is upstream of z1: allowed

    # A cost baseline computed from a node that influences the cost biases that node.
    with scg.Graph() as g2:
        z = scg.sample(Categorical(logits=torch.zeros(4, 3)), name="z")
        feats = z.float()[:, None]
        scg.cost(z.float() * 2.0, name="c", baseline=learned.given(feats))
    with pytest.raises(scg.SCGError, match="baseline inputs of cost node 'c'.*stochastic node 'z'.*Theorem 2"):
        g2.surrogate_loss()


def test_constant_baseline_changes_gradient_by_score_times_constant() -> None:
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=theta), name="z", baseline=scg.baselines.Constant(2.0))
        c = scg.cost(z.float() + 1.0, name="c")
    grad = torch.autograd.grad(g.surrogate_loss(), theta)[0]
    lp = torch.autograd.grad(Categorical(logits=theta).log_prob(z), theta)[0]
    torch.testing.assert_close(grad, lp * (float(c) - 2.0))


class _Fixed(scg.baselines.Baseline):
    """A baseline returning a fixed value per row (NaN to test the check)."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __call__(self, nodes, targets, info):  # type: ignore[no-untyped-def]
        return scg.baselines.BaselineResult(torch.full_like(targets, self.value))


def test_non_finite_baseline_value_is_refused_naming_the_baseline_and_node() -> None:
    th = torch.zeros(3, requires_grad=True)
    with scg.Graph() as g:
        for t in range(3):  # one finite baseline per step, and a NaN one at step 1
            z = scg.sample(Categorical(logits=th), name="z", step=t, baseline=_Fixed(float("nan") if t == 1 else 0.5))
            scg.cost(z.float(), name="c", step=t)
    with pytest.raises(scg.SCGError, match=r"baseline .*_Fixed.* of stochastic node 'z' \(step 1.*non-finite"):
        g.surrogate_loss()


def test_a_non_finite_second_cost_baseline_is_refused() -> None:
    # with cost baselines the values are summed to be checked (no score sum covers them all): both
    # of two, not only the first
    th = torch.zeros(3, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=th), name="z")
        scg.cost(z.float(), name="c1", baseline=_Fixed(0.5))
        scg.cost(z.float() * 2.0, name="c2", baseline=_Fixed(float("nan")))
    with pytest.raises(scg.SCGError, match=r"baseline .*_Fixed.* of cost node 'c2'.*non-finite"):
        g.surrogate_loss()


@pytest.mark.parametrize("dice", [False, True])
def test_without_the_finiteness_check_a_non_finite_baseline_reaches_the_gradient(dice: bool) -> None:
    """``check_finite=False`` (the default surrogate and DiCE's): the NaN baseline value is not
    refused; it reaches θ's gradient through the score term of its node."""
    th = torch.zeros(3, requires_grad=True)
    with scg.Graph() as g:
        for t in range(3):
            z = scg.sample(Categorical(logits=th), name="z", step=t, baseline=_Fixed(float("nan") if t == 1 else 0.5))
            scg.cost(z.float(), name="c", step=t)
    (grad,) = torch.autograd.grad(g.surrogate_loss(check_finite=False, dice=dice), [th])
    assert torch.isnan(grad).all()


def test_baselines_shared_by_rows_that_are_not_consecutive_equal_separate_ones() -> None:
    """Rows of a node group whose baselines interleave (gathered, not sliced) get the same
    learning signals as the per-row result."""
    th = torch.tensor([0.2, -0.1, 0.4], requires_grad=True)
    shared, other = _Fixed(0.25), _Fixed(-1.0)
    grads = []
    for baselines in ([shared, other, shared, other], [_Fixed(0.25), _Fixed(-1.0), _Fixed(0.25), _Fixed(-1.0)]):
        torch.manual_seed(0)
        with scg.Graph() as g:
            for t, b in enumerate(baselines):
                z = scg.sample(Categorical(logits=th), name="z", step=t, baseline=b)
                scg.cost((z.float() - 1.0) ** 2, name="c", step=t)
        (grad,) = torch.autograd.grad(g.surrogate_loss(), [th])
        grads.append(grad)
    torch.testing.assert_close(grads[0], grads[1])
