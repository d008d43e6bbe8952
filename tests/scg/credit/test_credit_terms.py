"""The credit plan's per-signature terms (`scg.credit.plan.Term`): what the surrogate computes
per step from them equals the credit written out by hand.

* A long reward-to-go chain (W[i, j] = [j ≥ i], at least ``SUFFIX_MIN_ROWS`` nodes) takes a
  reverse cumulative sum instead of the product with W: the gradient is the hand-written
  reward-to-go estimator's, and the product's (the same plan with the sum turned off).
* The costs' finiteness check is one host read for all cost groups, and still names the cost.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli
from torch.overrides import TorchFunctionMode

import scg
import scg.credit.plan as plan_mod

N, B = plan_mod.SUFFIX_MIN_ROWS + 3, 4


def _chain(structure: scg.Declared | None, theta: torch.Tensor, seed: int = 0) -> tuple[scg.Graph, list[Any]]:
    torch.manual_seed(seed)
    b = torch.zeros(B)
    hand: list[Any] = []
    with scg.Graph(structure=structure) as g:
        for i in range(N):
            b = scg.sample(Bernoulli(logits=theta[i] + b, validate_args=False), name="b", step=i)
            c = b * (1.0 + 0.01 * i)
            scg.cost(c, name="c", step=i)
            hand.append((scg.log_prob(b), c))
    return g, hand


def _hand_gradient(theta: torch.Tensor, hand: list[Any]) -> torch.Tensor:
    lps = torch.stack([lp for lp, _ in hand])
    costs = torch.stack([c for _, c in hand])
    to_go = costs.detach().flip(0).cumsum(0).flip(0)
    (grad,) = torch.autograd.grad(costs.sum() + (lps * to_go).sum(), theta)
    return grad


@pytest.mark.parametrize("declared", [True, False])
def test_reward_to_go_chain_takes_the_reverse_sum(declared: bool) -> None:
    theta = torch.linspace(-1.0, 1.0, N).requires_grad_()
    g, hand = _chain(scg.Declared() if declared else None, theta)
    loss = g.surrogate_loss()
    (grad,) = torch.autograd.grad(loss, theta, retain_graph=True)
    want = _hand_gradient(theta, hand)
    torch.testing.assert_close(grad, want, rtol=1e-6, atol=1e-6)
    costs = torch.stack([c for _, c in hand])
    torch.testing.assert_close(loss, costs.sum())  # (the surrogate evaluates to the objective)


def test_the_reverse_sum_equals_the_product(monkeypatch: pytest.MonkeyPatch) -> None:
    theta = torch.linspace(-1.0, 1.0, N).requires_grad_()
    grads = []
    for rows in (plan_mod.SUFFIX_MIN_ROWS, N + 1):  # the sum, then the product (W @ costs)
        monkeypatch.setattr(plan_mod, "SUFFIX_MIN_ROWS", rows)
        structure = scg.Declared()
        g, _ = _chain(structure, theta)
        (grad,) = torch.autograd.grad(g.surrogate_loss(), theta)
        grads.append(grad)
        (plan,) = structure.plans.values()
        assert [t.suffix for t in plan.terms_of[0]] == [rows <= N]
    # (float32 sums of N terms in another order: a few ulps of the largest credit apart)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-4)


class _Items(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.calls[getattr(func, "__name__", "")] += 1
        return func(*args, **(kwargs or {}))


def _two_groups(bad: bool) -> scg.Graph:
    theta = torch.zeros(B, 2, requires_grad=True)
    with scg.Graph(structure=scg.Declared()) as g:
        z = scg.sample(Bernoulli(logits=theta, validate_args=False), name="z")  # (B, 2)
        scg.cost(z.sum(-1), name="per_example")  # (B,): one cost group
        scg.cost(z / 0.0 if bad else z, name="per_element")  # (B, 2): another
    return g


def test_one_host_read_for_every_cost_group() -> None:
    g = _two_groups(bad=False)
    with _Items() as seen:
        g.surrogate_loss()
    assert seen.calls["item"] == 1


def test_a_non_finite_cost_in_a_later_group_is_named() -> None:
    g = _two_groups(bad=True)
    with pytest.raises(scg.SCGError, match=r"cost node 'per_element' .* is not finite"):
        g.surrogate_loss()


def test_without_the_finiteness_check_a_non_finite_cost_reaches_the_loss() -> None:
    """``check_finite=False``: no host read, and the cost's inf reaches the loss and the
    gradient (what a hand-written step does) instead of an error."""
    g = _two_groups(bad=True)
    with _Items() as seen:
        loss = g.surrogate_loss(check_finite=False)
    assert seen.calls["item"] == 0
    assert not torch.isfinite(loss)
    good = _two_groups(bad=False)
    torch.testing.assert_close(good.surrogate_loss(check_finite=False), _two_groups(bad=False).surrogate_loss())


@pytest.mark.parametrize("bad", [None, 0, 1, "yes"])
def test_check_finite_must_be_a_bool(bad: object) -> None:
    with pytest.raises(scg.SCGError, match=rf"surrogate_loss\(check_finite=...\): expected True or False, got {bad!r}"):
        _two_groups(bad=False).surrogate_loss(check_finite=bad)  # type: ignore[arg-type]
