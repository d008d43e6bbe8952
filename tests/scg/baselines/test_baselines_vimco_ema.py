"""VIMCO shared by latents of different shapes and over ``Independent`` latents; EMA(per_element)
when the batch size changes; a baseline given as a string (issue 24, items 8 and 9)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Independent

import scg
import scg.testing as st

K = 2


def _program(vimco: Any) -> Any:
    """h1 ~ Independent(Bern(θ0, θ1)) (k, P, 2) and h2 ~ Bern(θ2) element-wise (k, P, 1): the
    learning signals are (k, P) and (k, P, 1); one objective −log mean_j w_j over both."""

    def run(th: torch.Tensor) -> None:
        h1 = scg.sample(Independent(Bernoulli(logits=th[:, :2]), 1), name="h1", n=K, baseline=vimco)
        h2 = scg.sample(Bernoulli(logits=th[:, 2:3]), name="h2", n=K, baseline=vimco)
        logw = (h1 * torch.tensor([1.0, -2.0], dtype=th.dtype)).sum(-1) + 1.5 * h2[..., 0] * th[:, 3]
        if vimco is None:
            cost = -(torch.logsumexp(logw, 0) - torch.log(torch.tensor(float(K), dtype=th.dtype)))
        else:
            cost = vimco.objective(logw)
        scg.cost(cost, name="bound", reduced=[h1, h2])

    return run


def test_one_vimco_serves_latents_of_different_shapes_and_independent_latents_are_enumerated() -> None:
    th = torch.tensor([0.3, -0.4, 0.2, 0.7], dtype=torch.float64, requires_grad=True)
    exact = st.exact_gradient(lambda: _program(None)(th[None]), [th])[0]  # Independent enumerated
    vimco = scg.baselines.VIMCO()
    est = st.estimate_gradients_batched(_program(vimco), [th], 4000, particles=4000, seed=3)
    report = st.compare(est, exact)
    assert report.passed, str(report)
    plain = st.estimate_gradients_batched(_program(None), [th], 4000, particles=4000, seed=3)
    assert bool((est[:, :3].var(0) < 0.85 * plain[:, :3].var(0)).all()), (est.var(0), plain.var(0))


def test_ema_per_element_refuses_a_changed_batch_size_naming_the_node() -> None:
    ema = scg.baselines.EMA(0.5, per_element=True)
    for batch in (4, 3):
        with scg.Graph() as g:
            z = scg.sample(Categorical(logits=torch.zeros(batch, 3)), name="z", baseline=ema)
            scg.cost(z.float(), name="c")
        if batch == 4:
            g.surrogate_loss()
    with pytest.raises(
        scg.SCGError, match=r"EMA\(per_element=True\) baseline of stochastic node 'z'.*\(3,\).*\(4,\).*batch size"
    ):
        g.surrogate_loss()


@pytest.mark.parametrize("where", ["sample", "estimator", "cost"])
def test_a_string_baseline_is_refused_naming_the_node_and_the_ways_to_pass_one(where: str) -> None:
    with pytest.raises(
        scg.SCGError, match=r"name='v'.*baseline='ema' is a str.*scg\.baselines\.EMA\(beta\).*baseline=b"
    ):
        with scg.Graph():
            dist = Categorical(logits=torch.zeros(3))
            if where == "sample":
                scg.sample(dist, name="v", baseline="ema")  # type: ignore[arg-type]
            elif where == "estimator":
                scg.sample(dist, name="v", estimator=scg.ScoreFunction(baseline="ema"))  # type: ignore[arg-type]
            else:
                scg.cost(torch.ones(3), name="v", baseline="ema")  # type: ignore[arg-type]


PHI = [0.3, -0.8]


def _reordered(phi: torch.Tensor, reorder: Any, vimco: bool) -> Any:
    """h ~ Bern(φ) with 3 samples (3, 2) and the bound −log mean_j exp(ℓ_j), its log-weights
    reordered (or mixed) along the sample dimension before VIMCO.objective sees them."""

    def run() -> None:
        baseline = scg.baselines.VIMCO() if vimco else None
        h = scg.sample(Bernoulli(logits=phi), name="h", n=3, baseline=baseline)
        logw = reorder(1.5 * (h * torch.tensor([1.5, -1.5], dtype=phi.dtype)).sum(-1) + h[:, 0] * h[:, 1])
        if baseline is None:
            scg.cost(
                -(torch.logsumexp(logw, 0) - torch.log(torch.tensor(3.0, dtype=phi.dtype))), name="bound", reduced=h
            )
        else:
            scg.cost(baseline.objective(logw), name="bound", reduced=h)

    return run


def test_vimco_in_sample_order_is_exactly_unbiased() -> None:
    phi = torch.tensor(PHI, dtype=torch.float64, requires_grad=True)
    run, plain = _reordered(phi, lambda x: x, vimco=True), _reordered(phi, lambda x: x, vimco=False)
    expected = st.expected_estimate(run, [phi])[0]
    torch.testing.assert_close(expected, st.exact_gradient(plain, [phi])[0], rtol=1e-9, atol=1e-12)


REORDERS = {
    "sorted": lambda x: x.sort(0).values,
    "flipped": lambda x: x.flip(0),
    "rolled": lambda x: x.roll(1, 0),
    "permuted": lambda x: x[torch.tensor([2, 0, 1])],
    "concatenated": lambda x: torch.cat([x[1:], x[:1]]),
    "centred": lambda x: x - x.mean(0),
    # (flipped, then read back as a gradient, where scg cannot follow the sample positions: a
    # mapping absent from the log-weights is a lost dimension, not dim 0; a mutation sweep's)
    "flipped, read back as a gradient (.grad)": lambda x: _through_grad(x.flip(0)),
}


def _through_grad(x: torch.Tensor) -> torch.Tensor:
    """``x`` read back as the gradient of ``v · x`` (a backward inside the graph): the result
    carries x's influence but no sample positions (scg cannot follow them through autograd)."""
    v = torch.zeros(x.shape, dtype=x.dtype, requires_grad=True)
    (v * x).sum().backward()
    assert v.grad is not None
    return v.grad


