"""A declared graph inside ``torch.compile`` (issues 12, 25): the traced surrogate (``scg/credit/traced.py``).

The traced surrogate must equal the eager one in value and gradient for the same draws. It is
compared twice: called directly in eager mode on a graph built with the same seed (every
supported feature: score-function and pathwise nodes, several node and cost shapes, discount,
score_scale, EMA and Learned baselines on nodes and costs, whose state must evolve as in eager
mode), and through a real ``torch.compile(fullgraph=True)`` of a small step with baselines. What
it does not support is refused with an error that names the node, the option or the baseline.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Normal

import scg
import scg.testing
from scg.credit.traced import traced_surrogate_loss
from scg.errors import SCGError


def make_params() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [
        (torch.randn(4, 5, generator=gen) / 2).requires_grad_(),
        (torch.randn(5, 5, generator=gen) / 3).requires_grad_(),
        torch.zeros(4, requires_grad=True),
    ]


@dataclass(kw_only=True, slots=True)
class Baselines:
    """The program's baselines: a learned b(h) for each step's ``z`` (bound copies of one
    module), an EMA shared by the ``k`` nodes (one average per step) and one for the first ``c``."""

    learned: scg.baselines.Learned
    ema: scg.baselines.EMA
    cost_ema: scg.baselines.EMA
    loo: scg.baselines.LeaveOneOut

    @property
    def module(self) -> torch.nn.Module:
        return self.learned.module

    def state(self) -> list[torch.Tensor]:
        """The state a step updates: the averages (the module's parameters get gradients)."""
        return [b._values.clone() for b in (self.ema, self.cost_ema) if b._values is not None]


def make_baselines() -> Baselines:
    module = torch.nn.Linear(5, 1)
    with torch.no_grad():
        module.weight.copy_(torch.linspace(-0.5, 0.5, 5))
        module.bias.fill_(0.1)
    return Baselines(
        learned=scg.baselines.Learned(module),
        ema=scg.baselines.EMA(0.5, init=1.0),
        cost_ema=scg.baselines.EMA(0.3),
        loo=scg.baselines.LeaveOneOut(),
    )


def program(
    params: list[torch.Tensor], steps: int = 4, baselines: Baselines | None = None, every_shape: bool = True
) -> Callable[[], None]:
    """Categorical and Bernoulli nodes per step (score function), a Normal (pathwise), costs of
    shape (B,), (B, 5) and () so that the node and cost groups differ in shape; ``baselines``:
    on the ``z`` and ``k`` nodes and on the first ``c`` cost, and a last node ``u`` of n=3
    samples (a leading sample dimension) with a leave-one-out baseline. ``every_shape=False``
    leaves out the (B, 5) cost ``e`` and the pathwise ``x`` with its () cost (the compiled step:
    dynamo traces scg's code per node and cost, and the traced surrogate's eager comparison
    above covers those shapes)."""
    theta, w, mu = params
    enc = torch.randn(4, 5, 5, generator=torch.Generator().manual_seed(3))  # (B, M, H)
    b = baselines

    def run() -> None:
        h = theta  # (B, H)
        for t in range(steps):
            bz = None if b is None else b.learned.given(h)
            bk, bc = (None, None) if b is None else (b.ema, b.cost_ema if t == 0 else None)
            z = scg.sample(Categorical(logits=h), name="z", step=t, baseline=bz)  # (B,)
            h = torch.tanh(enc[torch.arange(4), z] @ w + h)  # (B, H)
            k = scg.sample(Bernoulli(logits=h.mean(-1)), name="k", step=t, baseline=bk)  # (B,)
            scg.cost((h**2).sum(-1) * (1.0 + k), name="c", step=t, baseline=bc)  # (B,)
            if every_shape:
                scg.cost(h * 0.1, name="e", step=t)  # (B, H)
        if every_shape:
            x = scg.sample(Normal(mu, 1.0), name="x", step=steps)  # (B,) pathwise
            scg.cost((x**2).sum(), name="total", step=steps)  # ()
        if b is not None:
            u = scg.sample(Categorical(logits=h), name="u", step=steps + 1, n=3, baseline=b.loo)  # (3, B)
            scg.cost(h[torch.arange(4), u] * (1.0 + u), name="pick", step=steps + 1)  # (3, B)

    return run


def eager_and_traced(
    params: list[torch.Tensor], seed: int, baselines: tuple[Baselines, Baselines] | None = None, **kwargs: Any
) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """The eager and the traced surrogate's loss and gradients for one seed (``baselines``: one
    set per path; the learned module's gradients follow the parameters')."""
    out = []
    for traced in (False, True):
        b = None if baselines is None else baselines[traced]
        wrt = params if b is None else [*params, *b.module.parameters()]
        torch.default_generator.manual_seed(seed)  # (torch.manual_seed also formats the stack for lazy CUDA seeding)
        with scg.Graph(structure=scg.Declared()) as g:
            program(params, baselines=b)()
        if traced:
            loss = traced_surrogate_loss(
                g,
                discount=kwargs.get("discount"),
                dice=False,
                dice_lambda=None,
                score_scale=kwargs.get("score_scale", 1.0),
            )
        else:
            loss = g.surrogate_loss(**kwargs)
        out.append((loss, list(torch.autograd.grad(loss, wrt))))
    (l0, g0), (l1, g1) = out
    return l0, l1, g0, g1


@pytest.mark.parametrize(
    ("kwargs", "baselines"),
    [
        ({}, False),
        ({"discount": 0.9}, True),
        ({"score_scale": 0.5}, False),
        ({"discount": 1.0, "score_scale": 2.0}, True),
    ],
)
def test_traced_surrogate_equals_the_eager_one(kwargs: dict[str, Any], baselines: bool) -> None:
    """Seed after seed the same loss and gradients; with ``baselines`` (EMA and Learned, on
    nodes and on a cost, one set per path) also the same running averages and the learned
    module's gradients, and the baselines are in effect (without them the estimate differs)."""
    params = make_params()
    pair = (make_baselines(), make_baselines()) if baselines else None
    first: list[torch.Tensor] = []
    for seed in range(3):
        l0, l1, g0, g1 = eager_and_traced(params, seed, pair, **kwargs)
        torch.testing.assert_close(l1, l0)
        for a, b in zip(g1, g0):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        assert any(float(g.abs().sum()) > 0 for g in g0)  # not vacuous: the estimate is non-zero
        if pair is not None:
            traced_state, eager_state = pair[1].state(), pair[0].state()
            assert len(eager_state) == 2
            for a, b in zip(traced_state, eager_state):
                torch.testing.assert_close(a, b)
        first = first or g0
    if pair is not None:
        assert float(first[-1].abs().sum()) > 0  # the learned baseline's bias has a regression gradient
        _, _, plain, _ = eager_and_traced(params, 0, **kwargs)
        assert max(float((a - b).abs().max()) for a, b in zip(plain, first)) > 1e-3


def test_traced_surrogate_credit_matches() -> None:
    """The credit the traced surrogate reports (``Graph.credit``) is the eager one's."""
    params = make_params()
    credits = []
    for traced in (False, True):
        torch.manual_seed(0)
        with scg.Graph(structure=scg.Declared()) as g:
            program(params, steps=2)()
        if traced:
            traced_surrogate_loss(g, discount=None, dice=False, dice_lambda=None, score_scale=1.0)
            g.mark_built()
        else:
            g.surrogate_loss()
        credits.append(
            {(v.name, v.step, c.name, c.step): g.credit(v, c) for v in g.stochastic_nodes for c in g.cost_nodes}
        )
    assert credits[0] == credits[1]
    assert "per-element" in credits[0].values() and "none" in credits[0].values()


def test_a_cost_displaced_by_a_place_for_samples_is_credited_whole_plate_as_in_eager_mode() -> None:
    """``z[:, None] * M`` of a node drawn with n=1, (1, B, D) with B = D: the cost's batch
    positions are one place right of the node's. The eager plan credits the pair whole-plate; the
    traced surrogate credited it per element, each z[b, d] with the cost's row d, so its exact
    mean missed the off-diagonal derivatives (d/dθ[0, 1] 0 against 0.470, d/dθ[1, 0] 0 against
    −0.321; a compiled step alike). Over all 16 joint draws the traced surrogate's gradient is the
    eager one's, its mean the exact gradient, and its credit whole-plate."""
    th = torch.tensor([[0.3, -0.5], [0.8, 0.1]], dtype=torch.float64, requires_grad=True)
    m = torch.tensor([[1.0, 2.0], [-1.5, 0.5]], dtype=torch.float64)

    def run() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z", n=1)  # (1, B, D)
        scg.cost(z[:, None] * m, name="c")  # (1, 1, B, D)

    mean = torch.zeros_like(th)
    for bits in range(16):
        value = torch.tensor([bits >> i & 1 for i in range(4)], dtype=torch.float64).reshape(1, 2, 2)
        grads = []
        for traced in (False, True):
            with scg.Graph(structure=scg.Declared(), intervene=lambda *_, value=value: value.clone()) as g:
                run()
            if traced:
                loss = traced_surrogate_loss(g, discount=None, dice=False, dice_lambda=None, score_scale=1.0)
                g.mark_built()
            else:
                loss = g.surrogate_loss()
            assert g.credit("z", "c") == "whole-plate", traced
            grads.append(torch.autograd.grad(loss, th)[0])
        torch.testing.assert_close(grads[1], grads[0], rtol=1e-12, atol=1e-12)
        mean += Bernoulli(logits=th.detach()).log_prob(value[0]).sum().exp() * grads[1]
    torch.testing.assert_close(mean, scg.testing.exact_gradient(run, [th])[0], rtol=1e-9, atol=1e-12)


def test_a_drop_in_bias_is_seen() -> None:
    """The comparison above can fail: dropping one credited cost changes the gradient."""
    params = make_params()
    torch.manual_seed(0)
    with scg.Graph(structure=scg.Declared(lambda v, n: v.step == n.step)) as g:  # under-declared
        program(params)()
    wrong = torch.autograd.grad(
        traced_surrogate_loss(g, discount=None, dice=False, dice_lambda=None, score_scale=1.0), params
    )
    _, _, right, _ = eager_and_traced(params, 0)
    assert max(float((a - b).abs().max()) for a, b in zip(wrong, right)) > 1e-3


@pytest.mark.parametrize(
    "what",
    ["baseline", "enumerate", "unordered_set", "plates", "per_example", "dice", "cost_baseline", "vimco", "relax"],
)
def test_unsupported_features_are_refused_by_name(what: str) -> None:
    """The refusal names the node (and its baseline and why, for a baseline), or the option."""
    theta = torch.zeros(3, 4, requires_grad=True)
    structure = scg.Declared(per_example=False) if what == "per_example" else scg.Declared()
    normalized = scg.baselines.Normalized(scg.baselines.EMA(0.9))  # (its statistics are host floats)
    vimco = scg.baselines.VIMCO()  # (its log-weights are kept per graph id)
    with scg.Graph(structure=structure) as g:
        z = scg.sample(
            Categorical(logits=theta),
            name="znode",
            baseline={"baseline": normalized, "vimco": vimco}.get(what),
            estimator={
                "enumerate": scg.estimators.Enumerate(),
                "unordered_set": scg.estimators.UnorderedSet(),
                "relax": scg.estimators.RELAX(lambda z: z.sum(-1)),
            }.get(what),
            n={"vimco": 2, "unordered_set": 2}.get(what),
            plates=1 if what == "plates" else None,
        )
        scg.cost(
            vimco.objective(z.float()) if what == "vimco" else z.float(),
            name="c",
            baseline=normalized if what == "cost_baseline" else None,
            reduced=z if what == "vimco" else None,
        )
    with pytest.raises(SCGError, match="inside torch.compile") as e:
        traced_surrogate_loss(g, discount=None, dice=what == "dice", dice_lambda=None, score_scale=1.0)
    expected = {
        "baseline": ["'znode'", "Normalized", "host read"],
        "enumerate": ["'znode'", "Enumerate", "enumerates values of its support"],
        "unordered_set": ["'znode'", "UnorderedSet", "enumerates values of its support"],
        "plates": ["'znode'", "plates="],
        "per_example": ["per_example=False"],
        "dice": ["DiCE"],
        "cost_baseline": ["'c'", "Normalized", "host read"],
        "vimco": ["'znode'", "VIMCO", "graph's id"],
        "relax": ["'znode'", "RELAX", "control variates are not traced"],
    }[what]
    for part in expected:
        assert part in str(e.value)


def antithetic_program(
    theta: torch.Tensor, estimator: str, n: int, baseline: scg.baselines.Baseline | None = None
) -> Callable[[], None]:
    """A node drawn in antithetic pairs (or with ARSM's pseudo-actions) and two costs of it; the
    estimators override ``control_variate`` only to refuse ``LeaveOneOut`` (they add none)."""
    est = getattr(scg.estimators, estimator)()

    def run() -> None:
        logits = theta if estimator in ("ARM", "DisARM") else torch.stack([theta, -theta, 0.5 * theta], -1)
        dist = Bernoulli(logits=logits) if estimator in ("ARM", "DisARM") else Categorical(logits=logits)
        z = scg.sample(dist, name="z", n=n, estimator=est, baseline=baseline, step=0)
        scg.cost((z.float() - 0.3) ** 2 + theta, name="c", step=0)
        scg.cost(z.float().sum(-1) * theta.sum(), name="total", step=1)

    return run


def declared_step(run: Callable[[], None]) -> Callable[[], torch.Tensor]:
    def step() -> torch.Tensor:
        with scg.Graph(structure=scg.Declared()) as g:
            run()
        return g.surrogate_loss(discount=0.9)

    return step


@pytest.mark.parametrize(("estimator", "n"), [("ARM", 2), ("DisARM", 4), ("CategoricalDisARM", 2), ("ARSM", 4)])
def test_antithetic_estimators_are_traced_as_in_eager_mode(estimator: str, n: int) -> None:
    """ARM, DisARM, CategoricalDisARM and ARSM add no control variates: they override
    ``control_variate`` to refuse a ``LeaveOneOut`` baseline and return None, and the traced
    surrogate refused them as RELAX (ARM, n=2: eager d/dθ 1.1865, 1.1361, 1.0497; traced: "whose
    control variates are not traced"). The traced surrogate equals the eager one, and refuses
    the leave-one-out baseline by name as in eager mode; compiled (ARSM's draw is not traceable:
    its log-probability compares the draw on the host), so does the whole step."""
    torch._dynamo.reset()
    theta = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64, requires_grad=True)
    for baseline in (None, scg.baselines.LeaveOneOut()):
        run = antithetic_program(theta, estimator, n, baseline)
        torch.manual_seed(0)
        with scg.Graph(structure=scg.Declared()) as g:
            run()
        if baseline is not None:
            with pytest.raises(SCGError, match=f"{estimator}\\(\\) on stochastic node 'z'.*LeaveOneOut"):
                traced_surrogate_loss(g, discount=0.9, dice=False, dice_lambda=None, score_scale=1.0)
            continue
        traced = traced_surrogate_loss(g, discount=0.9, dice=False, dice_lambda=None, score_scale=1.0)
        torch.manual_seed(0)
        eager = declared_step(run)()
        torch.testing.assert_close(traced, eager, rtol=1e-12, atol=0.0)
        for a, b in zip(torch.autograd.grad(traced, theta), torch.autograd.grad(eager, theta)):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=0.0)
    if estimator == "ARSM":
        return
    step = declared_step(antithetic_program(theta, estimator, n))
    compiled = torch.compile(step, fullgraph=True, backend="eager")
    for seed in range(2):
        torch.manual_seed(seed)
        (g0,) = torch.autograd.grad(step(), theta)
        torch.manual_seed(seed)
        (g1,) = torch.autograd.grad(compiled(), theta)
        torch.testing.assert_close(g1, g0, rtol=1e-12, atol=0.0)
    loo = declared_step(antithetic_program(theta, estimator, n, scg.baselines.LeaveOneOut()))
    with pytest.raises(Exception, match=f"{estimator}\\(\\) on stochastic node 'z'.*LeaveOneOut"):
        torch.compile(loo, fullgraph=True, backend="eager")()
    torch._dynamo.reset()


