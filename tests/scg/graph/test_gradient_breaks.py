"""Issue 24 item 7: a pathwise sample whose cost depends on it through a non-differentiable
operation on *some* path (an indicator added to a smooth term, a reward computed under
``no_grad``, a location rounded to an index and also fed to a network) gets a biased pathwise
gradient; scg warns whenever any path crosses such an operation, not only when all do."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
from torch.distributions import Normal

import scg

MU = torch.tensor([0.3, -0.2], requires_grad=True)
NET = torch.nn.Linear(2, 2)
IMAGE = torch.randn(5, 2, generator=torch.Generator().manual_seed(0))


def _with_no_grad_reward(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        reward = (x**2).sum()
    return reward + x.sum()


def _glimpse(x: torch.Tensor) -> torch.Tensor:
    index = x.round().long().clamp(0, 4)
    return IMAGE[index].sum() + NET(x).sum()


MIXED: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "indicator_plus_smooth": lambda x: ((x > 0.5).float() + x).sum(),
    "no_grad_reward": _with_no_grad_reward,
    "rounded_index_and_network": _glimpse,
    "detached_centring": lambda x: (x - x.detach().mean()).pow(2).sum(),
    "floor_step": lambda x: (torch.floor(x) + x).sum(),
}


def _run(cost: Callable[[torch.Tensor], torch.Tensor], **graph_kwargs: object) -> scg.Graph:
    with scg.Graph(**graph_kwargs) as g:  # type: ignore[arg-type]
        x = scg.sample(Normal(MU, 1.0), name="x")
        scg.cost(cost(x), name="c")
    g.surrogate_loss()
    return g


@pytest.mark.parametrize("name", sorted(MIXED))
def test_some_path_through_a_non_differentiable_op_warns(name: str) -> None:
    with pytest.warns(scg.NonDifferentiablePathWarning, match=r"'x'.*at least one operation"):
        _run(MIXED[name])


def test_cached_tracked_graph_warns_too() -> None:
    cached = scg.Cached(check_every=1)
    with pytest.warns(scg.NonDifferentiablePathWarning, match="at least one operation"):
        _run(MIXED["indicator_plus_smooth"], structure=cached)


@pytest.mark.parametrize(
    "cost",
    [
        lambda x: (x**2).sum(),
        lambda x: torch.relu(x).sum() + x.clamp(-1, 1).sum(),
        lambda x: NET(x).tanh().sum(),
    ],
)
def test_smooth_costs_do_not_warn(cost: Callable[[torch.Tensor], torch.Tensor]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", scg.NonDifferentiablePathWarning)
        _run(cost)


def test_a_score_function_node_between_does_not_warn() -> None:
    """A discrete node drawn from the rounded location carries the credit by its score term."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", scg.NonDifferentiablePathWarning)
        with scg.Graph() as g:
            x = scg.sample(Normal(MU, 1.0), name="x")
            k = scg.sample(torch.distributions.Categorical(logits=torch.stack([x.sum(), -x.sum()])), name="k")
            scg.cost(IMAGE[k].sum() + x.sum(), name="c")
        g.surrogate_loss()


@pytest.mark.parametrize("name", ["indicator_plus_smooth", "no_grad_reward"])
def test_strict_mode_raises_naming_the_node_and_the_cost_line(name: str) -> None:
    with pytest.raises(
        scg.InfluenceLostError, match=r"cost node 'c' \(created at .*test_gradient_breaks.py:\d+\).*'x'"
    ):
        _run(MIXED[name], strict=True)


def test_strict_mode_raises_when_every_path_is_broken() -> None:
    with pytest.raises(scg.InfluenceLostError, match=r"'x'.*only through operations.*strict=True"):
        _run(lambda x: (x > 0.5).float().sum(), strict=True)


def test_the_warning_points_at_the_cost() -> None:
    with pytest.warns(scg.NonDifferentiablePathWarning) as record:
        _run(MIXED["floor_step"])
    assert record[0].filename == __file__
