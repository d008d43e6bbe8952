"""Issue 24, item 9: a baseline value that does not have the learning signal's shape is refused.

A ``Constant`` of shape (3, 1) subtracted from a (3,) node's signal broadcast to (3, 3): each
element was credited with every element's signal, and the gradient was silently tripled. The
surrogate now refuses such a value, naming the node and the baseline, in tracked, ``Cached`` and
``Declared`` graphs alike; values that broadcast to the signal's shape (a scalar, the node's shape)
keep working and stay unbiased.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli

import scg
import scg.testing as st
from scg.baselines import Constant
from scg.testing import expected_estimate

MODES: list[tuple[str, Callable[[], dict[str, Any]]]] = [
    ("tracked", dict),
    ("cached", lambda: {"structure": scg.Cached(check_every=None)}),
    ("declared", lambda: {"structure": scg.Declared()}),
]
IDS = [m for m, _ in MODES]


def _theta() -> torch.Tensor:
    return torch.tensor([0.4, -0.6, 0.9], dtype=torch.float64, requires_grad=True)


def _program(th: torch.Tensor, node_baseline: object = None, cost_baseline: object = None) -> Callable[[], None]:
    return lambda: _batched(node_baseline, cost_baseline)(th)


def _batched(node_baseline: object = None, cost_baseline: object = None) -> Callable[[torch.Tensor], None]:
    """The program over θ (3,), or (P, 3) with one particle per row."""

    def run(th: torch.Tensor) -> None:
        z = scg.sample(Bernoulli(logits=th), name="z", baseline=node_baseline, estimator=scg.ScoreFunction())  # (3,)
        scg.cost((z - 0.3) ** 2 + th, name="c", baseline=cost_baseline)

    return run


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_a_node_baseline_of_a_broadcastable_wrong_shape_is_refused(
    mode: tuple[str, Callable[[], dict[str, Any]]],
) -> None:
    th = _theta()
    with scg.Graph(**mode[1]()) as g:
        _program(th, node_baseline=Constant(torch.zeros(3, 1, dtype=torch.float64)))()
    with pytest.raises(scg.SCGError, match=r"Constant\(.*stochastic node 'z'.*shape \(3, 1\)"):
        g.surrogate_loss()


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_a_cost_baseline_of_a_broadcastable_wrong_shape_is_refused(
    mode: tuple[str, Callable[[], dict[str, Any]]],
) -> None:
    th = _theta()
    with scg.Graph(**mode[1]()) as g:
        _program(th, cost_baseline=Constant(torch.zeros(3, 1, dtype=torch.float64)))()
    with pytest.raises(scg.SCGError, match=r"Constant\(.*cost node 'c'.*shape \(3, 1\)"):
        g.surrogate_loss()


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_a_baseline_value_with_more_dimensions_than_the_signal_is_refused(
    mode: tuple[str, Callable[[], dict[str, Any]]],
) -> None:
    # (1, 1, 3) against the signal's (1, 3): every trailing size fits, but it has a dimension more
    th = _theta()
    with scg.Graph(**mode[1]()) as g:
        _program(th, node_baseline=Constant(torch.zeros(1, 1, 3, dtype=torch.float64)))()
    with pytest.raises(scg.SCGError, match=r"Constant\(.*stochastic node 'z'.*shape \(1, 1, 3\)"):
        g.surrogate_loss()


@pytest.mark.parametrize(
    "value",
    [0.5, torch.full((3,), 0.5, dtype=torch.float64), torch.full((1, 3), 0.5, dtype=torch.float64)],
    ids=["scalar", "node_shape", "with_row"],
)
def test_baselines_that_broadcast_to_the_signal_are_accepted_and_unbiased(value: object) -> None:
    th = _theta()
    program = _program(th, node_baseline=Constant(value))  # type: ignore[arg-type]
    if isinstance(value, torch.Tensor) and value.dim() == 2:
        # (1, 3) against the (3,) node: one-draw graphs (a particle row would line it up anyway),
        # checked exactly: the estimator's mean over the node's 8 values is the exact gradient
        (exact,) = st.exact_gradient(program, [th])
        torch.testing.assert_close(expected_estimate(program, [th])[0], exact, rtol=1e-9, atol=1e-12)
        return
    batched = _batched(node_baseline=Constant(value))  # type: ignore[arg-type]
    report = st.check_unbiased(program, [th], n=2000, batched=batched, particles=2000)
    assert report.passed, str(report)