@pytest.mark.parametrize("structure", [None, "declared"])
def test_a_cost_baseline_of_another_dtype_is_subtracted_in_the_costs_dtype(structure: str | None) -> None:
    """A float32 cost with a float64 learned baseline: the eager surrogate built its credit matrix
    in the cost's dtype and multiplied it by the cost minus the baseline, promoted to float64
    ("RuntimeError: expected m1 and m2 to have the same dtype, but got: float != double", tracked
    or declared), while the traced surrogate built its weights in the promoted dtype (loss 1.27,
    d/dθ (1.4639, 1.1396, 0.9477)). A baseline's value is now cast to the learning
    signal's dtype, in the code both apply: both give the estimate of a float32 copy of the
    baseline (the surrogate's value has the regression loss's dtype, which adds zero to it)."""
    theta = torch.tensor([0.3, -0.2, 0.1], requires_grad=True)
    module = torch.nn.Linear(1, 1).double()
    with torch.no_grad():
        module.weight.fill_(0.5)
        module.bias.fill_(0.2)
    x = torch.linspace(-1.0, 1.0, 3, dtype=torch.float64)[:, None]

    def run(baseline: torch.nn.Module, inputs: torch.Tensor) -> Callable[[], None]:
        def program() -> None:
            z = scg.sample(Bernoulli(logits=theta), name="z")
            scg.cost((z - 0.3) ** 2 + theta, name="c", baseline=scg.baselines.Learned(baseline).given(inputs))

        return program

    got = []
    single = torch.nn.Linear(1, 1)
    single.load_state_dict(module.state_dict())  # (a float32 copy)
    for traced, baseline, inputs in [(False, module, x), (True, module, x), (False, single, x.float())]:
        if traced and structure is None:
            continue
        torch.manual_seed(0)
        with scg.Graph(structure=scg.Declared() if structure else None) as g:
            run(baseline, inputs)()
        if traced:
            loss = traced_surrogate_loss(g, discount=None, dice=False, dice_lambda=None, score_scale=1.0)
        else:
            loss = g.surrogate_loss()
        got.append((loss, torch.autograd.grad(loss, theta)[0]))
    for loss, grad in got[1:]:  # (the loss has the regression loss's dtype: zero in value)
        torch.testing.assert_close(loss, got[0][0], check_dtype=False)
        torch.testing.assert_close(grad, got[0][1])


