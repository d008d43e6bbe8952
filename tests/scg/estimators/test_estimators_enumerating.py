"""Estimators that evaluate a categorical node at several chosen values and weight the costs:
the unordered set estimator (Kool et al. 2020, n=k without replacement, built-in baseline), the
Rao-Blackwellised score function (Liu et al. 2019) and IndeCateR (De Smet et al. 2023). Each is
unbiased against exact enumeration, also with score-function nodes before and after it, and a
twin with a dropped correction term is caught."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
from _estimators_util import check, estimates, exact_gradient_batched
from torch.distributions import Bernoulli, Categorical, Independent, OneHotCategorical

import scg
import scg.testing as st
from scg.estimators import IndeCateR, RaoBlackwellized, ScoreFunction, UnorderedSet
from scg.graph.nodes import StochasticNode

TAB = torch.tensor([1.0, -2.0, 3.0, 0.5, -1.0], dtype=torch.float64)


def theta() -> torch.Tensor:
    return torch.tensor([0.3, -0.2, 0.5, 0.7, -0.6, 0.4], dtype=torch.float64, requires_grad=True)


def program(estimator: Any = None, n: int | None = None, onehot: bool = False):  # type: ignore[no-untyped-def]
    """u ~ Bern(σ(θ5)) scored; z ~ Cat(θ[:5] + u) with the estimator; y ~ Bern(σ(TAB[z])) scored."""

    def run(th: torch.Tensor) -> None:
        est = {} if estimator is None else {"estimator": estimator}
        u = scg.sample(Bernoulli(logits=th[:, 5]), name="u", estimator=ScoreFunction())
        logits = th[:, :5] + u.unsqueeze(-1) * torch.tensor([1.0, 0, 0, 0, -1.0], dtype=th.dtype)
        if onehot:
            z = scg.sample(OneHotCategorical(logits=logits), name="z", n=n, **est)
            val = z @ TAB
        else:
            z = scg.sample(Categorical(logits=logits), name="z", n=n, **est)
            val = TAB[z]
        y = scg.sample(Bernoulli(logits=val - 0.5), name="y", estimator=ScoreFunction())
        scg.cost((val + th[:, 5]) ** 2 + 2.0 * y * u, name="c")

    return run


def exact(th: torch.Tensor) -> torch.Tensor:
    return exact_gradient_batched(program(), th)


class UnorderedSetWithoutRatios(UnorderedSet):
    """The built-in baseline with its second-order leave-one-out ratios dropped (set to 1)."""

    def weights(self, node: StochasticNode) -> torch.Tensor:
        w = UnorderedSet(baseline=False).weights(node)
        probs = node.dist.probs.expand(node.value.shape + (5,)).gather(-1, node.value.unsqueeze(-1)).squeeze(-1)
        dp = probs - probs.detach()
        return w - probs.detach() * dp.sum(0)


class RaoBlackwellizedWithoutRatio(RaoBlackwellized):
    """The sampled category's weight with gradient ∇p_j instead of ∇p_j / q_j."""

    def weights(self, node: StochasticNode) -> torch.Tensor:
        w = super().weights(node)
        p_j = node.dist.probs.expand(node.value.shape[1:] + (5,)).gather(-1, node.value[-1].unsqueeze(-1)).squeeze(-1)
        return torch.cat([w[:-1], (w[-1].detach() + p_j - p_j.detach()).unsqueeze(0)])


@pytest.mark.parametrize(
    ("estimator", "n", "onehot"),
    [
        (UnorderedSet(), 3, False),
        (UnorderedSet(), 2, True),
        (UnorderedSet(baseline=False), 3, False),
        (UnorderedSet(), 5, False),
        (RaoBlackwellized(2), None, False),
        (RaoBlackwellized(1), None, True),
        (RaoBlackwellized(2, baseline=False), None, False),
    ],
)
def test_unbiased(estimator: Any, n: int | None, onehot: bool) -> None:
    th = theta()
    report = check(estimates(program(estimator, n, onehot), th, 4000, seed=41), exact(th))
    assert report.passed, str(report)


