"""Relaxations (Gumbel-softmax, straight-through: biased, and the bias is measured) and RELAX
(unbiased for any control variate; the control is trained to reduce the variance).
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from _estimators_util import check, estimates, exact_gradient_batched
from torch.distributions import Bernoulli, Categorical, OneHotCategorical

import scg

TAB = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)


def theta() -> torch.Tensor:
    return torch.tensor([0.3, -0.2, 0.5, 0.7], dtype=torch.float64, requires_grad=True)


def one_hot_program(estimator: Any = None, n: int | None = None):  # type: ignore[no-untyped-def]
    """y ~ OneHot(θ[:3]); b ~ Bern(θ0); cost (y·TAB + θ3)² + (2b − θ1)²."""

    def run(th: torch.Tensor) -> None:
        y = scg.sample(OneHotCategorical(logits=th[:, :3]), name="y", estimator=estimator, n=n)
        b = scg.sample(Bernoulli(logits=th[:, 0]), name="b", estimator=estimator, n=n)
        scg.cost((y @ TAB + th[:, 3]) ** 2 + (2 * b - th[:, 1]) ** 2, name="c")

    return run


def exact(run: Any, th: torch.Tensor) -> torch.Tensor:
    return exact_gradient_batched(run, th)


# --------------------------------------------------------------------------- Gumbel-softmax


@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax_is_biased_and_the_test_detects_it(hard: bool) -> None:
    """Measured (θ = (0.3, −0.2, 0.5, 0.7), 8000 estimates, seed 1; exact gradient
    (−0.39, −3.90, 2.76, 3.84)):

    ===========  =====================================  ======================  =========
    estimator    mean estimate                          max |bias|              max |z|
    ===========  =====================================  ======================  =========
    soft, τ=2    (0.48, −3.60, 1.13, 3.25)              1.63                    272
    soft, τ=1    (0.48, −4.12, 1.88, 3.52)              0.89                    92
    soft, τ=0.5  (0.23, −4.30, 2.45, 3.72)              0.62                    30
    hard, τ=1    (0.34, −4.32, 2.13, 3.83)              0.73                    55
    hard, τ=0.5  (0.12, −4.38, 2.62, 3.83)              0.50                    19
    ===========  =====================================  ======================  =========

    (critical value of the test: 3.66). The bias shrinks with τ; the variance grows.
    """
    th = theta()
    ex = exact(one_hot_program(), th)
    est = estimates(one_hot_program(scg.estimators.GumbelSoftmax(1.0, hard=hard)), th, 8000, seed=1)
    report = check(est, ex)
    assert not report.passed, str(report)
    bias = (est.mean(0) - ex).abs().max()
    assert float(bias) > 0.3, (est.mean(0), ex)
    assert float(report.z.abs().max()) > 10


def test_gumbel_softmax_bias_shrinks_with_the_temperature() -> None:
    th = theta()
    ex = exact(one_hot_program(), th)
    bias = {}
    for temp in (2.0, 0.5):
        est = estimates(one_hot_program(scg.estimators.GumbelSoftmax(temp)), th, 8000, seed=2)
        bias[temp] = float((est.mean(0) - ex).norm())
    assert bias[0.5] < bias[2.0] / 2, bias


def test_gumbel_softmax_values() -> None:
    logits = torch.tensor([[0.2, -0.5, 0.1]], requires_grad=True)
    with scg.Graph() as g:
        soft = scg.sample(OneHotCategorical(logits=logits), name="s", n=4, estimator=scg.estimators.GumbelSoftmax(0.5))
        hard = scg.sample(
            OneHotCategorical(logits=logits), name="h", estimator=scg.estimators.GumbelSoftmax(0.5, hard=True)
        )
        scg.cost((soft * torch.arange(3.0)).sum(-1), name="c")
        scg.cost((hard * torch.arange(3.0)).sum(-1), name="d")
    assert soft.shape == (4, 1, 3) and bool((soft >= 0).all())
    torch.testing.assert_close(soft.sum(-1), torch.ones(4, 1))
    assert set(hard.detach().flatten().tolist()) <= {0.0, 1.0} and float(hard.detach().sum()) == 1.0
    g.surrogate_loss().backward()
    assert logits.grad is not None and bool((logits.grad != 0).any())
    caps = scg.estimators.GumbelSoftmax(1.0).capabilities()
    assert caps["unbiased"] is False and caps["score"] is False


def test_gumbel_softmax_errors() -> None:
    with scg.Graph():
        with pytest.raises(scg.SCGError, match=r"name='z'.*not Categorical.*OneHotCategorical"):
            scg.sample(Categorical(logits=torch.zeros(3)), name="z", estimator=scg.estimators.GumbelSoftmax(1.0))
    for bad in (0.0, -1.0, float("inf"), torch.tensor([1.0, 0.0])):
        with pytest.raises(scg.SCGError, match="temperature"):
            scg.estimators.GumbelSoftmax(bad)


# --------------------------------------------------------------------------- RELAX


class Control(torch.nn.Module):
    """A REBAR-style control: η · f(softmax(z / τ)) plus a linear term (learnable η, τ, w)."""

    def __init__(self, bernoulli: bool) -> None:
        super().__init__()
        self.bernoulli = bernoulli
        self.eta = torch.nn.Parameter(torch.tensor(0.3, dtype=torch.float64))
        self.log_temp = torch.nn.Parameter(torch.tensor(0.0, dtype=torch.float64))
        self.w = torch.nn.Parameter(torch.tensor([0.2, -0.1, 0.05], dtype=torch.float64))
        self.shift = 0.7

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        temp = self.log_temp.exp()
        if self.bernoulli:
            s = torch.sigmoid(z / temp)
            return self.eta * (2 * s + 0.2) ** 2 + self.w[0] * z
        y = torch.softmax(z / temp, -1)
        return self.eta * (y @ TAB + self.shift) ** 2 + z @ self.w


def relax_program(dist: str, relax: Any, n: int | None = None):  # type: ignore[no-untyped-def]
    def run(th: torch.Tensor) -> None:
        est = {} if relax is None else {"estimator": relax}
        if dist == "bernoulli":
            b = scg.sample(Bernoulli(logits=th[:, 0]), name="v", n=n, **est)
            scg.cost((2 * b - th[:, 1]) ** 2 + th[:, 2] * b, name="c")
            return
        d = (OneHotCategorical if dist == "onehot" else Categorical)(logits=th[:, :3])
        v = scg.sample(d, name="v", n=n, **est)
        val = v @ TAB if dist == "onehot" else TAB[v]
        scg.cost((val + th[:, 3]) ** 2, name="c")

    return run


@pytest.mark.parametrize(
    ("dist", "n"), [("categorical", None), ("onehot", None), ("bernoulli", None), ("categorical", 3)]
)
def test_relax_is_unbiased(dist: str, n: int | None) -> None:
    th = theta()
    relax = scg.estimators.RELAX(Control(dist == "bernoulli"))
    report = check(estimates(relax_program(dist, relax, n), th, 6000, seed=3), exact(relax_program(dist, None), th))
    assert report.passed, str(report)


def test_relax_surrogate_value_and_control_gradients() -> None:
    th = theta()
    control = Control(False)
    relax = scg.estimators.RELAX(control)
    torch.manual_seed(4)
    with scg.Graph() as g:
        relax_program("categorical", relax)(th.unsqueeze(0))
    loss = g.surrogate_loss()
    torch.testing.assert_close(loss, g.node("c").value.sum())
    grads = torch.autograd.grad(loss, list(control.parameters()), allow_unused=True, retain_graph=True)
    for gr in grads:  # the surrogate does not train φ ...
        assert gr is None or float(gr.abs().max()) < 1e-12
    var = relax.backward(loss, [th])  # ... RELAX.backward does, by ∇_φ ‖ĝ‖²
    assert th.grad is not None and float(var) > 0
    assert any(p.grad is not None and float(p.grad.abs().max()) > 0 for p in control.parameters())


def test_relax_backward_warns_once_about_a_learned_baseline_outside_params() -> None:
    """``RELAX.backward(loss, params)`` differentiates only ``params`` and φ: a Learned baseline's
    module, which ``loss.backward()`` trains through its regression term, would stop learning
    without a word. It warns once per estimator; with the module in ``params`` it trains as under
    ``loss.backward()``, and φ's gradient is unchanged (its squared gradient has no φ in it)."""
    th = theta()
    net = torch.nn.Linear(4, 1).double()
    bl = scg.baselines.Learned(net)

    def run(relax: Any) -> tuple[torch.Tensor, scg.Graph]:
        torch.manual_seed(4)
        with scg.Graph() as g:
            v = scg.sample(Categorical(logits=th[:3]), name="v", estimator=relax, baseline=bl.given(th.detach()))
            scg.cost((TAB[v] + th[3]) ** 2, name="c")
        return g.surrogate_loss(), g

    def grads_of(relax: Any, params: list[torch.Tensor]) -> list[torch.Tensor]:
        for p in [th, *net.parameters(), *relax.parameters]:
            p.grad = None
        relax.backward(run(relax)[0], params)
        return [p.grad.clone() for p in relax.parameters]

    relax = scg.estimators.RELAX(Control(False))
    with pytest.warns(UserWarning, match=r"reaches 2 tensor\(s\).*\(1, 4\), \(1,\).*Learned baseline"):
        phi_theta_only = grads_of(relax, [th])
    assert all(p.grad is None for p in net.parameters())  # what the warning is about
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grads_of(relax, [th])  # (once per estimator)
    listed = scg.estimators.RELAX(relax.control)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # everything the loss reaches is listed: no warning
        phi_listed = grads_of(listed, [th, *net.parameters()])
    loss, _ = run(scg.estimators.RELAX(relax.control))
    want = torch.autograd.grad(loss, list(net.parameters()))
    for p, w in zip(net.parameters(), want):
        assert p.grad is not None and bool((p.grad != 0).any())
        torch.testing.assert_close(p.grad, w)  # as loss.backward() trains it
    for a, b in zip(phi_theta_only, phi_listed):
        torch.testing.assert_close(a, b)


