"""Multi-sample and self-critical baselines, reward normalization and score scaling.

Baselines must leave the mean of the estimate unchanged (z-test against enumeration) and, where
they are linear in the learning signals (leave-one-out, self-critical), scale with the cost.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _estimators_util import check, estimates, exact_gradient_batched
from torch.distributions import Bernoulli, Categorical, Multinomial, Normal

import scg
import scg.testing as st
from scg.baselines import Baseline

TAB = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)


def theta() -> torch.Tensor:
    return torch.tensor([0.3, -0.2, 0.5, 0.7], dtype=torch.float64, requires_grad=True)


def program(
    n: int | None = None, baseline: Any = None, scale: float = 1.0, offset: float = 0.0, trajectories: bool = False
):  # type: ignore[no-untyped-def]
    """z ~ Cat(θ[:3]) (n samples) → x ~ Bern(θ3·(z − 1)); c = scale·(TAB[z](1 + x) + θ0·x +
    offset). With ``trajectories`` the baseline goes on x (which carries z's sample dim)."""

    def run(th: torch.Tensor) -> None:
        zb = None if trajectories else baseline
        z = scg.sample(Categorical(logits=th[:, :3]), name="z", n=n, baseline=zb, step=0)
        x = scg.sample(
            Bernoulli(logits=th[:, 3] * (z.to(th.dtype) - 1)),
            name="x",
            step=1,
            baseline=baseline if trajectories else None,
        )
        scg.cost(scale * (TAB[z] * (1 + x) + th[:, 0] * x + offset), name="c", step=1)

    return run


def exact(run: Any, th: torch.Tensor) -> torch.Tensor:
    return exact_gradient_batched(run, th)


# --------------------------------------------------------------------------- leave-one-out


@pytest.mark.parametrize("k", [2, 4])
def test_leave_one_out_is_unbiased(k: int) -> None:
    th = theta()
    report = check(estimates(program(k, scg.baselines.LeaveOneOut()), th, 4000, seed=k), exact(program(), th))
    assert report.passed, str(report)


def test_leave_one_out_over_trajectories_is_unbiased() -> None:
    """x has no n of its own; its leading dim is z's k: k independent trajectories."""
    th = theta()
    loo = scg.baselines.LeaveOneOut()
    run = program(4, loo, trajectories=True)
    report = check(estimates(run, th, 4000, seed=11), exact(program(), th))
    assert report.passed, str(report)


def test_leave_one_out_removes_a_constant_offset() -> None:
    th = theta()
    plain = estimates(program(4, offset=20.0), th, 3000, seed=12).var(0)
    loo = estimates(program(4, scg.baselines.LeaveOneOut(), offset=20.0), th, 3000, seed=12)
    assert bool((loo.var(0)[:3] < plain[:3] / 10).all()), (plain, loo.var(0))


@pytest.mark.parametrize("scale", [-3.0, 0.5, 7.0])
def test_leave_one_out_estimate_scales_linearly_with_the_cost(scale: float) -> None:
    th = theta()
    loo = scg.baselines.LeaveOneOut()
    base = estimates(program(4, loo), th, 500, seed=13, particles=500)
    scaled = estimates(program(4, loo, scale=scale), th, 500, seed=13, particles=500)
    torch.testing.assert_close(scaled, scale * base)


def test_leave_one_out_matches_the_mean_centred_form() -> None:
    """(1/k) Σ ∇log p_i (c_i − b_i) with b_i = mean of others == (1/(k−1)) Σ ∇log p_i (c_i − c̄)."""
    logits = torch.tensor([0.1, -0.3, 0.4], dtype=torch.float64, requires_grad=True)
    k = 5
    torch.manual_seed(14)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=logits), name="z", n=k, baseline=scg.baselines.LeaveOneOut())
        scg.cost(TAB[z] ** 2, name="c")
    (grad,) = torch.autograd.grad(g.surrogate_loss(), logits)
    c = TAB[z] ** 2
    logp = Categorical(logits=logits).log_prob(z)
    manual = (logp * (c - c.mean())).sum() / (k - 1)
    torch.testing.assert_close(grad, torch.autograd.grad(manual, logits)[0])


