"""``Learned``: the baseline's regression trains its own module only, never the model (issue 24).

A feature h(θ) of the model passed to ``Learned.given`` must not carry the regression loss's
gradient into θ: that term is not part of ∇_θ E[Σ costs], so it would bias the estimate.
"""

from __future__ import annotations

import torch
from torch.distributions import Bernoulli, Categorical

import scg
import scg.testing as st


def _learned() -> scg.baselines.Learned:
    module = torch.nn.Linear(1, 1).double()
    with torch.no_grad():
        module.weight.fill_(2.0)
        module.bias.fill_(1.0)
    return scg.baselines.Learned(module)


def test_learned_fit_on_a_model_feature_does_not_reach_the_model() -> None:
    """Unbiased against enumeration; without the detach |z| ≈ 35 on θ3 (the feature's weight)."""
    theta = torch.tensor([0.3, -0.1, 0.2, 0.5], dtype=torch.float64, requires_grad=True)
    learned = _learned()

    def run(th: torch.Tensor) -> None:
        h = th[:, 3:4] * 1.0  # a hidden feature of the model, carrying ∇θ
        z = scg.sample(Categorical(logits=th[:, :3]), name="z", baseline=learned.given(h))
        scg.cost((z.to(th.dtype) - 0.5) ** 2 + th[:, 3] ** 2, name="c")

    report = st.check_unbiased(lambda: run(theta[None]), [theta], n=2000, batched=run, particles=2000)
    assert report.passed, str(report)


def test_learned_regression_trains_the_module_and_not_the_feature() -> None:
    """The regression's gradient: 2·w·mean(b − Ĉ)·h into the module's weight, 0 into h's source."""
    learned = _learned()
    h_source = torch.tensor([[0.5], [-1.0]], dtype=torch.float64, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(
            Categorical(logits=torch.zeros(2, 3, dtype=torch.float64)), name="z", baseline=learned.given(h_source * 1.0)
        )
        c = scg.cost(z.to(torch.float64) + 1.0, name="c")
    loss = g.surrogate_loss()
    w = learned.module.weight
    gw, gh = torch.autograd.grad(loss, [w, h_source], allow_unused=True)
    assert gh is None or bool((gh == 0).all()), gh
    pred = 2.0 * h_source.detach() + 1.0  # (2, 1)
    want = (2.0 * (pred.squeeze(1) - c.detach()) * h_source.detach().squeeze(1)).mean()
    torch.testing.assert_close(gw.reshape(()), want)


def _per_step_gradients(shared: bool, reuse: bool) -> list[torch.Tensor]:
    """Three Bernoulli steps, each with a learned baseline bound to its own input: copies of one
    ``Learned`` (``shared``: evaluated in one call) or separate ``Learned`` objects on the same
    module (one call each); ``reuse``: the last step reuses the first step's copy."""
    torch.manual_seed(0)
    module = torch.nn.Linear(2, 1).double()
    theta = torch.tensor([0.3, -0.4, 0.1], dtype=torch.float64, requires_grad=True)
    xs = [torch.randn(4, 2, dtype=torch.float64) for _ in range(3)]
    one = scg.baselines.Learned(module)
    copies = [one.given(x) if shared else scg.baselines.Learned(module).given(x) for x in xs]
    if reuse:
        copies[2] = copies[0]
    torch.manual_seed(1)
    with scg.Graph(structure=scg.Declared()) as g:
        total = torch.zeros(4, dtype=torch.float64)
        for t in range(3):
            z = scg.sample(Bernoulli(logits=theta[t].expand(4)), name="z", step=t, baseline=copies[t])
            total = total + (t + 1.0) * z
        scg.cost(total, name="c", step=2)
    return list(torch.autograd.grad(g.surrogate_loss(), [theta, module.weight, module.bias]))


def test_copies_of_one_learned_baseline_evaluated_together_give_each_its_own_regression() -> None:
    """The bound copies of one ``Learned`` go to one call (one prediction per copy, stacked);
    the gradients of the model and of the module are those of one call per copy: each copy's
    regression loss is the mean over its own rows (a copy bound to two nodes included)."""
    for reuse in (False, True):
        got, want = _per_step_gradients(True, reuse), _per_step_gradients(False, reuse)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    # not vacuous: one mean over the three copies' rows (instead of the sum of their means)
    # would give a third of the module's gradient, which the comparison refuses
    got, want = _per_step_gradients(True, False), _per_step_gradients(False, False)
    assert float(want[1].abs().max()) > 1e-3
    assert not torch.allclose(got[1], want[1] / 3)


def test_a_container_of_inputs_is_read_as_it_was_when_the_baseline_was_bound() -> None:
    """``given(hs)`` with a list the program appends to after the draw: the module reads ``hs[-1]``
    when the surrogate is built, which was the node's own sample (z of 57-633 against the exact
    gradient; the checks saw only the tensors recorded at the draw). The list is copied when bound."""
    theta = torch.tensor([0.3, -0.1, 0.2], dtype=torch.float64, requires_grad=True)

    class Last(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.nn.Parameter(torch.tensor(3.0, dtype=torch.float64))

        def forward(self, hs: list[torch.Tensor]) -> torch.Tensor:
            return self.scale * hs[-1]

    learned = scg.baselines.Learned(Last())

    def run(th: torch.Tensor) -> None:
        hs = [th[:, :1].detach() * 0.0]  # (P, 1): what is known before the draw
        z = scg.sample(Categorical(logits=th), name="z", baseline=learned.given(hs))
        hs.append(z.to(th.dtype)[:, None])  # after the draw: the node's own sample
        scg.cost((z.to(th.dtype) - 0.5) ** 2, name="c")

    report = st.check_unbiased(lambda: run(theta[None]), [theta], n=2000, batched=run, particles=2000)
    assert report.passed, str(report)


def test_an_empty_batch_fits_nothing_and_leaves_the_surrogate_finite() -> None:
    """A batch of 0 examples (a last batch, every sequence done): the regression's mean squared
    error over no element was NaN, and so was the surrogate's value (check_finite read the
    baselines' values, which are empty, and passed), for one copy and for copies evaluated
    together. It is 0 now, its gradient into the module 0, and the next batch trains as usual."""
    learned = _learned()
    w = learned.module.weight
    for copies in (1, 2):
        with scg.Graph() as g:
            for t in range(copies):
                x = torch.zeros(0, 1, dtype=torch.float64)
                z = scg.sample(Bernoulli(logits=x[:, 0]), name="z", step=t, baseline=learned.given(x))
                scg.cost(z * 2.0, name="c", step=t)
        loss = g.surrogate_loss()
        assert loss.item() == 0.0, (copies, loss)
        (gw,) = torch.autograd.grad(loss, [w])
        assert bool((gw == 0).all()), (copies, gw)
    with scg.Graph() as g:
        x = torch.tensor([[0.5], [-1.0]], dtype=torch.float64)
        z = scg.sample(Bernoulli(logits=x[:, 0]), name="z", baseline=learned.given(x))
        scg.cost(z * 2.0, name="c")
    (gw,) = torch.autograd.grad(g.surrogate_loss(), [w])
    want = (2.0 * (2.0 * x + 1.0 - 2.0 * z[:, None]) * x).mean()  # ∇_w mean((w·x + b − 2z)²), w = 2, b = 1
    torch.testing.assert_close(gw, want.reshape(1, 1))