@pytest.mark.parametrize(("twin", "n"), [(UnorderedSetWithoutRatios(), 3), (RaoBlackwellizedWithoutRatio(2), None)])
def test_broken_twin_is_caught(twin: Any, n: int | None) -> None:
    th = theta()
    report = check(estimates(program(twin, n), th, 4000, seed=41), exact(th))
    assert not report.passed, str(report)


def test_unordered_set_baseline_reduces_the_variance_and_k_equal_K_is_exact() -> None:
    th = theta()
    var = {
        name: estimates(program(est, 3), th, 4000, seed=42)[:, :5].var(0).sum()
        for name, est in [("plain", UnorderedSet(baseline=False)), ("baseline", UnorderedSet())]
    }
    sf = estimates(program(ScoreFunction(scg.baselines.LeaveOneOut()), 3), th, 4000, seed=42)[:, :5].var(0).sum()
    # measured (seed 42, n=3): unordered set 3.02, with its built-in baseline 2.67, score
    # function with leave-one-out over 3 samples with replacement 7.04
    assert float(var["baseline"]) < 0.95 * float(var["plain"]), var
    assert float(var["baseline"]) < 0.5 * float(sf), (var, sf)
    th0 = th.detach().clone().requires_grad_()

    def alone(t: torch.Tensor) -> None:  # one node, every category in the set: no variance left
        z = scg.sample(Categorical(logits=t[:, :5]), name="z", n=5, estimator=UnorderedSet())
        scg.cost((TAB[z] + t[:, 5]) ** 2, name="c")

    est = estimates(alone, th0, 64, seed=43)
    ex = st.exact_gradient(lambda: alone(th0.unsqueeze(0)), [th0])[0]
    torch.testing.assert_close(est, ex.expand_as(est))


def test_unordered_set_nodes_in_sequence() -> None:
    """Causal credit across two unordered-set nodes (nested sample dimensions)."""
    th = theta()

    def run(t: torch.Tensor, est: Any = None, n1: int | None = None, n2: int | None = None) -> None:
        kw = {} if est is None else {"estimator": est}
        a = scg.sample(Categorical(logits=t[:, :3]), name="a", n=n1, **kw)
        b = scg.sample(Categorical(logits=t[:, 2:5] + (a == 1).to(t.dtype).unsqueeze(-1)), name="b", n=n2, **kw)
        scg.cost(TAB[a] * TAB[b] + t[:, 5] * TAB[b], name="c")

    ex = exact_gradient_batched(run, th)
    report = check(estimates(lambda t: run(t, UnorderedSet(), 2, 2), th, 4000, seed=44), ex)
    assert report.passed, str(report)


def indep(estimator: Any = None, onehot: bool = False):  # type: ignore[no-untyped-def]
    """x: 3 independent categoricals (K = 3) decoded jointly; cost couples them."""
    tab = TAB[:3]

    def run(th: torch.Tensor) -> None:
        logits = th[:, :3].unsqueeze(-1) * torch.tensor([1.0, -1.0, 0.5], dtype=th.dtype) + th[:, 3:6].unsqueeze(-2)
        base = (OneHotCategorical if onehot else Categorical)(logits=logits)  # (P, D=3, K=3)
        if estimator is None:  # enumerated coordinate by coordinate for the exact gradient
            x = scg.sample(base, name="x", plates=1)
        else:
            x = scg.sample(Independent(base, 1), name="x", estimator=estimator)
        v = x @ tab if onehot else tab[x]
        scg.cost(v.prod(-1) + (v.sum(-1) - th[:, 0]) ** 2, name="c")

    return run


class IndeCateRWithoutD(IndeCateR):
    """IndeCateR with the gradient of each ω divided by D like its value (the average, not the sum)."""

    def weights(self, node: StochasticNode) -> torch.Tensor:
        w = super().weights(node)
        return w.detach() + (w - w.detach()) / 3.0


@functools.cache
def indep_exact() -> torch.Tensor:
    """The exact gradient of ``indep()`` at ``theta()`` (enumerated once for both cases below)."""
    th = theta()
    return st.exact_gradient(lambda: indep()(th.unsqueeze(0)), [th])[0]


@pytest.mark.parametrize("onehot", [False, True])
def test_indecater_unbiased(onehot: bool) -> None:
    th = theta()
    ex = indep_exact()
    report = check(estimates(indep(IndeCateR(), onehot), th, 4000, seed=45), ex)
    assert report.passed, str(report)
    twin = check(estimates(indep(IndeCateRWithoutD(), onehot), th, 4000, seed=45), ex)
    assert not twin.passed, str(twin)