def test_relax_backward_accumulates_into_existing_grads() -> None:
    """``RELAX.backward`` accumulates ĝ into the params' ``.grad`` and ∇_φ ‖ĝ‖² into φ's, as
    ``loss.backward()`` does (gradient accumulation over micro-batches): two calls give the sum of
    their gradients. Overwriting ``.grad`` lost the first micro-batch's θ and φ gradients."""
    theta = torch.tensor([0.2, -0.3], dtype=torch.float64, requires_grad=True)
    w = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    relax = scg.estimators.RELAX(lambda z: w * z, parameters=[w])

    def backward(seed: int) -> None:
        torch.manual_seed(seed)
        with scg.Graph() as g:
            z = scg.sample(Bernoulli(logits=theta), name="z", estimator=relax)
            scg.cost((z - 0.4) ** 2 * 3.0, name="c")
        relax.backward(g.surrogate_loss(), [theta])

    alone: list[tuple[torch.Tensor, torch.Tensor]] = []
    for seed in (0, 1):
        theta.grad, w.grad = None, None
        backward(seed)
        assert theta.grad is not None and w.grad is not None
        alone.append((theta.grad.clone(), w.grad.clone()))
    theta.grad, w.grad = None, None
    backward(0)
    backward(1)
    torch.testing.assert_close(theta.grad, alone[0][0] + alone[1][0])
    torch.testing.assert_close(w.grad, alone[0][1] + alone[1][1])


