"""ARM and DisARM (Bernoulli nodes, antithetic pairs): unbiased against exact enumeration, a
twin with the correction dropped is caught, and DisARM's variance is below ARM's."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
from _estimators_util import check, estimates
from torch.distributions import Bernoulli, Independent

import scg
import scg.testing as st
from scg.estimators import ARM, DisARM, ScoreFunction

W = torch.tensor([1.5, -2.0, 0.7], dtype=torch.float64)


def theta() -> torch.Tensor:
    return torch.tensor([0.4, -1.1, 0.9, 0.3], dtype=torch.float64, requires_grad=True)


def program(estimator: Any = None, n: int | None = None):  # type: ignore[no-untyped-def]
    """b ~ Bern(σ(θ[:3])) (3 bits decoded jointly); y ~ Bern(σ(θ3 + Σb)) scored; a cost that
    couples the bits, θ and y."""

    def run(th: torch.Tensor) -> None:
        est = {} if estimator is None else {"estimator": estimator}
        bits = Bernoulli(logits=th[:, :3])  # enumerated bit by bit for the exact gradient
        b = scg.sample(bits if estimator is None else Independent(bits, 1), name="b", n=n, plates=1, **est)
        y = scg.sample(Bernoulli(logits=th[:, 3] + b.sum(-1) - 1.0), name="y", estimator=ScoreFunction())
        scg.cost((b @ W + th[:, 3]) ** 2 + 2.0 * y * b[..., 0], name="c")

    return run


@functools.cache
def exact() -> torch.Tensor:
    """The exact gradient at ``theta()`` by enumeration (the same for every test here: computed once)."""
    th = theta()
    return st.exact_gradient(lambda: program()(th.unsqueeze(0)), [th])[0]


class DroppedCorrection(DisARM):
    """DisARM without the σ(|α|) factor: the weight of a disagreeing pair is ±½ instead."""

    def centred(self, logits: torch.Tensor, b1: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
        return 0.5 * (b2 - b1)


class UnconditionalU(ARM):
    """ARM with u drawn afresh instead of given the pair: the weight loses its link to the pair."""

    def centred(self, logits: torch.Tensor, b1: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
        return torch.rand_like(b1) - 0.5


@pytest.mark.parametrize(("cls", "n"), [(ARM, 2), (DisARM, 2), (DisARM, 4)])
def test_unbiased(cls: type[ARM], n: int) -> None:
    th = theta()
    report = check(estimates(program(cls(), n), th, 6000, seed=11), exact())
    assert report.passed, str(report)


@pytest.mark.parametrize("twin", [DroppedCorrection, UnconditionalU])
def test_broken_twin_is_caught(twin: type[ARM]) -> None:
    th = theta()
    report = check(estimates(program(twin(), 2), th, 6000, seed=11), exact())
    assert not report.passed, str(report)


def test_disarm_variance_below_arm_and_score_function() -> None:
    th = theta()
    var = {
        name: estimates(program(est, n), th, 4000, seed=12)[:, :3].var(0).sum()
        for name, est, n in [
            ("arm", ARM(), 2),
            ("disarm", DisARM(), 2),
            ("sf2", ScoreFunction(scg.baselines.LeaveOneOut()), 2),
        ]
    }
    # measured (seed 12): ARM 4.47, DisARM 3.40, score function + leave-one-out (n=2) 5.38
    assert float(var["disarm"]) < 0.85 * float(var["arm"]), var
    assert float(var["disarm"]) < 0.75 * float(var["sf2"]), var


def test_pairs_are_antithetic_and_the_surrogate_evaluates_the_objective() -> None:
    th = theta()
    torch.manual_seed(0)
    with scg.Graph() as g:
        b = scg.sample(Bernoulli(logits=th[:3].expand(500, 3)), name="b", n=2, estimator=DisARM())
        scg.cost(b @ W, name="c")
    assert b.shape == (2, 500, 3)
    # b₁ = [u < p] and b₂ = [1 − u < p]: both 1 needs p > ½, both 0 needs p < ½
    p = torch.sigmoid(th[:3].detach())
    both = (b[0] * b[1]).mean(0)
    assert bool((both[p < 0.5] == 0).all()) and bool((both[p > 0.5] > 0).all())
    none = ((1 - b[0]) * (1 - b[1])).mean(0)
    assert bool((none[p > 0.5] == 0).all())
    torch.testing.assert_close(g.surrogate_loss(), (b @ W).mean(0).sum())


def test_errors_name_the_node() -> None:
    logits = torch.zeros(3, requires_grad=True)
    with scg.Graph():
        with pytest.raises(scg.SCGError, match=r"name='b'.*n=2"):
            scg.sample(Bernoulli(logits=logits), name="b", estimator=ARM())
        with pytest.raises(scg.SCGError, match=r"name='b'.*n=2.*got n=3"):
            scg.sample(Bernoulli(logits=logits), name="b", n=3, estimator=DisARM())
        with pytest.raises(scg.SCGError, match=r"name='n'.*supports Bernoulli nodes.*not Normal"):
            scg.sample(torch.distributions.Normal(logits, 1.0), name="n", n=2, estimator=ARM())
    with scg.Graph() as g:
        b = scg.sample(Bernoulli(logits=logits), name="b", n=2, estimator=ARM(), baseline=scg.baselines.LeaveOneOut())
        scg.cost(b.sum(-1), name="c")
    with pytest.raises(scg.SCGError, match=r"ARM\(\) on .*'b'.*LeaveOneOut"):
        g.surrogate_loss()
    with scg.Graph() as g:
        b = scg.sample(Bernoulli(logits=logits), name="b", n=2, estimator=ARM())
        scg.cost(b.sum(-1), name="c")
    with pytest.raises(scg.SCGError, match=r"dice=True.*ARM"):
        g.surrogate_loss(dice=True)


@pytest.mark.parametrize("cls", [ARM, DisARM])
def test_a_cost_reduced_over_a_pair_is_refused(cls: type[ARM]) -> None:
    """The pair's weights sum to zero, so a cost reduced over its slices (the same on both) cancels:
    the gradient was exactly 0 against an exact (0.20, 0.17, 0.16), with no error."""
    logits = torch.tensor([0.4, -0.7, 1.2], requires_grad=True)
    with scg.Graph():
        b = scg.sample(Bernoulli(logits=logits), name="b", n=2, estimator=cls())
        with pytest.raises(scg.SCGError, match=rf"reduced=.*'b'.*{cls.__name__}\(\), whose 2 slices are coupled"):
            scg.cost(-torch.logsumexp(-2.0 * (b - 0.3) ** 2, 0), name="c", reduced=b)


@pytest.mark.parametrize("cls", [ARM, DisARM])
def test_leave_one_out_inside_a_wrapper_is_refused_too(cls: type[ARM]) -> None:
    """``Normalized(LeaveOneOut(), scale=False)`` (centring only, documented unbiased) made one member
    of a pair the other's baseline: twice the exact gradient (z of 47-61)."""
    logits = torch.zeros(3, requires_grad=True)
    wrapped = scg.baselines.Normalized(scg.baselines.LeaveOneOut(), scale=False)
    with scg.Graph() as g:
        b = scg.sample(Bernoulli(logits=logits), name="b", n=2, estimator=cls(), baseline=wrapped)
        scg.cost(b.sum(-1), name="c")
    with pytest.raises(scg.SCGError, match=rf"{cls.__name__}\(\) on .*'b'.*LeaveOneOut"):
        g.surrogate_loss()


def test_declared_and_cached_structure_give_the_same_estimate(assert_same_gradient_in_every_structure: Any) -> None:
    th = theta()

    def run() -> None:
        program(DisARM(), 2)(th.unsqueeze(0).expand(64, 4))

    assert_same_gradient_in_every_structure(run, [th])