def test_leave_one_out_errors_name_the_node() -> None:
    th = theta()
    loo = scg.baselines.LeaveOneOut()
    for n, match in ((None, "'z'.*no sample dimension"), (1, "'z'.*needs k >= 2")):
        with scg.Graph() as g:
            z = scg.sample(Categorical(logits=th[:3]), name="z", n=n, baseline=loo)
            scg.cost(TAB[z], name="c")
        with pytest.raises(scg.SCGError, match=match):
            g.surrogate_loss()
    with scg.Graph() as g:
        e = scg.sample(Bernoulli(logits=th[0]), name="e", estimator=scg.estimators.Enumerate())
        z = scg.sample(Categorical(logits=th[:3] * e[:, None]), name="z", baseline=loo)
        scg.cost(TAB[z], name="c")
    with pytest.raises(scg.SCGError, match="'z'.*leading dimension is an enumeration"):
        g.surrogate_loss()
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=th[:3]), name="z", n=3, baseline=loo)
        scg.cost(torch.logsumexp(TAB[z], 0), name="c", reduced=z)
    with pytest.raises(scg.SCGError, match="'z'.*reduced its sample dimension.*VIMCO"):
        g.surrogate_loss()


# --------------------------------------------------------------------------- VIMCO


def vimco_program(k: int, vimco: Any):  # type: ignore[no-untyped-def]
    """h ~ Bern(θ0) (k samples); log w_j = θ1·h_j + TAB[h_j] − 0.5θ2²; cost −log mean_j w_j."""

    def run(th: torch.Tensor) -> None:
        h = scg.sample(Bernoulli(logits=th[:, 0]), name="h", n=k, baseline=vimco)
        logw = th[:, 1] * h + TAB[h.long()] - 0.5 * th[:, 2] ** 2
        if vimco is None:
            scg.cost(-(torch.logsumexp(logw, 0) - torch.log(torch.tensor(float(k)))), name="c", reduced=h)
        else:
            scg.cost(vimco.objective(logw), name="c", reduced=h)

    return run


def test_vimco_is_unbiased_and_reduces_variance() -> None:
    th, k = theta(), 3
    ex = st.exact_gradient(lambda: vimco_program(k, None)(th.unsqueeze(0)), [th])[0]  # n samples: scg.testing
    est = estimates(vimco_program(k, scg.baselines.VIMCO()), th, 4000, seed=15)
    report = check(est, ex)
    assert report.passed, str(report)
    plain = estimates(vimco_program(k, None), th, 4000, seed=15)
    assert float(est[:, 0].var()) < 0.5 * float(plain[:, 0].var())


def test_vimco_baseline_value() -> None:
    logw = torch.tensor([[0.5], [-1.0], [2.0]], dtype=torch.float64)
    b = scg.baselines.vimco.leave_one_out_bounds(logw)
    for j in range(3):
        others = [i for i in range(3) if i != j]
        mean_others = logw[others].mean()
        manual = torch.log((logw[others].exp().sum() + mean_others.exp()) / 3)
        torch.testing.assert_close(b[j, 0], manual)


def test_vimco_errors() -> None:
    th = theta()
    vimco = scg.baselines.VIMCO()
    with scg.Graph() as g:
        h = scg.sample(Bernoulli(logits=th[0]), name="h", n=3, baseline=vimco)
        scg.cost(-h.mean(0), name="c", reduced=h)
    with pytest.raises(scg.SCGError, match="'h'.*call vimco.objective"):
        g.surrogate_loss()
    with scg.Graph() as g:
        h = scg.sample(Bernoulli(logits=th[0]), name="h", n=3, baseline=vimco)
        scg.cost(vimco.objective(torch.zeros(4) + h.sum()), name="c", reduced=h)
    with pytest.raises(scg.SCGError, match="'h'.*3 samples.*4 along dim 0"):
        g.surrogate_loss()
    with pytest.raises(scg.SCGError, match="k >= 2"):
        vimco.objective(torch.zeros(1))


# --------------------------------------------------------------------------- self-critical


def sc_program(baseline: Any = None, n: int | None = None):  # type: ignore[no-untyped-def]
    def run(th: torch.Tensor) -> torch.Tensor:
        z = scg.sample(Categorical(logits=th[:, :3]), name="z", baseline=baseline, n=n)
        x = scg.sample(Normal(th[:, 3] * z.to(th.dtype), 1.0), name="x")
        return scg.cost((TAB[z] - x) ** 2 + th[:, 0] * x, name="c")

    return run


def test_greedy_intervention_returns_modes() -> None:
    th = theta()
    with torch.no_grad(), scg.Graph(intervene=scg.estimators.greedy) as g:
        sc_program(n=2)(th.unsqueeze(0))
    assert g.node("z").value.tolist() == [[2], [2]]  # argmax of θ[:3]
    torch.testing.assert_close(g.node("x").value, torch.full((2, 1), 2 * 0.7, dtype=th.dtype))
    bern = Bernoulli(probs=torch.tensor([0.2, 0.5, 0.9]))
    assert scg.estimators.greedy("b", None, bern, torch.Size([])).tolist() == [0.0, 0.0, 1.0]
    with pytest.raises(scg.SCGError, match="node 'm' has a Multinomial"):
        scg.estimators.greedy("m", None, Multinomial(2, torch.ones(3)), torch.Size([]))


