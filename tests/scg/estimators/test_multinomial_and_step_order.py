"""``multinomial_attention`` returns frequencies μ/k (unbiased for α), and the discount's step
order: a cost at the node's own step is allowed with weight γ⁰ = 1, one step earlier is refused,
and each later cost is weighted γ^(s_c − t_v) exactly (issue 30)."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Categorical

import scg

GAMMA = 0.5


def test_multinomial_attention_returns_frequencies_whose_mean_is_alpha() -> None:
    alpha = torch.tensor([0.1, 0.6, 0.3], dtype=torch.float64)
    k, n = 5, 4000
    torch.manual_seed(0)
    with scg.Graph():
        att = scg.estimators.multinomial_attention(alpha.expand(n, 3), k, name="a")
    torch.testing.assert_close(att.sum(-1), torch.ones(n, dtype=torch.float64))
    counts = att * k
    torch.testing.assert_close(counts, counts.round())  # multiples of 1/k
    se = att.std(0) / n**0.5
    assert bool(((att.mean(0) - alpha).abs() < 4 * se).all()), (att.mean(0), alpha, se)


def _graph(node_step: int, cost_steps: list[int]) -> tuple[scg.Graph, torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    theta = torch.tensor([0.2, -0.3, 0.4], dtype=torch.float64, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=theta), name="z", step=node_step)
        costs = [scg.cost((z.to(theta.dtype) + 1.0) * (i + 1), name=f"c{s}", step=s) for i, s in enumerate(cost_steps)]
    return g, theta, z, costs


def test_discount_weights_each_cost_by_gamma_to_the_step_difference() -> None:
    g, theta, z, costs = _graph(1, [1, 2, 3])
    (grad,) = torch.autograd.grad(g.surrogate_loss(discount=GAMMA), theta)
    (score,) = torch.autograd.grad(Categorical(logits=theta).log_prob(z), theta)
    signal = sum(GAMMA ** (s - 1) * float(c) for s, c in zip([1, 2, 3], costs))
    torch.testing.assert_close(grad, score * signal)


@pytest.mark.parametrize(("node_step", "cost_step"), [(2, 1), (5, 4)])
def test_a_cost_one_step_before_its_node_is_refused(node_step: int, cost_step: int) -> None:
    g, *_ = _graph(node_step, [cost_step])
    with pytest.raises(scg.SCGError, match="stochastic node 'z'.*at an earlier step"):
        g.surrogate_loss(discount=GAMMA)