@pytest.mark.parametrize("how", sorted(REORDERS))
def test_log_weights_reordered_or_mixed_along_the_samples_are_refused_naming_the_node(how: str) -> None:
    # the bound's value ignores the order (log-mean-exp), but b_j = −L̂_{−j} then reads sample j
    # itself through another log-weight: sorted, E[ĝ] was (0.077, −0.044) against the exact
    # (−0.491, 0.251), the sign reversed
    phi = torch.tensor(PHI, dtype=torch.float64, requires_grad=True)
    run = _reordered(phi, REORDERS[how], vimco=True)
    with pytest.raises(scg.SCGError, match=r"VIMCO baseline of stochastic node 'h'.*log-weight j must be computed"):
        st.expected_estimate(run, [phi])


def test_log_weights_holding_the_samples_at_another_dimension_are_refused() -> None:
    """h ~ Bern(φ) of batch (3,) with n=3: log-weights (3, 3) transposed hold the samples at
    dimension 1, and still have k along dim 0; b_j = −L̂_{−j} would then leave out example j, not
    sample j (accepted, E[ĝ] was (−1.245, 0.074, −0.411) against the exact (−1.357, 0.074, −0.530)
    of that bound: a mutation sweep)."""
    phi = torch.tensor([0.3, -0.8, 0.5], dtype=torch.float64, requires_grad=True)

    def run(transposed: bool) -> Any:
        def program() -> None:
            baseline = scg.baselines.VIMCO()
            h = scg.sample(Bernoulli(logits=phi), name="h", n=3, baseline=baseline)  # (3, 3)
            logw = 1.5 * h * torch.tensor([1.5, -1.5, 0.5], dtype=phi.dtype) + h * h.flip(-1)
            scg.cost(baseline.objective(logw.T if transposed else logw), name="bound", reduced=h)

        return program

    def plain() -> None:
        h = scg.sample(Bernoulli(logits=phi), name="h", n=3)
        logw = 1.5 * h * torch.tensor([1.5, -1.5, 0.5], dtype=phi.dtype) + h * h.flip(-1)
        k = torch.log(torch.tensor(3.0, dtype=phi.dtype))
        scg.cost(-(torch.logsumexp(logw, 0) - k), name="bound", reduced=h)

    expected = st.expected_estimate(run(False), [phi])[0]
    torch.testing.assert_close(expected, st.exact_gradient(plain, [phi])[0], rtol=1e-9, atol=1e-12)
    with pytest.raises(scg.SCGError, match=r"VIMCO baseline of stochastic node 'h'.*at dimension 1, not 0"):
        st.expected_estimate(run(True), [phi])