@pytest.mark.parametrize("structure", [None, scg.Declared()], ids=["tracked", "declared"])
def test_an_intervention_of_the_wrong_shape_names_the_node(structure: Any) -> None:
    def wrong(name: str, step: int | None, dist: Any, shape: torch.Size) -> torch.Tensor:
        return torch.zeros(5)

    logits = torch.zeros(2, 3)
    with (
        pytest.raises(
            scg.SCGError,
            match=r"name='z'.*intervention returned \(5,\), expected a tensor of shape "
            r"\(2,\)",
        ),
        scg.Graph(intervene=wrong, structure=structure),
    ):
        scg.sample(Categorical(logits=logits), name="z")


def self_critical(th: torch.Tensor, n: int | None = None) -> None:
    with torch.no_grad(), scg.Graph(intervene=scg.estimators.greedy):
        greedy_cost = sc_program(n=n)(th)
    sc_program(scg.baselines.SelfCritical(greedy_cost), n=n)(th)


@pytest.mark.parametrize("n", [None, 3])
def test_self_critical_is_unbiased(n: int | None) -> None:
    th = theta()
    report = check(estimates(lambda t: self_critical(t, n), th, 4000, seed=16), exact(sc_program(), th))
    assert report.passed, str(report)


def test_self_critical_scales_linearly_and_accepts_a_callable() -> None:
    th = theta()

    def run(t: torch.Tensor, scale: float) -> None:
        with torch.no_grad(), scg.Graph(intervene=scg.estimators.greedy):
            greedy_cost = scale * sc_program()(t)
        z = scg.sample(
            Categorical(logits=t[:, :3]), name="z", baseline=scg.baselines.SelfCritical(lambda node: greedy_cost)
        )
        scg.cost(scale * (TAB[z] ** 2 + t[:, 0]), name="c")

    base = estimates(lambda t: run(t, 1.0), th, 500, seed=17, particles=500)
    torch.testing.assert_close(estimates(lambda t: run(t, -2.5), th, 500, seed=17, particles=500), -2.5 * base)


def test_self_critical_inputs_and_errors() -> None:
    th = theta()
    with scg.Graph() as g:
        z0 = scg.sample(Categorical(logits=th[:3]), name="z0")
        sc = scg.baselines.SelfCritical(TAB[z0])  # from a node that precedes z1: allowed
        z1 = scg.sample(Categorical(logits=th[:3] + z0), name="z1", baseline=sc)
        scg.cost(TAB[z1] + TAB[z0], name="c")
    assert g.node("z1").baseline_inputs.mask == 1 << g.node("z0").index  # type: ignore[attr-defined]
    assert torch.isfinite(g.surrogate_loss())
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=th[:3]), name="z", baseline=scg.baselines.SelfCritical(lambda node: "oops"))  # type: ignore
        scg.cost(TAB[z], name="c")
    with pytest.raises(scg.SCGError, match="'z'.*returned str"):
        g.surrogate_loss()
    with pytest.raises(scg.SCGError, match="not finite"):
        scg.baselines.SelfCritical(torch.tensor([float("nan")]))


def test_a_callable_self_critical_value_computed_from_the_node_is_refused() -> None:
    """The callable form was not checked: a "greedy" cost computed from the node itself in the same
    graph is b_v = c(v), which zeroed the node's score term without a word. From an earlier node it
    is allowed (that node precedes the draw)."""
    th = theta()
    box: dict[str, torch.Tensor] = {}
    sc = scg.baselines.SelfCritical(lambda node: box[node.name])
    with scg.Graph() as g:
        z0 = scg.sample(Categorical(logits=th[:3]), name="z0")
        box["z1"] = TAB[z0]  # from the node before z1: allowed
        z1 = scg.sample(Categorical(logits=th[:3] + z0), name="z1", baseline=sc)
        scg.cost(TAB[z1] + TAB[z0], name="c")
    assert g.surrogate_loss().requires_grad
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th[:3]), name="z", baseline=sc)
        box["z"] = z * 1.0
        scg.cost(z * 1.0, name="c")
    with pytest.raises(scg.SCGError, match=r"SelfCritical baseline of stochastic node 'z'.*own sample.*Theorem 2"):
        g.surrogate_loss()


