"""Gumbel-Rao, Gumbel-sparsemax and Gumbel-entmax: biased, and the z-test against exact
enumeration says so; Gumbel-Rao has straight-through's expectation with less variance; the bias
shrinks with the temperature; entmax by bisection meets its optimality conditions. The measured
table is in docs/estimators.md (``python benchmarks/estimators.py --bias``)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from _estimators_util import check, estimates, exact_gradient_batched
from torch.distributions import Bernoulli, Categorical, OneHotCategorical

import scg
from scg.estimators import GumbelEntmax, GumbelRao, GumbelSoftmax, GumbelSparsemax
from scg.estimators.sparse_relaxations import entmax_bisect, sparsemax

TAB = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)


def theta() -> torch.Tensor:
    return torch.tensor([0.3, -0.2, 0.5, 0.7], dtype=torch.float64, requires_grad=True)


def program(estimator: Any = None, bernoulli: bool = True):  # type: ignore[no-untyped-def]
    def run(th: torch.Tensor) -> None:
        kw = {} if estimator is None else {"estimator": estimator}
        y = scg.sample(OneHotCategorical(logits=th[:, :3]), name="y", **kw)
        cost = (y @ TAB + th[:, 3]) ** 2
        if bernoulli:
            b = scg.sample(Bernoulli(logits=th[:, 0]), name="b", **kw)
            cost = cost + (2 * b - th[:, 1]) ** 2
        scg.cost(cost, name="c")

    return run


def exact(bernoulli: bool = True) -> torch.Tensor:
    th = theta()
    return exact_gradient_batched(program(bernoulli=bernoulli), th)


def test_gumbel_rao_is_biased_like_straight_through_with_less_variance() -> None:
    th, ex = theta(), exact()
    rao = estimates(program(GumbelRao(0.5, m=10)), th, 6000, seed=51)
    st_ = estimates(program(GumbelSoftmax(0.5, hard=True)), th, 6000, seed=52)
    assert not check(rao, ex).passed
    # the same expectation: straight-through's (two independent means, z-test per coordinate)
    se = (rao.var(0) / len(rao) + st_.var(0) / len(st_)).sqrt()
    z = ((rao.mean(0) - st_.mean(0)) / se).abs().max()
    assert float(z) < 3.9, (rao.mean(0), st_.mean(0))
    # measured (τ = 0.5, seeds 51/52): variance 25.2 (Gumbel-Rao, m = 10) vs 52.6 (straight-through)
    assert float(rao[:, :3].var(0).sum()) < 0.6 * float(st_[:, :3].var(0).sum())


@pytest.mark.parametrize("cls", [GumbelSparsemax, GumbelEntmax])
def test_sparse_relaxations_are_biased_and_the_bias_shrinks_with_the_temperature(cls: type) -> None:
    th, ex = theta(), exact(bernoulli=False)
    bias = {}
    for temp in (2.0, 0.5):
        est = estimates(program(cls(temp), bernoulli=False), th, 6000, seed=53)
        report = check(est, ex)
        assert not report.passed, str(report)
        bias[temp] = float((est.mean(0) - ex).abs().max())
    # measured (seed 53): max |bias| sparsemax 1.00 at τ = 2, 0.32 at τ = 0.5; 1.5-entmax 1.23, 0.42
    assert bias[0.5] < bias[2.0] / 2, bias


def test_entmax_bisection_meets_the_optimality_conditions() -> None:
    torch.manual_seed(0)
    z = torch.randn(50, 6, dtype=torch.float64) * 2
    y = entmax_bisect(z, 1.5)
    torch.testing.assert_close(y.sum(-1), torch.ones(50, dtype=torch.float64))
    # y_i = [z_i/2 − τ]_+²: z_i/2 − √y_i is one τ on the support, and z_i/2 ≤ τ off it
    tau = torch.where(y > 0, z / 2 - y.sqrt(), torch.nan)
    spread = (tau.nan_to_num(-torch.inf).amax(-1) - tau.nan_to_num(torch.inf).amin(-1)).abs()
    assert float(spread.max()) < 1e-12
    t = tau.nanmean(-1, keepdim=True)
    assert bool(((z / 2)[y == 0] <= t.expand_as(z)[y == 0] + 1e-12).all())
    assert 0 < float((y == 0).double().mean()) < 1  # sparse, but not one-hot everywhere
    torch.testing.assert_close(entmax_bisect(z, 2.0), sparsemax(z), atol=1e-12, rtol=0)  # 2-entmax
    # the Jacobian's directional derivative against central differences
    zz, v, w, eps = z.clone().requires_grad_(), torch.randn_like(z), torch.randn_like(z), 1e-6
    (jv,) = torch.autograd.grad((entmax_bisect(zz, 1.5) * w).sum(), zz)
    fd = ((entmax_bisect(z + eps * v, 1.5) - entmax_bisect(z - eps * v, 1.5)) * w).sum(-1) / (2 * eps)
    torch.testing.assert_close((jv * v).sum(-1), fd, atol=1e-7, rtol=1e-6)


def test_sparsemax_is_the_projection_onto_the_simplex() -> None:
    z = torch.tensor([[0.5, 0.2, -1.0], [3.0, 0.0, 0.0], [0.1, 0.1, 0.1]], dtype=torch.float64)
    out = sparsemax(z)
    torch.testing.assert_close(out.sum(-1), torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(out[0], torch.tensor([0.65, 0.35, 0.0], dtype=torch.float64))
    torch.testing.assert_close(out[1], torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))
    torch.testing.assert_close(out[2], torch.full((3,), 1 / 3, dtype=torch.float64))
    # the projection minimises the distance: no random simplex point is closer
    pts = torch.distributions.Dirichlet(torch.ones(3, dtype=torch.float64)).sample((2000,))  # type: ignore[no-untyped-call]
    assert bool(((pts - z[0]).norm(dim=-1) >= (out[0] - z[0]).norm() - 1e-12).all())


def test_values() -> None:
    torch.manual_seed(0)
    logits = torch.tensor([[2.0, 0.0, -1.0, 0.5]], requires_grad=True)
    with scg.Graph() as g:
        s = scg.sample(OneHotCategorical(logits=logits), name="s", n=200, estimator=GumbelSparsemax(0.5))
        h = scg.sample(OneHotCategorical(logits=logits), name="h", estimator=GumbelSparsemax(0.5, hard=True))
        e = scg.sample(OneHotCategorical(logits=logits), name="e", n=200, estimator=GumbelEntmax(0.5))
        r = scg.sample(OneHotCategorical(logits=logits), name="r", estimator=GumbelRao(1.0, m=4))
        b = scg.sample(Bernoulli(logits=logits[:, 0]), name="b", estimator=GumbelRao(1.0))
        scg.cost((s * torch.arange(4.0)).sum(-1), name="c")
        scg.cost((e * torch.arange(4.0)).sum(-1), name="ce")
        scg.cost((h * torch.arange(4.0)).sum(-1) + (r * torch.arange(4.0)).sum(-1) + b, name="d")
    torch.testing.assert_close(s.sum(-1), torch.ones(200, 1))
    assert float((s == 0).float().mean()) > 0.3  # sparse: many exact zeros
    torch.testing.assert_close(e.sum(-1), torch.ones(200, 1))
    assert 0.1 < float((e == 0).float().mean()) < float((s == 0).float().mean())  # less sparse than sparsemax
    for hard in (h, r):
        assert set(hard.detach().flatten().tolist()) <= {0.0, 1.0} and float(hard.detach().sum()) == 1.0
    assert float(b.detach()) in (0.0, 1.0)
    g.surrogate_loss().backward()
    assert logits.grad is not None and bool((logits.grad != 0).any())
    for est in (GumbelRao(1.0), GumbelSparsemax(1.0), GumbelEntmax(1.0)):
        caps = est.capabilities()
        assert caps["unbiased"] is False and caps["relaxed"] is True and caps["score"] is False


def test_errors() -> None:
    with scg.Graph():
        with pytest.raises(scg.SCGError, match=r"name='z'.*OneHotCategorical nodes, not Bernoulli"):
            scg.sample(Bernoulli(logits=torch.zeros(3)), name="z", estimator=GumbelSparsemax(1.0))
        with pytest.raises(scg.SCGError, match=r"name='z'.*OneHotCategorical and Bernoulli nodes, not Categorical"):
            scg.sample(Categorical(logits=torch.zeros(3)), name="z", estimator=GumbelRao(1.0))
    for bad in (0, -2, 1.5, True):
        with pytest.raises(scg.SCGError, match="m="):
            GumbelRao(1.0, m=bad)  # type: ignore[arg-type]
    for temp in (0.0, -1.0, math.inf):
        with pytest.raises(scg.SCGError, match="temperature"):
            GumbelRao(temp)
        with pytest.raises(scg.SCGError, match="temperature"):
            GumbelSparsemax(temp)
    for bad_alpha in (1.0, 0.5, math.inf, True):
        with pytest.raises(scg.SCGError, match="alpha"):
            GumbelEntmax(1.0, alpha=bad_alpha)
    with scg.Graph():
        with pytest.raises(
            scg.SCGError, match=r"name='e'.*GumbelEntmax\(\) relaxes OneHotCategorical nodes, not Categorical"
        ):
            scg.sample(Categorical(logits=torch.zeros(3)), name="e", estimator=GumbelEntmax(1.0))