def test_a_misaligned_cost_is_named_with_the_node_that_influences_it() -> None:
    """A cost whose batch shape does not line up with a node's: the refusal names the first
    (node, cost) pair of the two groups that the declaration credits, as the eager plan's `Term`
    does. The traced surrogate named the groups' first node and cost, which need not influence
    each other ('a' and 'c0' below: "cost node 'c0' has batch shape (3,), which does not line up
    with the batch shape (2,) of stochastic node 'a' that influences it"; only 'b' influences
    'c1')."""
    theta = torch.zeros(2, requires_grad=True)
    declared = scg.Declared(lambda v, n: (v.name, n.name) == ("b", "c1"))
    messages = []
    for traced in (False, True):
        with scg.Graph(structure=declared) as g:
            scg.sample(Bernoulli(logits=theta), name="a")
            b = scg.sample(Bernoulli(logits=theta), name="b")
            scg.cost(torch.ones(3), name="c0")
            scg.cost(b.sum() + torch.zeros(3), name="c1")
        with pytest.raises(SCGError, match="does not line up") as e:
            if traced:
                traced_surrogate_loss(g, discount=None, dice=False, dice_lambda=None, score_scale=1.0)
            else:
                g.surrogate_loss()
        messages.append(str(e.value))
    assert "cost node 'c1'" in messages[0] and "stochastic node 'b'" in messages[0]
    assert messages[1] == messages[0]


