"""EMA finds each node's running average by (name, step): nodes given in the table's order, a
subset, a new key among known ones, and another order all read and update their own rows (the
pre-update value returned), as a dictionary of scalars updated by hand does."""

from __future__ import annotations

import torch

import scg
from scg.graph.nodes import NO_SAMPLE_DIMS


class _Node:
    """A node stand-in: the key EMA reads and a description for messages."""

    def __init__(self, name: str, step: int | None = None) -> None:
        self.name, self.step = name, step

    def describe(self) -> str:
        return f"node {self.name!r}"


def test_ema_reads_and_updates_each_keys_row_in_any_order_and_subset() -> None:
    beta, init = 0.25, 0.5
    ema = scg.baselines.EMA(beta, init=init)
    want: dict[tuple[str, int | None], float] = {}
    gen = torch.Generator().manual_seed(4)
    a, b, c, a1 = _Node("a"), _Node("b"), _Node("c"), _Node("a", 1)
    for nodes in ([a, b], [a, b], [b], [c, a], [a1, c, b, a], [b, a1]):
        targets = torch.randn(len(nodes), 3, generator=gen)
        got = ema(nodes, targets, [NO_SAMPLE_DIMS] * len(nodes))
        assert got.value.shape == (len(nodes), 1)
        for row, node in enumerate(nodes):
            key = (node.name, node.step)
            old = want.get(key, init)
            assert got.value[row, 0].item() == torch.tensor(old).item(), (nodes, key)
            want[key] = old + beta * (targets[row].mean().item() - old)
    for (name, step), value in want.items():
        assert abs(float(ema.value(name, step)) - value) < 1e-6