@pytest.mark.parametrize("node_baseline", [True, False])
def test_a_callable_self_critical_value_computed_when_the_surrogate_is_built_is_seen(node_baseline: bool) -> None:
    """The callable runs as the surrogate is built, after the graph's tracking: what it computed from
    the graph's nodes carried no mark. As a cost's baseline, ``lambda node: 5 * z`` biased z's
    gradient (z of 70-136) with no error. It is refused, on a node (its own sample) and on a cost (a
    cost's baseline may depend on no node of the graph: any may influence the cost)."""
    th = theta()
    box: dict[str, torch.Tensor] = {}
    sc = scg.baselines.SelfCritical(lambda node: 5.0 * box["z"].double())  # (5 z: computed at the call)
    with scg.Graph() as g:
        z = box["z"] = scg.sample(Categorical(logits=th[:3]), name="z", baseline=sc if node_baseline else None)
        scg.cost(TAB[z], name="c", baseline=None if node_baseline else sc)
    kind = "stochastic node 'z'.*own sample" if node_baseline else "cost node 'c'.*this graph's stochastic nodes"
    with pytest.raises(scg.SCGError, match=rf"SelfCritical baseline of {kind}"):
        g.surrogate_loss()


# --------------------------------------------------------------------------- normalization


def test_normalized_centring_is_unbiased() -> None:
    th = theta()
    norm = scg.baselines.Normalized(scg.baselines.EMA(0.3), scale=False)
    report = check(
        estimates(program(None, norm, offset=5.0), th, 4000, seed=18, particles=500), exact(program(offset=5.0), th)
    )
    assert report.passed, str(report)


def test_normalized_scaling_divides_the_score_term_by_the_running_std() -> None:
    """Pure score-function graph: E[estimate] = exact / max(1, √v) with v from past batches."""
    logits = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64, requires_grad=True)
    norm = scg.baselines.Normalized(beta=0.5)

    def run(t: torch.Tensor) -> None:
        z = scg.sample(Categorical(logits=t), name="z", baseline=norm)
        scg.cost(4.0 * TAB[z] ** 2, name="c")

    estimates(run, logits, 2000, seed=19, particles=500)  # warm up the statistics
    mean, var = norm.stats[("z", None)]
    assert var > 1.0 and mean > 0.0
    est = estimates(run, logits, 4000, seed=20, particles=4000)  # one batch: fixed statistics
    ex = exact_gradient_batched(run, logits)
    report = check(est * max(1.0, var**0.5), ex)
    assert report.passed, str(report)
    assert not check(est, ex).passed  # unscaled, the estimate is shrunk: biased
    state = norm.state_dict()
    other = scg.baselines.Normalized()
    other.load_state_dict(state)
    assert other.stats == norm.stats


# --------------------------------------------------------------------------- score scale


def test_score_scale_reweights_only_the_score_terms() -> None:
    th = theta()
    pure = program()  # θ0·x enters the cost directly: a pathwise term
    one = estimates(pure, th, 500, seed=21, particles=500)
    half = estimates(pure, th, 500, seed=21, particles=500, score_scale=0.5)
    zero = estimates(pure, th, 500, seed=21, particles=500, score_scale=0.0)
    # θ0's gradient is pathwise (x) plus score (z, x); θ1, θ2 are score-only
    torch.testing.assert_close(half[:, 1:3], 0.5 * one[:, 1:3])
    torch.testing.assert_close(half, zero + 0.5 * (one - zero))
    report = check(estimates(pure, th, 4000, seed=22, score_scale=0.5), exact(pure, th))
    assert not report.passed  # a reweighting: biased
    with scg.Graph() as g:
        pure(th.unsqueeze(0))
    with pytest.raises(scg.SCGError, match="score_scale"):
        g.surrogate_loss(score_scale=float("nan"))


class _Shift(Baseline):
    """A test baseline returning a fixed value (for the `scale` plumbing)."""

    def __init__(self, value: float, scale: float) -> None:
        self.value, self.scale = value, scale

    def __call__(self, nodes: Any, targets: torch.Tensor, info: Any) -> scg.baselines.BaselineResult:
        return scg.baselines.BaselineResult(
            torch.tensor(self.value, dtype=targets.dtype), scale=torch.tensor(self.scale, dtype=targets.dtype)
        )


def test_baseline_result_scale_multiplies_the_learning_signal() -> None:
    logits = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64, requires_grad=True)
    grads = []
    for bl in (_Shift(1.0, 1.0), _Shift(1.0, 0.25)):
        torch.manual_seed(23)
        with scg.Graph() as g:
            z = scg.sample(Categorical(logits=logits), name="z", baseline=bl)
            scg.cost(TAB[z], name="c")
        grads.append(torch.autograd.grad(g.surrogate_loss(), logits)[0])
    torch.testing.assert_close(grads[1], 0.25 * grads[0])