def test_an_ema_baseline_keeps_its_average_through_an_empty_batch() -> None:
    """An EMA's update from a batch of 0 examples averaged over no element: its average became
    NaN (init 0.2, β 0.5: 0.2117 after a batch of 3, NaN after a batch of 0), so every later
    eager step refused the baseline ("returned a non-finite value") while the compiled step,
    which makes no host read, returned NaN gradients (batch of 3 again: eager refused, compiled
    d/dθ (nan, nan, nan)). An empty batch now leaves the average as it was; the eager and the
    compiled step agree after it."""
    torch._dynamo.reset()

    def step(theta: torch.Tensor, ema: scg.baselines.EMA) -> torch.Tensor:
        with scg.Graph(structure=scg.Declared()) as g:
            z = scg.sample(Bernoulli(logits=theta), name="z", baseline=ema)
            scg.cost((z - 0.3) ** 2 + theta, name="c")
        return g.surrogate_loss()

    emas = [scg.baselines.EMA(0.5, init=0.2) for _ in range(2)]
    compiled = torch.compile(step, fullgraph=True, backend="eager")
    averages = []
    for size in (3, 0, 3):
        theta = torch.linspace(-1.0, 1.0, size).requires_grad_()
        grads = []
        for fn, ema in zip((step, compiled), emas):
            torch.manual_seed(size)
            grads.append(torch.autograd.grad(fn(theta, ema), theta)[0])
            averages.append(ema.value("z"))
        torch.testing.assert_close(grads[1], grads[0])
        assert bool(torch.isfinite(grads[0]).all())
    assert averages[2] == averages[0] and averages[3] == averages[0]  # (the empty batch: unchanged)
    torch.testing.assert_close(averages[5], averages[4])
    torch._dynamo.reset()


