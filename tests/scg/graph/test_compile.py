"""A declared graph inside ``torch.compile`` (issue 12): the traced surrogate (``scg/traced.py``).

The traced surrogate must equal the eager one in value and gradient for the same draws. It is
compared twice: called directly in eager mode on a graph built with the same seed (every
supported feature: score-function and pathwise nodes, several node and cost shapes, discount,
score_scale), and through a real ``torch.compile(fullgraph=True)`` of a small step. What it does
not support is refused with an error that names the node or the option.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Normal

import scg
from scg.credit.traced import traced_surrogate_loss
from scg.errors import SCGError


def make_params() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [
        (torch.randn(4, 5, generator=gen) / 2).requires_grad_(),
        (torch.randn(5, 5, generator=gen) / 3).requires_grad_(),
        torch.zeros(4, requires_grad=True),
    ]


def program(params: list[torch.Tensor], steps: int = 4) -> Callable[[], None]:
    """Categorical and Bernoulli nodes per step (score function), a Normal (pathwise), costs of
    shape (B,), (B, 5) and () so that the node and cost groups differ in shape."""
    theta, w, mu = params
    enc = torch.randn(4, 5, 5, generator=torch.Generator().manual_seed(3))  # (B, M, H)

    def run() -> None:
        h = theta  # (B, H)
        for t in range(steps):
            z = scg.sample(Categorical(logits=h), name="z", step=t)  # (B,)
            h = torch.tanh(enc[torch.arange(4), z] @ w + h)  # (B, H)
            k = scg.sample(Bernoulli(logits=h.mean(-1)), name="k", step=t)  # (B,)
            scg.cost((h**2).sum(-1) * (1.0 + k), name="c", step=t)  # (B,)
            scg.cost(h * 0.1, name="e", step=t)  # (B, H)
        x = scg.sample(Normal(mu, 1.0), name="x", step=steps)  # (B,) pathwise
        scg.cost((x**2).sum(), name="total", step=steps)  # ()

    return run


def eager_and_traced(
    params: list[torch.Tensor], seed: int, **kwargs: Any
) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    run = program(params)
    out = []
    for traced in (False, True):
        torch.manual_seed(seed)
        with scg.Graph(structure=scg.Declared()) as g:
            run()
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
        out.append((loss, list(torch.autograd.grad(loss, params))))
    (l0, g0), (l1, g1) = out
    return l0, l1, g0, g1


@pytest.mark.parametrize("kwargs", [{}, {"discount": 0.9}, {"score_scale": 0.5}, {"discount": 1.0, "score_scale": 2.0}])
def test_traced_surrogate_equals_the_eager_one(kwargs: dict[str, Any]) -> None:
    params = make_params()
    for seed in range(3):
        l0, l1, g0, g1 = eager_and_traced(params, seed, **kwargs)
        torch.testing.assert_close(l1, l0)
        for a, b in zip(g1, g0):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        assert any(float(g.abs().sum()) > 0 for g in g0)  # not vacuous: the estimate is non-zero


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


@pytest.mark.parametrize("what", ["baseline", "n", "plates", "per_example", "dice", "cost_baseline"])
def test_unsupported_features_are_refused_by_name(what: str) -> None:
    theta = torch.zeros(3, 4, requires_grad=True)
    structure = scg.Declared(per_example=False) if what == "per_example" else scg.Declared()
    with scg.Graph(structure=structure) as g:
        z = scg.sample(
            Categorical(logits=theta),
            name="znode",
            baseline=scg.baselines.EMA(0.9) if what == "baseline" else None,
            n=2 if what == "n" else None,
            plates=1 if what == "plates" else None,
        )
        scg.cost(
            z.float(),
            name="c",
            baseline=scg.baselines.EMA(0.9) if what == "cost_baseline" else None,
            reduced=z if what == "n" else None,
        )
    with pytest.raises(SCGError, match="inside torch.compile") as e:
        traced_surrogate_loss(g, discount=None, dice=what == "dice", dice_lambda=None, score_scale=1.0)
    expected = {
        "baseline": "'znode'",
        "n": "'znode'",
        "plates": "'znode'",
        "per_example": "per_example=False",
        "dice": "DiCE",
        "cost_baseline": "'c'",
    }[what]
    assert expected in str(e.value)


def small_step(params: list[torch.Tensor], structure: Any) -> Callable[[], torch.Tensor]:
    run = program(params, steps=2)

    def step() -> torch.Tensor:
        with scg.Graph(structure=structure) as g:
            run()
        return g.surrogate_loss(discount=0.95)

    return step


@pytest.mark.parametrize(
    "backend",
    [
        "aot_eager",
        # inductor's code generation: ~4 s of CPU with a warm inductor cache, ~15 s without; the
        # aot_eager case covers the capture (dynamo) and the joint forward/backward graph (AOTAutograd)
        pytest.param("inductor", marks=pytest.mark.slow),
    ],
)
def test_torch_compile_fullgraph_of_a_declared_step_equals_eager(backend: str) -> None:
    """``torch.compile(fullgraph=True)`` of a whole step (sampling, costs, surrogate): the same
    loss and gradients as the eager step for the same seed (``fallback_random``: inductor draws
    with aten's generator, as eager does, instead of its own). Calling the compiled step again
    does not re-trace it (no guard on state that changes from step to step, such as the
    structure's counters): one frame compiled for the three calls."""
    import torch._inductor.config
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    params = make_params()
    step = small_step(params, scg.Declared())
    counter = CompileCounterWithBackend(backend)
    compiled = torch.compile(step, fullgraph=True, dynamic=False, backend=counter)
    with torch._inductor.config.patch(fallback_random=True):
        compare(step, compiled, params)
    assert counter.frame_count == 1


def compare(step: Callable[[], torch.Tensor], compiled: Callable[[], torch.Tensor], params: list[torch.Tensor]) -> None:
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        l0 = step()
        g0 = torch.autograd.grad(l0, params)
        torch.manual_seed(seed)
        l1 = compiled()
        g1 = torch.autograd.grad(l1, params)
        torch.testing.assert_close(l1, l0, rtol=1e-5, atol=1e-5)
        for a, b in zip(g1, g0):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


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

    def step() -> torch.Tensor:
        with scg.Graph(structure=scg.Declared()) as g:
            z = scg.sample(Categorical(logits=theta), name="znode", baseline=scg.baselines.EMA(0.9))
            scg.cost(z.float(), name="c")
        return g.surrogate_loss()

    with pytest.raises(Exception) as e:  # (dynamo may wrap the SCGError)
        torch.compile(step, fullgraph=True, backend="eager")()
    text = str(e.value)
    assert "UserDefinedObjectVariable" not in text
    assert "'znode'" in text and "EMA" in text and "applies no baselines" in text
    assert f"{__file__}:" in text.replace("\\'", "'")
    torch._dynamo.reset()