def test_relax_training_the_control_reduces_the_variance() -> None:
    th = theta()
    control = Control(False)
    relax = scg.estimators.RELAX(control)
    run = relax_program("categorical", relax)
    before = estimates(run, th, 4000, seed=5)[:, :3].var(0).sum()
    plain = estimates(relax_program("categorical", None), th, 4000, seed=5)[:, :3].var(0).sum()
    opt = torch.optim.Adam(control.parameters(), lr=0.05)
    torch.manual_seed(6)
    for _ in range(60):
        opt.zero_grad()
        th.grad = None
        with scg.Graph() as g:
            run(th.expand(32, 4))
        relax.backward(g.surrogate_loss(), [th])
        opt.step()
    after = estimates(run, th, 4000, seed=7)[:, :3].var(0).sum()
    # measured: plain score function ≈ 30.7, untrained control ≈ 24.6, trained ≈ 16.5
    assert float(after) < 0.8 * float(before), (float(plain), float(before), float(after))
    assert float(after) < 0.65 * float(plain), (float(plain), float(before), float(after))
    report = check(estimates(run, th, 6000, seed=8), exact(relax_program("categorical", None), th))
    assert report.passed, str(report)  # still unbiased with the trained control


def test_relax_errors_name_the_node() -> None:
    th = theta()
    with scg.Graph():
        with pytest.raises(scg.SCGError, match="name='x'.*not Normal"):
            scg.sample(torch.distributions.Normal(th[0], 1.0), name="x", estimator=scg.estimators.RELAX(lambda z: z))
    with scg.Graph() as g:
        v = scg.sample(
            Categorical(logits=th[:3]), name="v", estimator=scg.estimators.RELAX(lambda z: z)
        )  # (3,) instead of ()
        scg.cost(TAB[v], name="c")
    with pytest.raises(scg.SCGError, match=r"RELAX control of stochastic node 'v'.*\(3,\)"):
        g.surrogate_loss()
    with pytest.raises(scg.SCGError, match="callable"):
        scg.estimators.RELAX(3)  # type: ignore[arg-type]
    w = torch.zeros(3)
    for bad, found in (
        ("abc", "expected a list of tensors.*got 'abc'"),
        (w.requires_grad_(), "expected a list of tensors.*got tensor"),
    ):
        with pytest.raises(scg.SCGError, match=rf"RELAX\(parameters=...\): {found}"):
            scg.estimators.RELAX(lambda z: z, parameters=bad)  # type: ignore[arg-type]
    with pytest.raises(scg.SCGError, match=r"RELAX\(parameters=...\): 1 of them do not require grad"):
        scg.estimators.RELAX(lambda z: z, parameters=[torch.zeros(3)])  # (never trained)
    relax = scg.estimators.RELAX(Control(False))
    with scg.Graph() as g:
        scg.cost((TAB[scg.sample(Categorical(logits=th[:3]), name="v", estimator=relax)] + th[3]) ** 2, name="c")
    loss = g.surrogate_loss()
    for args, found in (
        ((3.0, [th]), "expected the surrogate loss, got float"),
        ((loss, th), "expected a list of tensors.*got tensor"),
    ):
        with pytest.raises(scg.SCGError, match=rf"RELAX.backward\(loss, params\): {found}"):
            relax.backward(*args)  # type: ignore[arg-type]
    for cost, kind in ((lambda s: None, "NoneType"), (lambda s: "x", "str")):
        with scg.Graph() as g:
            scg.cost(
                TAB[scg.sample(Categorical(logits=th[:3]), name="v", estimator=scg.estimators.REBAR(cost))], name="c"
            )
        with pytest.raises(scg.SCGError, match=rf"REBAR relaxed_cost of stochastic node 'v'.*returned {kind}"):
            g.surrogate_loss()
    for make in (
        lambda: scg.estimators.GumbelSoftmax(0.5, hard="no"),
        lambda: scg.estimators.RaoBlackwellized(2, baseline=scg.baselines.EMA()),
        lambda: scg.estimators.UnorderedSet(baseline="no"),
    ):
        with pytest.raises(scg.SCGError, match=r"\((hard|baseline)=...\): expected True or False"):
            make()
    with scg.Graph():  # (a draw that does not fit the node: named, not torch's broadcast error)
        with pytest.raises(scg.SCGError, match=r"name='y'.*the draw of OneHotCategorical \(batch shape \(2,\)\)"):
            scg.sample(
                OneHotCategorical(logits=torch.zeros(2, 3)),
                name="y",
                estimator=scg.estimators.GumbelSoftmax(torch.ones(5)),
            )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [None, 3])
