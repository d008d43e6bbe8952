"""The Learned baseline's regression loss is one ``mse_loss`` (issue 25): its value and the
gradient it gives the module are those of the written-out mean((b − Ĉ)²), bit for bit, for one
node (the row's view) and for nodes sharing one copy (the prediction expanded over the rows)."""

from __future__ import annotations

import pytest
import torch

import scg
from scg.graph.nodes import NO_SAMPLE_DIMS


@pytest.mark.parametrize("rows", [1, 3])
def test_learned_loss_gradient_is_the_written_out_mean_square_bit_for_bit(rows: int) -> None:
    gen = torch.Generator().manual_seed(2)
    pred = torch.randn(7, generator=gen, requires_grad=True)
    targets = torch.randn(rows, 7, generator=gen)

    class Fixed(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return pred * x

    bl = scg.baselines.Learned(Fixed()).given(torch.ones(7))
    nodes = [_Node(bl) for _ in range(rows)]
    got = bl(nodes, targets, [NO_SAMPLE_DIMS] * rows)
    assert got.loss is not None
    want = ((pred - targets) ** 2).mean()
    assert torch.equal(got.loss, want)
    (g_got,) = torch.autograd.grad(got.loss, pred)
    (g_want,) = torch.autograd.grad(want, pred)
    assert torch.equal(g_got, g_want)
    # not vacuous: a sum instead of the mean (a rescaled regression) differs
    (g_sum,) = torch.autograd.grad(((pred - targets) ** 2).sum(), pred)
    assert not torch.allclose(g_got, g_sum)
    assert torch.equal(got.value, pred.detach())


class _Node:
    """A node stand-in: its baseline and a description for messages."""

    def __init__(self, baseline: scg.baselines.Learned) -> None:
        self.baseline = baseline

    def describe(self) -> str:
        return "node"
