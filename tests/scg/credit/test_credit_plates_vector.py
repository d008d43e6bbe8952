"""Issue 24, item 1: credit of a vector-valued node (B, D) whose cost is already per example.

``plates=1`` says that the D elements of an example share their credit: each is credited with the
example's whole cost. A cost of shape (B,) or (B, 1) *is* that whole cost, broadcast over D, so the
credit is c_b, not the sum of the broadcast copies (D · c_b, the old result: the score term was D
times too large). The same holds for the whole-plate fallback (a cost that mixes the examples):
each element is credited with the cost summed over its *elements*, not over its broadcast copies.

The checks are exact: the mean of the estimator over every joint value of the node (2^(B·D) runs,
each weighted by its probability) must equal the exact gradient, in tracked, ``Cached`` and
``Declared`` graphs; one statistical ``check_unbiased`` per mode guards the same claim the way a
user would test it.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli

import scg
import scg.testing as st
from scg.testing import expected_estimate

B, D = 2, 2
W = torch.tensor([1.0, -2.0], dtype=torch.float64)


def _theta() -> torch.Tensor:
    return torch.tensor([[0.3, -0.5], [-0.2, 0.6]], dtype=torch.float64, requires_grad=True)


def _modes() -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    return [
        ("tracked", dict),
        ("cached", lambda: {"structure": scg.Cached(check_every=None)}),
        ("declared", lambda: {"structure": scg.Declared()}),
    ]


MODES = _modes()


def _per_example(th: torch.Tensor, keepdim: bool, plates: int | None = 1, n: int | None = None) -> Callable[[], None]:
    def run() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z", plates=plates, n=n)  # ([n,] B, D)
        scg.cost(((z * W).sum(-1, keepdim=keepdim) - 0.3) ** 2, name="c")  # ([n,] B) or ([n,] B, 1)

    return run


@functools.cache
def _per_example_exact() -> torch.Tensor:
    """The exact gradient of ``_per_example`` at ``_theta()`` (the cost's shape, (B,) or (B, 1),
    and the declared plates do not change the expectation): enumerated once for the tests below."""
    th = _theta()
    return st.exact_gradient(_per_example(th, False), [th])[0]


def _mixing(th: torch.Tensor) -> Callable[[], None]:
    def run() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z")  # (B, D), no declared plates
        s = (z * W).sum(-1)
        scg.cost((s - s.flip(0) + th.sum(-1)) ** 2, name="c")  # (B,), mixes the examples

    return run


@pytest.mark.parametrize("keepdim", [False, True], ids=["cost_B", "cost_B1"])
@pytest.mark.parametrize("mode", MODES, ids=[m for m, _ in MODES])
def test_plates_1_with_a_per_example_cost_is_exact_in_expectation(
    keepdim: bool, mode: tuple[str, Callable[[], dict[str, Any]]]
) -> None:
    th = _theta()
    program = _per_example(th, keepdim)
    mean = expected_estimate(program, [th], graph_kwargs=mode[1]())[0]
    torch.testing.assert_close(mean, _per_example_exact(), rtol=1e-9, atol=1e-12)


def test_graph_level_plates_1_is_exact_in_expectation() -> None:
    th = _theta()
    program = _per_example(th, False, plates=None)
    mean = expected_estimate(program, [th], graph_kwargs={"plates": 1})[0]
    torch.testing.assert_close(mean, _per_example_exact(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "mode",
    [m for m in MODES if m[0] != "declared"]
    + [("declared_whole", lambda: {"structure": scg.Declared(per_example=False)})],
    ids=["tracked", "cached", "declared_whole"],
)
def test_whole_plate_fallback_of_a_vector_node_is_exact_in_expectation(
    mode: tuple[str, Callable[[], dict[str, Any]]],
) -> None:
    th = _theta()
    program = _mixing(th)
    (exact,) = st.exact_gradient(program, [th])
    kwargs = mode[1]()
    mean = expected_estimate(program, [th], graph_kwargs=kwargs)[0]
    torch.testing.assert_close(mean, exact, rtol=1e-9, atol=1e-12)
    with scg.Graph(**kwargs) as g:
        program()
    g.surrogate_loss()
    assert g.credit("z", "c") == "whole-plate"


@pytest.mark.parametrize("mode", MODES, ids=[m for m, _ in MODES])
def test_z_test_accepts_plates_1_and_rejects_the_old_rule(
    mode: tuple[str, Callable[[], dict[str, Any]]],
) -> None:
    th = _theta()
    exact = _per_example_exact()
    # 50 graphs of 20 samples each (n=20: each estimate is the mean of 20 one-sample estimates)
    est = st.estimate_gradients(_per_example(th, False, n=20), [th], n=50, graph_kwargs=mode[1]())
    report = st.compare(est, exact.reshape(-1))
    assert report.passed, str(report)
    # the old rule (the cost has no pathwise term, so the estimate was the score term times D)
    # is rejected by the same test on the same draws (|z| = 13.5, critical 3.66)
    biased = st.compare(est * D, exact.reshape(-1))
    assert not biased.passed, str(biased)


def test_stacked_samples_get_whole_plate_credit_which_is_unbiased() -> None:
    """``torch.stack(samples).sum(0)``: the stack moves every example's position from 0 to 1,
    which the leading-position model of `scg.graph.positions` cannot follow, so the tracker
    credits each node whole-plate. That costs variance, not bias: the estimator's mean over every
    joint value of the nodes equals the exact gradient."""
    th = torch.tensor([0.4, -0.7], dtype=torch.float64, requires_grad=True)
    steps = 3

    def program() -> None:
        zs = [scg.sample(Bernoulli(logits=th), name="z", step=t) for t in range(steps)]  # (B,) each
        scg.cost((torch.stack(zs).sum(0) * W - 0.5) ** 2, name="c")  # (B,)

    (exact,) = st.exact_gradient(program, [th])
    mean = torch.zeros_like(th)
    for bits in itertools.product((0.0, 1.0), repeat=steps * th.numel()):
        values = torch.tensor(bits, dtype=th.dtype).reshape(steps, *th.shape)
        p = Bernoulli(logits=th.detach()).log_prob(values).sum().exp()

        def intervene(
            name: str, step: int | None, dist: object, shape: torch.Size, values: torch.Tensor = values
        ) -> torch.Tensor:
            assert step is not None
            return values[step]

        with scg.Graph(intervene=intervene) as g:
            program()
        (grad,) = torch.autograd.grad(g.surrogate_loss(), [th])
        mean += p * grad
    torch.testing.assert_close(mean, exact, rtol=1e-9, atol=1e-12)
    assert {g.credit(g.node("z", t), "c") for t in range(steps)} == {"whole-plate"}