def test_gumbel_softmax_draws_torchs_relaxed_one_hot_sample(dtype: torch.dtype, n: int | None) -> None:
    """GumbelSoftmax writes the Gumbel noise itself (no distribution built, no host read): with
    the same seed its relaxed draw, and its gradient, are those of torch's
    ``RelaxedOneHotCategorical`` built from the node's logits, bit for bit."""
    from torch.distributions import RelaxedOneHotCategorical

    logits = (torch.randn(4, 5, generator=torch.Generator().manual_seed(0)) * 3).to(dtype).requires_grad_()
    dist = OneHotCategorical(logits=logits)
    shape = torch.Size(() if n is None else (n,))
    weights = torch.arange(5, dtype=dtype)
    torch.manual_seed(1)
    got = scg.estimators.GumbelSoftmax(0.5).draw(dist, shape)
    torch.manual_seed(1)
    want = RelaxedOneHotCategorical(torch.as_tensor(0.5, dtype=dtype), logits=logits).rsample(shape)
    assert torch.equal(got, want)
    g_got, g_want = (torch.autograd.grad((y * weights).sum(), logits, retain_graph=True)[0] for y in (got, want))
    assert torch.equal(g_got, g_want)
    torch.manual_seed(2)  # not vacuous: another draw differs
    assert not torch.equal(scg.estimators.GumbelSoftmax(0.5).draw(dist, shape), want)