def _learned_without_inputs() -> None:
    th = theta()
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th[0]), name="z", baseline=scg.baselines.Learned(torch.nn.Linear(3, 1)))
        scg.cost(z * 1.0, name="c")
    g.surrogate_loss()


def _learned_of_the_wrong_shape() -> None:
    th = theta()
    bl = scg.baselines.Learned(torch.nn.Linear(2, 1)).given(torch.randn(4, 5))
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th[0].expand(4)), name="z", baseline=bl)
        scg.cost(z * 1.0, name="c")
    g.surrogate_loss()


class _ReturnsATensor(scg.baselines.Baseline):
    def __call__(self, nodes, targets, info):  # type: ignore[no-untyped-def, override]
        return torch.zeros(())


def _a_baseline_returning_a_tensor() -> None:
    th = theta()
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th[0]), name="z", baseline=_ReturnsATensor())
        scg.cost(z * 1.0, name="c")
    g.surrogate_loss()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: scg.baselines.EMA(init=torch.ones(3)), r"EMA\(init=...\): expected a finite number"),
        (lambda: scg.baselines.EMA(beta=True), r"EMA\(beta\): beta must be in \(0, 1\]"),
        (lambda: scg.baselines.EMA().load_state_dict({}), r"EMA.load_state_dict: the state lacks 'beta'"),
        (lambda: scg.baselines.Constant(True), r"Constant\(value\): expected a finite number or tensor, got True"),
        (lambda: scg.baselines.Constant(torch.tensor(1 + 2j)), r"expected a real tensor, got one of dtype"),
        (lambda: scg.baselines.Learned(torch.nn.Linear(3, 1), loss_weight=-1), r"loss_weight=...\): expected a finite"),
        (lambda: scg.baselines.Learned(torch.nn.Linear(3, 1), loss_weight=float("nan")), r"loss_weight"),
        (_learned_without_inputs, r"Learned baseline of stochastic node 'z'.*0 input\(s\) failed.*\.given\(h\)"),
        (
            _learned_of_the_wrong_shape,
            r"Learned baseline of stochastic node 'z'.*Linear with 1 input\(s\) failed \(shapes",
        ),
        (lambda: scg.baselines.EMA().load_state_dict(3), r"EMA.load_state_dict: expected the dict .* got int"),  # type: ignore[arg-type]
        (lambda: scg.baselines.EMA(per_element="no"), r"EMA\(per_element=...\): expected True or False, got 'no'"),
        (lambda: scg.baselines.Normalized(scale="no"), r"Normalized\(scale=...\): expected True or False"),  # type: ignore[arg-type]
        (
            _a_baseline_returning_a_tensor,
            r"the baseline .* of stochastic node 'z'.* returned Tensor; a Baseline's __call__",
        ),
    ],
)
def test_a_bad_baseline_argument_is_refused_naming_it(call, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(scg.SCGError, match=message):
        call()


def test_leave_one_out_on_a_cost_is_refused_naming_where_it_belongs() -> None:
    """Subtracted from a cost, the other samples' costs depend on every upstream node without a
    sample dimension (a biased baseline for those). It was refused as "the node has no sample
    dimension", although the cost held one."""
    logits = torch.zeros(3, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=logits), name="z", n=4)
        scg.cost(z * 1.0, name="c", baseline=scg.baselines.LeaveOneOut())
    with pytest.raises(scg.SCGError, match=r"LeaveOneOut\(\) on cost node 'c'.*attach it to that node"):
        g.surrogate_loss()


def test_a_self_critical_cost_baseline_is_broadcast_over_the_cost_s_samples() -> None:
    """A greedy cost per example (B,) for a cost of an ``n=k`` node (k, B), as on the node itself: it
    was refused ("does not line up with the node's batch shape (k, B)"), since a cost's baseline was
    given no sample layout. Unbiased against enumeration."""
    th = torch.tensor([0.3, -0.5, 0.9], dtype=torch.float64, requires_grad=True)

    def run(t: torch.Tensor) -> None:  # t: (P, 3), one example per particle
        z = scg.sample(Categorical(logits=t), name="z", n=2)  # (2, P)
        greedy = torch.full((t.shape[0],), 1.5, dtype=t.dtype)  # (P,): per example
        scg.cost(TAB[z] ** 2, name="c", baseline=scg.baselines.SelfCritical(greedy))

    want = st.exact_gradient(lambda: run(th.unsqueeze(0)), [th])[0]
    report = check(estimates(run, th, 4000, seed=21, particles=2000), want)
    assert report.passed, str(report)