def small_step(
    params: list[torch.Tensor], structure: Any, baselines: Baselines | None = None
) -> Callable[[], torch.Tensor]:
    run = program(params, steps=1, baselines=baselines, every_shape=False)

    def step() -> torch.Tensor:
        with scg.Graph(structure=structure) as g:
            run()
        return g.surrogate_loss(discount=0.95)

    return step


@pytest.mark.parametrize(
    ("backend", "cold"),
    [
        ("aot_eager", False),
        # the EMAs created inside the compiled step: one more compile (~1.6 s of CPU)
        pytest.param("aot_eager", True, marks=pytest.mark.slow),
        # inductor's code generation: ~4 s of CPU with a warm inductor cache, ~15 s without; the
        # aot_eager case covers the capture (dynamo) and the joint forward/backward graph (AOTAutograd)
        pytest.param("inductor", True, marks=pytest.mark.slow),
    ],
)
def test_torch_compile_fullgraph_of_a_declared_step_equals_eager(backend: str, cold: bool) -> None:
    """``torch.compile(fullgraph=True)`` of a whole step (sampling, costs, surrogate, EMA and
    Learned baselines): the same loss, gradients (the learned baseline's included) and running
    averages as the eager step for the same seeds (``fallback_random``: inductor draws with
    aten's generator, as eager does, instead of its own), each path with its own baselines.
    Calling the compiled step again does not re-trace it (no guard on state that changes from
    step to step, such as the structure's counters or the averages' values): one frame compiled
    for the three calls once the EMAs know their keys (here from one eager step of both paths);
    ``cold``: the first compiled call creates them, and the second compiles once more."""
    import torch._inductor.config
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    params = make_params()
    used = params[:2]  # (mu feeds the pathwise node, not in the compiled step)
    eager_b, compiled_b = make_baselines(), make_baselines()
    step = small_step(params, scg.Declared(), eager_b)
    uncompiled = small_step(params, scg.Declared(), compiled_b)
    for warm_up in [] if cold else [step, uncompiled]:
        torch.manual_seed(9)
        warm_up()
    counter = CompileCounterWithBackend(backend)
    compiled = torch.compile(uncompiled, fullgraph=True, dynamic=False, backend=counter)
    with torch._inductor.config.patch(fallback_random=True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seed in (0, 1, 2):
            torch.manual_seed(seed)
            l0 = step()
            g0 = torch.autograd.grad(l0, [*used, *eager_b.module.parameters()])
            torch.manual_seed(seed)
            l1 = compiled()
            g1 = torch.autograd.grad(l1, [*used, *compiled_b.module.parameters()])
            torch.testing.assert_close(l1, l0, rtol=1e-5, atol=1e-5)
            for a, b in zip(g1, g0):
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
            for a, b in zip(compiled_b.state(), eager_b.state(), strict=True):
                torch.testing.assert_close(a, b)
    assert counter.frame_count == (2 if cold else 1)
    # tracing scg's code warns users of nothing (dynamo warns, e.g., of each functools.lru_cache it traces)
    assert not [str(w.message) for w in caught if "scg" in f"{w.filename} {w.message}"], [
        str(w.message) for w in caught
    ]


@pytest.mark.parametrize("structure", [None, "cached"])
def test_torch_compile_refuses_tracked_and_cached_graphs_by_name(structure: Any) -> None:
    torch._dynamo.reset()
    params = make_params()
    step = small_step(params, scg.Cached() if structure == "cached" else None)
    with pytest.raises(Exception, match=r"only scg.Graph\(structure=scg.Declared"):
        torch.compile(step, fullgraph=True)()
    step()  # eager, the same step is fine


def test_compiled_refusal_names_the_baseline_and_the_users_line() -> None:
    """Inside dynamo a node's location is the compiled function's line (not a dynamo variable's
    repr), and a baseline's refusal names the baseline and why."""
    torch._dynamo.reset()
    theta = torch.zeros(3, 4, requires_grad=True)
    normalized = scg.baselines.Normalized(beta=0.5)

    def step() -> torch.Tensor:
        with scg.Graph(structure=scg.Declared()) as g:
            z = scg.sample(Categorical(logits=theta), name="znode", baseline=normalized)
            scg.cost(z.float(), name="c")
        return g.surrogate_loss()

    with pytest.raises(Exception) as e:  # (dynamo may wrap the SCGError)
        torch.compile(step, fullgraph=True, backend="eager")()
    text = str(e.value)
    assert "UserDefinedObjectVariable" not in text
    assert "'znode'" in text and "Normalized" in text and "host read" in text
    assert f"{__file__}:" in text.replace("\\'", "'")
    torch._dynamo.reset()


def test_a_compiled_steps_ema_baseline_is_the_average_from_before_its_update() -> None:
    """AOTAutograd's partitioner recomputed the baseline ``old = values.clone()`` in the backward
    pass from the step's input ``values``, which the step had updated in place: the compiled
    gradient used this step's own update (the score term shrank by about 1 - β, max |z| = 18.4
    over 3000 steps). Under compilation the EMA now makes a new table instead of writing."""
    torch._dynamo.reset()
    theta_e, theta_c = (torch.zeros(3, requires_grad=True) for _ in range(2))

    def make(theta: torch.Tensor, ema: scg.baselines.EMA) -> Callable[[], torch.Tensor]:
        def step() -> torch.Tensor:
            with scg.Graph(structure=scg.Declared()) as g:
                z = scg.sample(Categorical(logits=theta.expand(4, 3)), name="z", baseline=ema)
                scg.cost((z.float() - 1.0) ** 2, name="c")
            return g.surrogate_loss()

        return step

    eager_ema, compiled_ema = scg.baselines.EMA(0.5), scg.baselines.EMA(0.5)
    eager = make(theta_e, eager_ema)
    compiled = torch.compile(make(theta_c, compiled_ema), fullgraph=True, dynamic=False, backend="aot_eager")
    for seed in range(3):
        torch.manual_seed(seed)
        (g_eager,) = torch.autograd.grad(eager(), theta_e)
        torch.manual_seed(seed)
        (g_compiled,) = torch.autograd.grad(compiled(), theta_c)
        torch.testing.assert_close(g_compiled, g_eager)
        torch.testing.assert_close(compiled_ema.value("z"), eager_ema.value("z"))