def test_values_and_errors() -> None:
    th = theta()
    torch.manual_seed(0)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=th[:5].expand(7, 5)), name="z", n=4, estimator=UnorderedSet())
        r = scg.sample(Categorical(logits=th[:5].expand(7, 5)), name="r", estimator=RaoBlackwellized(2))
        scg.cost(TAB[z], name="c")
        scg.cost(TAB[r], name="d")
    assert z.shape == (4, 7) and all(len(set(z[:, i].tolist())) == 4 for i in range(7))
    top = torch.softmax(th[:5].detach(), 0).topk(2).indices
    assert r.shape == (3, 7) and bool((r[:2] == top.unsqueeze(-1)).all())
    assert not bool((r[2].unsqueeze(0) == top.unsqueeze(-1)).any())
    g.surrogate_loss()
    with scg.Graph():
        for est, n, match in [
            (UnorderedSet(), None, r"name='z'.*n between 1 and min\(K, 7\) = 5.*got n=None"),
            (UnorderedSet(), 6, r"name='z'.*got n=6"),
            (RaoBlackwellized(5), None, r"name='z'.*only 5 categories; use Enumerate"),
            (IndeCateR(), None, r"name='z'.*Independent\(Categorical"),
        ]:
            with pytest.raises(scg.SCGError, match=match):
                scg.sample(Categorical(logits=th[:5]), name="z", n=n, estimator=est)
        with pytest.raises(scg.SCGError, match=r"name='w'.*Categorical and OneHotCategorical.*Bernoulli"):
            scg.sample(Bernoulli(logits=th[:5]), name="w", n=2, estimator=UnorderedSet())
    for bad in (0, 1.5, True):
        with pytest.raises(scg.SCGError, match="k="):
            RaoBlackwellized(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "estimator", [UnorderedSet(), RaoBlackwellized(2), scg.estimators.MeasureValued(), scg.estimators.DisARM()]
)
def test_declared_and_cached_structure_give_the_same_estimate(
    estimator: Any, assert_same_gradient_in_every_structure: Any
) -> None:
    th = theta()

    def run() -> None:
        t = th.unsqueeze(0).expand(16, 6)
        if isinstance(estimator, scg.estimators.MeasureValued):
            x = scg.sample(torch.distributions.Normal(t[:, 0], t[:, 1].exp()), name="x", estimator=estimator)
            scg.cost((x > 0.2).to(x.dtype) * t[:, 2], name="c")
        elif isinstance(estimator, scg.estimators.DisARM):
            b = scg.sample(Bernoulli(logits=t[:, :3]), name="b", n=2, estimator=estimator)
            scg.cost((b * TAB[:3] + t[:, 3:]) ** 2, name="c")
        else:
            program(estimator, 3 if isinstance(estimator, UnorderedSet) else None)(t)

    assert_same_gradient_in_every_structure(run, [th])


_PAD_X = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
_PAD_LENGTHS = torch.tensor([5, 2])  # the second row: 2 valid categories, 3 padded with -inf


@pytest.mark.parametrize(
    ("estimator", "n"),
    [
        (lambda: scg.estimators.CategoricalDisARM(), 2),
        (lambda: scg.estimators.ARSM(), 11),
        (lambda: scg.estimators.RaoBlackwellized(2), None),
        (lambda: scg.estimators.UnorderedSet(), 3),
    ],
)
def test_padding_with_minus_inf_logits_keeps_estimates_finite_and_unbiased(estimator, n) -> None:  # type: ignore[no-untyped-def]
    """The standard padding mask (masked_fill(~mask, -inf)): −inf − (−inf) made the loss and the
    gradient NaN (CategoricalDisARM, ARSM), and a row with no more than k valid categories crashed
    inside torch (RaoBlackwellized) or gave NaN (UnorderedSet: sets of k from fewer categories)."""
    v = torch.tensor([0.3, -0.4, 0.2], dtype=torch.float64, requires_grad=True)

    def program(est: scg.estimators.Estimator | None, k: int | None) -> None:
        logits = (_PAD_X @ v).masked_fill(torch.arange(5) >= _PAD_LENGTHS[:, None], float("-inf"))
        z = scg.sample(Categorical(logits=logits), name="z", estimator=est, n=k)
        scg.cost(_PAD_X[torch.arange(2), z].sum(-1) ** 2, name="c")

    with scg.Graph() as g:
        program(estimator(), n)
    loss = g.surrogate_loss()
    (grad,) = torch.autograd.grad(loss, v)
    assert torch.isfinite(loss) and bool(torch.isfinite(grad).all())
    exact = st.exact_gradient(lambda: program(None, None), v)
    report = st.check_unbiased(lambda: program(estimator(), n), v, n=600, seed=3, exact=exact)
    assert report.passed, str(report)


