"""Sample dimensions: multi-sample nodes (n=k), reduced costs, enumeration, +MULTI attention.

Exact values by enumeration (scg.testing); estimates particle-batched (tests/_estimators_util.py);
z-tests with a Bonferroni budget, alpha = 1e-3 per test, fixed seeds.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import pytest
import torch
from _estimators_util import check, estimates
from torch.distributions import Bernoulli, Categorical, Multinomial, Normal, OneHotCategorical

import scg
import scg.testing as st

TAB = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
THETA = [0.3, -0.2, 0.5, 0.7]


def theta() -> torch.Tensor:
    return torch.tensor(THETA, dtype=torch.float64, requires_grad=True)


def two_nodes(n: int | None = None, **z_kw: Any):  # type: ignore[no-untyped-def]
    """z ~ Cat(θ[:3]) (n samples), x ~ Bern(θ3·(z − 1)) | z, c = TAB[z](1 + x) + θ0·x + θ1²."""

    def run(th: torch.Tensor) -> None:
        z = scg.sample(Categorical(logits=th[:, :3]), name="z", n=n, **z_kw)
        x = scg.sample(Bernoulli(logits=th[:, 3] * (z.to(th.dtype) - 1)), name="x")
        scg.cost(TAB[z] * (1 + x) + th[:, 0] * x + th[:, 1] ** 2, name="c")

    return run


def exact(run: Any, th: torch.Tensor) -> torch.Tensor:
    return st.exact_gradient(lambda: run(th.unsqueeze(0)), [th])[0]


@functools.cache
def exact_two_nodes() -> torch.Tensor:
    """``exact(two_nodes(), theta())``, the reference of several tests here: enumerated once."""
    return exact(two_nodes(), theta())


# --------------------------------------------------------------------------- multi-sample


def test_forward_value_is_the_mean_over_the_sample_dim() -> None:
    th = theta().detach().expand(3, 4).clone().requires_grad_()
    for kwargs in ({}, {"dice": True}, {"dice_lambda": 1.0}, {"score_scale": 0.3}):
        torch.manual_seed(0)
        with scg.Graph() as g:
            two_nodes(n=5)(th)
        c = g.node("c").value
        assert c.shape == (5, 3)
        loss = g.surrogate_loss(**kwargs)
        torch.testing.assert_close(loss, c.mean(0).sum(), rtol=0, atol=1e-12)
        assert loss.requires_grad


def test_exact_expectation_does_not_depend_on_n() -> None:
    """The objective averages over the k samples, so E is the single-sample expectation."""
    th = theta()
    one = st.exact_expectation(lambda: two_nodes()(th.unsqueeze(0)))
    two = st.exact_expectation(lambda: two_nodes(n=2)(th.unsqueeze(0)))
    torch.testing.assert_close(two, one)
    # and so is its gradient (the expectations are differentiable functions of θ: no second enumeration)
    torch.testing.assert_close(torch.autograd.grad(two, th)[0], torch.autograd.grad(one, th)[0])


@pytest.mark.parametrize("n", [1, 2, 5])
def test_multi_sample_is_unbiased(n: int) -> None:
    th = theta()
    report = check(estimates(two_nodes(n=n), th, 4000, seed=n), exact_two_nodes())
    assert report.passed, str(report)


def test_more_samples_reduce_the_variance() -> None:
    th = theta()
    v1 = estimates(two_nodes(n=1), th, 4000, seed=3).var(0)
    v8 = estimates(two_nodes(n=8), th, 4000, seed=4).var(0)
    # i.i.d. samples: variance / 8 (up to sampling error of the variance estimates)
    assert bool((v8 < v1 / 4).all()), (v1, v8)


def nested(th: torch.Tensor) -> None:
    """u ~ Cat (n=3); w ~ Bern(θ3·u) with n=2 per u: shape (2, 3, P); cost (2, 3, P)."""
    u = scg.sample(Categorical(logits=th[:, :3]), name="u", n=3)
    uf = u.to(th.dtype)
    w = scg.sample(Bernoulli(logits=th[:, 3] * (uf - 1)), name="w", n=2)
    assert w.shape == (2, 3, th.shape[0])
    scg.cost(TAB[u] * (1 + w) + th[:, 0] * w, name="c")
    scg.cost(TAB[u] * th[:, 1], name="d")  # carries u's dimension only


def nested_plain(th: torch.Tensor) -> None:
    u = scg.sample(Categorical(logits=th[:, :3]), name="u")
    w = scg.sample(Bernoulli(logits=th[:, 3] * (u.to(th.dtype) - 1)), name="w")
    scg.cost(TAB[u] * (1 + w) + th[:, 0] * w, name="c")
    scg.cost(TAB[u] * th[:, 1], name="d")


def test_nested_multi_sample_nodes_prepend_dims() -> None:
    th = theta()
    torch.manual_seed(1)
    with scg.Graph() as g:
        nested(th.unsqueeze(0))
    loss = g.surrogate_loss()
    expected = g.node("c").value.mean((0, 1)).sum() + g.node("d").value.mean(0).sum()
    torch.testing.assert_close(loss, expected)
    report = check(estimates(nested, th, 4000, seed=5), exact(nested_plain, th))
    assert report.passed, str(report)


def independent(order: str):  # type: ignore[no-untyped-def]
    def run(th: torch.Tensor) -> None:
        u = scg.sample(Categorical(logits=th[:, :3]), name="u", n=3)
        v = scg.sample(Bernoulli(logits=th[:, 3]), name="v", n=2)
        if order == "newest-first":
            c = TAB[u][None] * (1 + v[:, None]) + th[:, 0] * v[:, None]  # (2, 3, P)
        else:
            c = TAB[u][:, None] * (1 + v[None]) + th[:, 0] * v[None]  # (3, 2, P): wrong
        scg.cost(c, name="c")

    return run


def test_independent_multi_sample_nodes_broadcast_newest_first() -> None:
    th = theta()

    def plain(t: torch.Tensor) -> None:
        u = scg.sample(Categorical(logits=t[:, :3]), name="u")
        v = scg.sample(Bernoulli(logits=t[:, 3]), name="v")
        scg.cost(TAB[u] * (1 + v) + t[:, 0] * v, name="c")

    report = check(estimates(independent("newest-first"), th, 4000, seed=6), exact(plain, th))
    assert report.passed, str(report)
    with scg.Graph() as g:
        independent("oldest-first")(th.unsqueeze(0))
    with pytest.raises(scg.SCGError, match=r"cost node 'c'.*\(3, 2, 1\).*'u' \(n=3\).*\(2, 3\)"):
        g.surrogate_loss()


def test_cost_without_the_sample_dim_is_an_error_naming_both() -> None:
    th = theta()
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=th[:3]), name="z", n=4)
        scg.cost(TAB[z].mean(0, keepdim=True).expand(2), name="avg")
    with pytest.raises(scg.SCGError, match=r"cost node 'avg'.*\(2,\).*'z' \(n=4\).*\(4,\)"):
        g.surrogate_loss()


def test_stochastic_node_must_carry_the_sample_dims() -> None:
    th = theta()
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=th[:3]), name="z", n=4)
        x = scg.sample(Bernoulli(logits=z.to(th.dtype).mean(0).expand(3)), name="x")
        scg.cost(x, name="c")
    with pytest.raises(scg.SCGError, match=r"stochastic node 'x'.*\(3,\).*'z' \(n=4\)"):
        g.surrogate_loss()


def reduced(th: torch.Tensor) -> None:
    """A cost that is a non-linear function of all k samples: reduced=z (joint credit)."""
    z = scg.sample(Categorical(logits=th[:, :3]), name="z", n=3)
    vals = TAB[z] + th[:, 0]
    scg.cost(torch.logsumexp(vals, dim=0) + th[:, 1] * vals.max(0).values, name="c", reduced=z)


def test_reduced_cost_is_credited_jointly_and_unbiased() -> None:
    th = theta()
    torch.manual_seed(2)
    with scg.Graph() as g:
        reduced(th.unsqueeze(0))
    assert g.node("c").value.shape == (1,)
    torch.testing.assert_close(g.surrogate_loss(), g.node("c").value.sum())
    report = check(estimates(reduced, th, 4000, seed=7), exact(reduced, th))
    assert report.passed, str(report)


W3 = torch.tensor([1.0, 3.0, -2.0], dtype=torch.float64)


def reduced_over_examples(mix: bool, along: bool = False):  # type: ignore[no-untyped-def]
    """u ~ Bern(θ[:3]), 2 samples of each of 3 examples (per particle), (2, P, 3); the cost reduces the
    samples (``reduced=u``) and, with ``mix``, example b's cost uses example b−1's draws (a roll
    along the examples); with ``along``, a softmax along the samples first (combining samples, not
    examples)."""

    def run(th: torch.Tensor) -> None:
        u = scg.sample(Bernoulli(logits=th[..., :3]), name="u", n=2)  # (2, P, 3), or (2, 3) unbatched
        r = u * W3
        if along:
            r = r * torch.softmax(r, dim=0)
        c = r.roll(1, -1) * 2.0 + r if mix else r * r
        scg.cost(c.mean(0), name="c", reduced=u)  # (P, 3)

    return run


def _estimates(program: Any, th: torch.Tensor, whole: bool, **graph_kwargs: Any) -> torch.Tensor:
    """Estimates: 1000 runs of one particle when ``whole`` (a cost credited whole-plate mixes the
    particles of a batched run), else 4000 particles."""
    if whole:
        return st.estimate_gradients(lambda: program(th.unsqueeze(0)), [th], 1000, seed=3, graph_kwargs=graph_kwargs)
    return st.estimate_gradients_batched(program, [th], 4000, particles=2000, seed=3, graph_kwargs=graph_kwargs)


CASES = [(True, False, "whole-plate"), (False, False, "per-element"), (False, True, "whole-plate")]


@pytest.mark.parametrize(("mix", "along", "credit"), CASES)
def test_a_reduced_cost_that_mixes_the_examples_is_credited_whole(mix: bool, along: bool, credit: str) -> None:
    """A reduction over the sample dimension combines samples, not examples: it leaves the examples
    per element (a VIMCO-style cost). A mixing of the examples before it must still be seen. It was
    not: the check read position 0 of the reduced cost, its examples, as a sample dimension, and
    credited each example with its own cost (z of 30-70 against the exact gradient). A softmax along
    the samples before the reduction is credited whole, conservatively: the place of samples once
    combined is not followed, so the reduction is not known to be over them."""
    th = theta()
    with scg.Graph() as g:
        reduced_over_examples(mix, along)(th)  # (the examples first in the reduced cost: (3,))
    g.surrogate_loss()
    assert g.credit("u", "c") == credit


@pytest.mark.parametrize(
    ("mix", "along", "credit"),
    [pytest.param(*case, marks=[pytest.mark.slow] if case[2] == "whole-plate" else []) for case in CASES],
)
def test_a_reduced_cost_over_the_samples_is_unbiased(mix: bool, along: bool, credit: str) -> None:
    """The credit above against the exact gradient (runs of one particle where it is whole-plate:
    slow)."""
    th = theta()
    program = reduced_over_examples(mix, along)
    report = check(_estimates(program, th, credit == "whole-plate"), exact(program, th))
    assert report.passed, str(report)


def test_the_check_of_the_mixing_reduced_cost_catches_per_example_credit() -> None:
    """The biased twin: the mixing program credited per example (declared so) fails the same check."""
    th = theta()
    program = reduced_over_examples(True)
    report = check(_estimates(program, th, False, structure=scg.Declared()), exact(program, th))
    assert not report.passed, str(report)


def test_reduced_argument_errors() -> None:
    th = theta()
    with scg.Graph():
        z = scg.sample(Categorical(logits=th[:3]), name="z")
        with pytest.raises(scg.SCGError, match=r"reduced=.*'z'.*no sample dimension"):
            scg.cost(TAB[z], name="c", reduced=z)
        y = scg.sample(Categorical(logits=th[:3]), name="y", n=2)
        with pytest.raises(scg.SCGError, match="pass the value returned by scg.sample"):
            scg.cost(TAB[y].sum(), name="d", reduced=y + 1)
        e = scg.sample(Bernoulli(logits=th[0]), name="e", estimator=scg.estimators.Enumerate())
        with pytest.raises(scg.SCGError, match=r"'e' \(created.*is enumerated"):
            scg.cost(e.sum(), name="f", reduced=e)


# --------------------------------------------------------------------------- enumeration


def enumerated(th: torch.Tensor) -> None:
    """Both nodes enumerated: z (3, P), x (2, 3, P), cost (2, 3, P)."""
    z = scg.sample(Categorical(logits=th[:, :3]), name="z", estimator=scg.estimators.Enumerate())
    x = scg.sample(Bernoulli(logits=th[:, 3] * (z.to(th.dtype) - 1)), name="x", estimator=scg.estimators.Enumerate())
    scg.cost(TAB[z] * (1 + x) + th[:, 0] * x + th[:, 1] ** 2, name="c")


def test_enumerating_every_node_gives_the_exact_value_and_gradient() -> None:
    th = theta()
    value = st.exact_expectation(lambda: two_nodes()(th.unsqueeze(0)))
    with scg.Graph() as g:
        enumerated(th.unsqueeze(0))
    assert g.node("x").value.shape == (2, 3, 1)
    loss = g.surrogate_loss()
    torch.testing.assert_close(loss, value)
    (grad,) = torch.autograd.grad(loss, th, create_graph=True)
    torch.testing.assert_close(grad, exact_two_nodes())
    hess = torch.stack([torch.autograd.grad(grad[i], th, retain_graph=True)[0] for i in range(4)])
    torch.testing.assert_close(hess, st.exact_hessian(lambda: two_nodes()(th.unsqueeze(0)), [th]))
    # scg.testing does not branch on enumerated nodes: its objective weights them by p
    torch.testing.assert_close(st.exact_expectation(lambda: enumerated(th.unsqueeze(0))), value)


@pytest.mark.parametrize("baseline", [None, "ema"])
def test_enumerate_then_sample_is_unbiased(baseline: str | None) -> None:
    th = theta()
    ema = scg.baselines.EMA(0.2, init=1.0) if baseline else None

    def run(t: torch.Tensor) -> None:
        z = scg.sample(Categorical(logits=t[:, :3]), name="z", estimator=scg.estimators.Enumerate())
        x = scg.sample(Bernoulli(logits=t[:, 3] * (z.to(t.dtype) - 1)), name="x", baseline=ema)
        scg.cost(TAB[z] * (1 + x) + t[:, 0] * x + t[:, 1] ** 2, name="c")

    report = check(estimates(run, th, 4000, seed=8), exact_two_nodes())
    assert report.passed, str(report)


def test_enumerate_nested_under_a_multi_sample_node() -> None:
    th = theta()

    def run(t: torch.Tensor) -> None:
        u = scg.sample(Bernoulli(logits=t[:, 3]), name="u", n=3)  # (3, P)
        z = scg.sample(
            Categorical(logits=t[:, :3] * (1 + u[..., None])), name="z", estimator=scg.estimators.Enumerate()
        )  # (3, 3, P)
        scg.cost(TAB[z] * (1 + u) + t[:, 0] * u, name="c")

    def plain(t: torch.Tensor) -> None:
        u = scg.sample(Bernoulli(logits=t[:, 3]), name="u")
        z = scg.sample(Categorical(logits=t[:, :3] * (1 + u[..., None])), name="z")
        scg.cost(TAB[z] * (1 + u) + t[:, 0] * u, name="c")

    report = check(estimates(run, th, 4000, seed=9), exact(plain, th))
    assert report.passed, str(report)


def test_enumerate_one_hot_and_batched_bernoulli() -> None:
    logits = torch.tensor([[0.2, -0.5, 0.1], [1.0, 0.0, -1.0]], dtype=torch.float64, requires_grad=True)

    est = scg.estimators.Enumerate()
    with scg.Graph() as g:
        y = scg.sample(OneHotCategorical(logits=logits), name="y", estimator=est)  # (3, 2, 3)
        b = scg.sample(Bernoulli(logits=logits[:, 0]), name="b", estimator=est)  # (2, 2)
        scg.cost((y @ TAB)[None] ** 2 * (1 + b[:, None]), name="c")  # newest (b) first
    loss = g.surrogate_loss()
    p = torch.softmax(logits, -1)
    pb = torch.sigmoid(logits[:, 0])
    value = ((p * TAB**2).sum(-1) * (1 + pb)).sum()
    torch.testing.assert_close(loss, value)
    torch.testing.assert_close(torch.autograd.grad(loss, logits)[0], torch.autograd.grad(value, logits)[0])


def test_enumerate_errors_name_the_node() -> None:
    th = theta()
    with scg.Graph():
        with pytest.raises(scg.SCGError, match=r"name='x'.*Normal has none"):
            scg.sample(Normal(th[0], 1.0), name="x", estimator=scg.estimators.Enumerate())
        with pytest.raises(scg.SCGError, match=r"name='z', n=2.*does not support several"):
            scg.sample(Categorical(logits=th[:3]), name="z", n=2, estimator=scg.estimators.Enumerate())
    with scg.Graph() as g:
        z = scg.sample(
            Categorical(logits=th[:3].expand(2, 3)), name="z", estimator=scg.estimators.Enumerate()
        )  # (3, 2)
        scg.cost(TAB[z].sum(-1), name="c")  # sums over the enumerated batch: cannot weight
    with pytest.raises(scg.SCGError, match=r"cost node 'c'.*enumerated stochastic node 'z'"):
        g.surrogate_loss()


def test_enumerate_capabilities() -> None:
    caps = scg.estimators.Enumerate().capabilities()
    assert caps == {
        "unbiased": True,
        "needs_rsample": False,
        "score": False,
        "higher_order": True,
        "multi_sample": False,
        "enumerates": True,
        "relaxed": False,
        "reducible": True,
    }


# --------------------------------------------------------------------------- +MULTI


def multinomial_program(th: torch.Tensor, k: int) -> None:
    """α = softmax(θ[:3]); α̃ = μ/k (μ ~ Multinomial(k, α)); cost (α̃ · TAB + θ3)²."""
    a = scg.estimators.multinomial_attention(torch.softmax(th[:, :3], -1), k, name="mu")
    scg.cost((a @ TAB + th[:, 3]) ** 2, name="c")


def test_multinomial_attention_score_function_is_unbiased() -> None:
    th, k = theta(), 3
    probs = torch.softmax(th[:3], -1)
    value = torch.zeros((), dtype=torch.float64)
    for counts in itertools.product(range(k + 1), repeat=3):
        if sum(counts) != k:
            continue
        mu = torch.tensor(counts, dtype=torch.float64)
        p = Multinomial(k, probs=probs).log_prob(mu).exp()
        value = value + p * (mu / k @ TAB + th[3]) ** 2
    (ex,) = torch.autograd.grad(value, th)
    report = check(estimates(lambda t: multinomial_program(t, k), th, 4000, seed=10), ex)
    assert report.passed, str(report)
    with scg.Graph() as g:
        multinomial_program(th.unsqueeze(0), k)
    mu = g.node("mu").value
    assert mu.sum() == k and isinstance(g.node("mu").estimator, scg.ScoreFunction)


def test_multinomial_attention_errors() -> None:
    with scg.Graph():
        with pytest.raises(scg.SCGError, match="positive int"):
            scg.estimators.multinomial_attention(torch.ones(3) / 3, 0, name="a")
        with pytest.raises(scg.SCGError, match="exactly one of probs and logits"):
            scg.estimators.multinomial_attention(None, 2, name="a")


def test_cost_dimensions_where_the_node_has_size_one_are_summed() -> None:
    """Aligning a cost with a node (``sample_dims``): a cost dimension where the node has size 1 is
    summed, so a (B, 1) node is credited per row with the row's total cost, Ĉ_i = Σ_j c[i, j], and
    the score-function gradient is (z_i − σ(θ_i)) Σ_j c[i, j]. Left unsummed, the (B, 3) signal
    failed to expand to the node's shape (a RuntimeError on a valid program)."""
    theta = torch.tensor([[0.3], [-0.4], [1.1]], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    torch.manual_seed(0)
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=theta), name="z")  # (3, 1)
        scg.cost((z + 1.0) * w, name="c")  # (3, 3)
    loss = g.surrogate_loss()
    assert g.credit("z", "c") == "per-element"
    (grad,) = torch.autograd.grad(loss, [theta])
    zv = z.detach()
    torch.testing.assert_close(grad, (zv - torch.sigmoid(theta.detach())) * ((zv + 1.0) * w).sum(-1, keepdim=True))


@pytest.mark.parametrize("options", [{}, {"dice": True}, {"dice_lambda": 0.5}], ids=["default", "dice", "loaded"])
def test_a_batch_of_no_elements_with_sample_dimensions_builds_its_surrogate(options: dict[str, Any]) -> None:
    """A batch of 0 examples (a last batch of the loader, every sequence done) under a node drawn
    with n=2 and an enumerated one: aligning the costs' sample dimensions reshaped with -1, which
    torch cannot infer for no elements (RuntimeError inside torch). The surrogate is 0, its
    gradient empty."""
    th = torch.zeros(0, dtype=torch.float64, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z", n=2, step=0)  # (2, 0)
        e = scg.sample(Bernoulli(logits=z - 0.5), name="e", step=1, estimator=scg.estimators.Enumerate())  # (2, 2, 0)
        y = scg.sample(Bernoulli(logits=z + e), name="y", step=1)
        scg.cost(y * 2.0 + z, name="c", step=1)
    loss = g.surrogate_loss(**options)
    assert loss.item() == 0.0
    (grad,) = torch.autograd.grad(loss, th)
    assert grad.shape == (0,)
