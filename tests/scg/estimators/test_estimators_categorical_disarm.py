"""CategoricalDisARM (DisARM's stick-breaking form, antithetic pairs of categories): unbiased
against exact enumeration with causal credit across a scored node after it, a twin with the
correction for sticks only one member of the pair reached dropped is caught, K = 2 is DisARM on
the Bernoulli, and its variance is below the score function's at the same two evaluations."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _estimators_util import check, estimates
from torch.distributions import Bernoulli, Categorical, Independent, OneHotCategorical

import scg
import scg.testing as st
from scg.estimators import CategoricalDisARM, DisARM, ScoreFunction
from scg.estimators.disarm_categorical import stick_logits, stick_weights

TABLE = torch.tensor([1.5, -2.0, 0.7, 3.0, -0.4], dtype=torch.float64)


def theta() -> torch.Tensor:
    return torch.tensor([0.4, -1.1, 0.9, 0.3, -0.2, 0.6], dtype=torch.float64, requires_grad=True)


def program(estimator: Any = None, n: int | None = None):  # type: ignore[no-untyped-def]
    """z ~ Cat(softmax(θ[:5])); y ~ Bern(σ(θ5 + table[z])) scored; a cost that couples z, θ and y."""

    def run(th: torch.Tensor) -> None:
        est = {} if estimator is None else {"estimator": estimator}
        z = scg.sample(Categorical(logits=th[:, :5]), name="z", n=n, **est)
        t = TABLE[z]
        y = scg.sample(Bernoulli(logits=th[:, 5] + t), name="y", estimator=ScoreFunction())
        scg.cost((t + th[:, 5]) ** 2 + 2.0 * y * t, name="c")

    return run


class DroppedMiddleSticks(CategoricalDisARM):
    """The weights of the sticks between the two stops (reached by one member only) dropped."""

    def centred(self, alpha: torch.Tensor, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        k = torch.arange(alpha.shape[-1])
        lo, hi = torch.minimum(z1, z2).unsqueeze(-1), torch.maximum(z1, z2).unsqueeze(-1)
        return torch.where((k > lo) & (k < hi), 0.0, stick_weights(alpha, z1, z2))


def _check_unbiased(estimator: CategoricalDisARM, n: int) -> st.UnbiasedReport:
    """``scg.testing.check_unbiased``: 6000 particle-batched estimates against enumeration."""
    th = theta()
    plain = program()
    return st.check_unbiased(
        lambda: plain(th.unsqueeze(0)), [th], 6000, seed=11, batched=program(estimator, n), particles=2000
    )


@pytest.mark.parametrize("n", [2, 4])
def test_unbiased(n: int) -> None:
    report = _check_unbiased(CategoricalDisARM(), n)
    assert report.passed, str(report)


def test_broken_twin_is_caught() -> None:
    # measured (seed 11): the twin's max |z| 24.0, CategoricalDisARM's 1.25 (critical 3.76)
    report = _check_unbiased(DroppedMiddleSticks(), 2)
    assert not report.passed, str(report)


def test_pairs_have_the_categorical_marginals_and_k2_is_bernoulli_disarm() -> None:
    th = theta().detach()[:5]
    torch.manual_seed(0)
    z = CategoricalDisARM().draw(Categorical(logits=th.expand(20000, 5)), torch.Size([2]))
    p = th.softmax(-1)
    for member in z:
        freq = torch.bincount(member, minlength=5).double() / member.numel()
        assert float((freq - p).abs().max()) < 4 * float((p * (1 - p) / member.numel()).sqrt().max()), (freq, p)
    # K = 2: one stick with α = logit p₀, and the weights are DisARM's on b = [z = 0]
    logits = torch.tensor([[0.7, -0.4]], dtype=torch.float64).expand(4, 2)
    alpha = stick_logits(logits)
    torch.testing.assert_close(alpha[:, 0], logits[:, 0] - logits[:, 1])
    z1, z2 = torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 0, 1])
    b1, b2 = (z1 == 0).double(), (z2 == 0).double()
    got = stick_weights(alpha, z1, z2)[:, 0]
    torch.testing.assert_close(got, DisARM().centred(alpha[:, 0], b1, b2))


def test_onehot_and_independent_nodes_are_unbiased() -> None:
    table = torch.tensor([[1.0, -2.0, 0.5], [0.3, 2.0, -1.0]], dtype=torch.float64)

    def run(th: torch.Tensor, estimator: Any = None, n: int | None = None) -> None:
        logits = th.view(-1, 2, 3)
        if estimator is None:  # enumerated coordinate by coordinate for the exact gradient
            z = scg.sample(OneHotCategorical(logits=logits), name="z", plates=1)
        else:
            z = scg.sample(Independent(OneHotCategorical(logits=logits), 1), name="z", n=n, estimator=estimator)
        s = (z * table).sum((-1, -2))
        scg.cost((s - 0.5) ** 2 + z[..., 0, 0] * z[..., 1, 2] * 4.0, name="c")

    th = torch.tensor([0.2, -0.5, 0.4, 1.0, 0.0, -0.7], dtype=torch.float64, requires_grad=True)
    want = st.exact_gradient(lambda: run(th.unsqueeze(0)), [th])[0]
    got = estimates(lambda t: run(t, CategoricalDisARM(), 2), th, 6000, seed=3)
    report = check(got, want)
    assert report.passed, str(report)


def test_variance_below_score_function_with_leave_one_out() -> None:
    th = theta()
    var = {
        name: estimates(program(est, 2), th, 3000, seed=12)[:, :5].var(0).sum()
        for name, est in [("disarm", CategoricalDisARM()), ("sf2", ScoreFunction(scg.baselines.LeaveOneOut()))]
    }
    # measured (seed 12): CategoricalDisARM 18.1, score function + leave-one-out (n=2) 35.8
    assert float(var["disarm"]) < 0.7 * float(var["sf2"]), var


def test_errors_name_the_node() -> None:
    logits = torch.zeros(3, requires_grad=True)
    with scg.Graph():
        with pytest.raises(scg.SCGError, match=r"name='z'.*n=2.*got n=None"):
            scg.sample(Categorical(logits=logits), name="z", estimator=CategoricalDisARM())
        with pytest.raises(scg.SCGError, match=r"name='b'.*supports Categorical.*not Bernoulli"):
            scg.sample(Bernoulli(logits=logits), name="b", n=2, estimator=CategoricalDisARM())
    with scg.Graph() as g:
        z = scg.sample(
            Categorical(logits=logits), name="z", n=2, estimator=CategoricalDisARM(), baseline=scg.baselines.EMA()
        )
        scg.cost(z.double(), name="c")
    g.surrogate_loss().backward()  # a baseline equal on both members of a pair is allowed
    with scg.Graph() as g:
        z = scg.sample(
            Categorical(logits=logits),
            name="z",
            n=2,
            estimator=CategoricalDisARM(),
            baseline=scg.baselines.LeaveOneOut(),
        )
        scg.cost(z.double(), name="c")
    with pytest.raises(scg.SCGError, match=r"CategoricalDisARM\(\) on .*'z'.*LeaveOneOut"):
        g.surrogate_loss()
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=logits), name="z", n=2, estimator=CategoricalDisARM())
        scg.cost(z.double(), name="c")
    with pytest.raises(scg.SCGError, match=r"dice=True.*CategoricalDisARM"):
        g.surrogate_loss(dice=True)


def test_one_category_draws_it_and_gives_no_gradient() -> None:
    """K = 1 (no sticks) crashed inside torch (argmax over an empty dimension)."""
    logits = torch.zeros(2, 1, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=logits), name="z", n=2, estimator=CategoricalDisARM())
        scg.cost(z.double() + 1.0, name="c")
    assert z.shape == (2, 2) and not z.any()
    (grad,) = torch.autograd.grad(g.surrogate_loss(), logits, allow_unused=True, materialize_grads=True)
    assert not grad.any()


@pytest.mark.parametrize("estimator", [lambda: CategoricalDisARM(), lambda: scg.estimators.ARSM()])
def test_a_cost_reduced_over_the_coupled_slices_is_refused(estimator: Any) -> None:
    logits = torch.tensor([0.3, -0.5, 0.9], requires_grad=True)
    est = estimator()
    with scg.Graph():
        z = scg.sample(
            Categorical(logits=logits), name="z", n=2 if isinstance(est, CategoricalDisARM) else 4, estimator=est
        )
        with pytest.raises(scg.SCGError, match=rf"reduced=.*'z'.*{type(est).__name__}\(\), whose \d+ slices"):
            scg.cost(z.double().mean(0), name="c", reduced=z)


def test_declared_and_cached_structure_give_the_same_estimate(assert_same_gradient_in_every_structure: Any) -> None:
    th = theta()

    def run() -> None:
        program(CategoricalDisARM(), 2)(th.unsqueeze(0).expand(64, 6))

    assert_same_gradient_in_every_structure(run, [th])