@pytest.mark.parametrize("gap", [9.0, 16.0, 20.0])
@pytest.mark.parametrize("n", [2, 3, 4])
def test_unordered_set_stays_exact_on_a_peaked_float32_distribution(gap: float, n: int) -> None:
    """One category near probability 1 in float32: the set probabilities' denominators were
    ``1 − Σ``, which lost every digit. The weights of a cost ``w + f(z)`` must sum to 1 (d/dw = 1):
    0.973 (n = 3) and 0.875 (n = 4) at a logit gap of 16, NaN from 18."""
    logits = torch.tensor([gap, 0.0, 0.0, 0.0], requires_grad=True)
    w = torch.tensor(0.5, requires_grad=True)
    table = torch.tensor([1.0, -2.0, 3.0, 0.5])
    torch.manual_seed(0)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=logits), name="z", n=n, estimator=scg.estimators.UnorderedSet())
        scg.cost(table[z] + w, name="c")
    loss = g.surrogate_loss()
    dlogits, dw = torch.autograd.grad(loss, [logits, w])
    assert torch.isfinite(loss) and bool(torch.isfinite(dlogits).all())
    assert float(dw) == pytest.approx(1.0, abs=1e-5)
    if n == 4:  # (the whole support: the exact expectation and gradient)
        exact = st.exact_gradient(
            lambda: scg.cost(table[scg.sample(Categorical(logits=logits), name="z")] + w, name="c"), [logits, w]
        )
        torch.testing.assert_close(dlogits, exact[0], rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("plates", [0, 1])
@pytest.mark.parametrize(
    ("estimator", "n"), [(lambda: scg.estimators.Enumerate(), None), (lambda: scg.estimators.MeasureValued(), None)]
)
def test_an_enumerated_node_refuses_mixing_beyond_its_declared_plates(estimator: Any, n: Any, plates: int) -> None:
    """Lockstep enumeration gives every element of an example the same value: exact only when no
    element's cost reads another's, plates or not. Mixing beyond ``plates=`` was accepted, and the
    gradient was wrong (deterministically)."""
    th = torch.tensor([[0.3, -0.2], [0.5, 0.1]], dtype=torch.float64, requires_grad=True)
    with scg.Graph() as g:
        v = scg.sample(Bernoulli(logits=th), name="v", estimator=estimator(), plates=plates)  # (B, T) = (2, 2)
        scg.cost(3.0 * v * v.flip(-1) + v, name="c")  # (mixes along T)
    with pytest.raises(scg.SCGError, match=r"mixes the batch elements of the enumerated"):
        g.surrogate_loss()


# ---------------------------------------------------------------- the built-in baselines, per sample
# Each estimator's gradient on one draw against the formula of its module's docstring, written out.

_COSTS = torch.tensor([1.0, 4.0, -2.0, 3.0], dtype=torch.float64)


def _one_draw(theta: torch.Tensor, estimator: Any, n: int | None, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The node's value and the surrogate's gradient for one seeded draw of z, with cost _COSTS[z]."""
    torch.manual_seed(seed)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=theta), estimator=estimator, name="z", n=n)
        scg.cost(_COSTS[z], name="c")
    (grad,) = torch.autograd.grad(g.surrogate_loss(), [theta])
    return z.detach(), grad


def test_rao_blackwellized_builtin_baseline_is_the_mean_cost_of_the_top_k() -> None:
    """RaoBlackwellized(k): the gradient Σ_T ∇p_i f(i) + (∇p_j / q_j) f(j) − b S, with the
    built-in baseline b = Σ_T p_i f(i) / P_T and S = Σ_T ∇p_i + ∇p_j / q_j. A baseline without the
    division by P_T is still unbiased (E S = 0) but not the documented one: another gradient per
    sample, which the unbiasedness tests cannot see."""
    theta = torch.tensor([0.9, 0.1, -0.4, 0.3], dtype=torch.float64, requires_grad=True)
    for seed in range(3):
        z, grad = _one_draw(theta, RaoBlackwellized(k=2), None, seed)
        top, j = z[:2].tolist(), int(z[2])
        p = torch.softmax(theta, -1)
        q = p.detach()
        mass = q[top].sum()
        b = (q[top] * _COSTS[top]).sum() / mass
        scale_j = (1.0 - mass) / q[j]  # 1 / q_j
        s = p[top].sum() + scale_j * p[j]
        (want,) = torch.autograd.grad((p[top] * _COSTS[top]).sum() + scale_j * p[j] * _COSTS[j] - b * s, [theta])
        torch.testing.assert_close(grad, want)


def test_unordered_set_has_its_builtin_baseline_for_two_samples() -> None:
    """UnorderedSet with k = 2: the gradient Σ_s ∇p(s) R(S, s) (f(s) − B(S, s)), with
    R(S, s) = p(s') / (1 − p(s)) / p(S) and B(S, s) = p(s) f(s) + (1 − p(s)) f(s') for S = {s, s'}
    (the module docstring's formulas one level down: R^{D∖s}(S, s') = (1 − p(s)) / p(s')). Without
    B for k = 2 the estimator is still unbiased but not the documented one (higher variance)."""
    theta = torch.tensor([0.9, 0.1, -0.4, 0.3], dtype=torch.float64, requires_grad=True)
    for seed in range(3):
        z, grad = _one_draw(theta, UnorderedSet(), 2, seed)
        a, c = z.tolist()
        p = torch.softmax(theta, -1)
        q = p.detach()
        p_set = q[a] * q[c] / (1 - q[a]) + q[c] * q[a] / (1 - q[c])
        value = torch.zeros((), dtype=torch.float64)
        for s, o in ((a, c), (c, a)):
            ratio = q[o] / (1 - q[s]) / p_set
            base = q[s] * _COSTS[s] + (1 - q[s]) * _COSTS[o]
            value = value + p[s] * ratio * (_COSTS[s] - base)
        (want,) = torch.autograd.grad(value, [theta])
        torch.testing.assert_close(grad, want)


def merged(estimator: Any = None, n: int | None = None) -> Any:
    """z ~ Cat(θ[:5]), category 1 merged into 0 by a write into the sample after the draw
    (``masked_fill_``); y ~ Bern(σ(TAB[z])) scored after it."""
    th = theta()

    def run() -> None:
        est = {} if estimator is None else {"estimator": estimator}
        z = scg.sample(Categorical(logits=th[:5]), name="z", n=n, **est)
        z.masked_fill_(z == 1, 0)
        val = TAB[z]
        y = scg.sample(Bernoulli(logits=val - 0.5), name="y", estimator=ScoreFunction())
        scg.cost((val + th[5]) ** 2 + 2.0 * y, name="c")

    return run, th


@pytest.mark.parametrize(
    ("make", "n"),
    [(lambda: UnorderedSet(), 5), (lambda: RaoBlackwellized(4), None)],
    ids=["UnorderedSet", "RaoBlackwellized"],
)
def test_weights_are_those_of_the_drawn_values_after_a_write_into_the_sample(make: Any, n: int | None) -> None:
    # with the whole support (k = K; the top K − 1 and the one category left) the estimate is
    # deterministic in z: its mean over y is exact. The weights were computed from the written
    # values (category 0 twice): d/dθ0 −1.025 (UnorderedSet) and −0.929 (RaoBlackwellized)
    # against the exact −0.420
    run, th = merged(make(), n)
    plain, th_plain = merged()  # (the same θ)
    expected = st.expected_estimate(run, [th], keep=("z",))[0]
    torch.testing.assert_close(expected, st.exact_gradient(plain, [th_plain])[0], rtol=1e-9, atol=1e-12)
