"""EMA finds each node's running average by (name, step): nodes given in the table's order, a
subset, a new key among known ones, and another order all read and update their own rows (the
pre-update value returned), as a dictionary of scalars updated by hand does."""

from __future__ import annotations

import torch
from _host_reads import count_syncs

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


def test_ema_grows_its_table_and_gives_its_values_without_a_host_read() -> None:
    """New keys add rows on the targets' device and ``value`` returns a tensor: neither waits for
    the device (on a GPU each host read does; the C2F trainer asks for a value per decoder step)."""
    ema = scg.baselines.EMA(0.5, init=1.0)
    gen = torch.Generator().manual_seed(0)
    seen = []
    with count_syncs() as calls:
        for k in (1, 2, 4):  # a longer sequence each time: new (name, step) keys
            nodes = [_Node("r", t) for t in range(k)]
            seen.append([ema.value("r", t) for t in range(k)])
            ema(nodes, torch.randn(k, 3, generator=gen), [NO_SAMPLE_DIMS] * k)
    assert calls == []
    assert all(isinstance(v, torch.Tensor) and v.dim() == 0 for row in seen for v in row)
    assert [float(v) for v in seen[0]] == [1.0]  # init before the first update
    assert float(seen[2][3]) == 1.0 and float(seen[2][0]) != 1.0  # a new key at init, an updated one moved


def test_ema_updates_its_table_in_place_once_its_keys_are_known() -> None:
    """A step captured in a CUDA graph replays the update into the tensor the next step reads:
    after the keys are known, every call (all rows in order, a subset, another order) writes the
    same tensor, and each call still returns the values from before its update."""
    ema = scg.baselines.EMA(0.5)
    gen = torch.Generator().manual_seed(1)
    nodes = [_Node("r", t) for t in range(3)]
    ema(nodes, torch.randn(3, 2, generator=gen), [NO_SAMPLE_DIMS] * 3)  # (makes the table)
    table = ema._values  # (private: the tensor a captured step reads and writes)
    assert table is not None
    for group in (nodes, nodes[1:], [nodes[2], nodes[0]]):
        before = [float(ema.value("r", n.step)) for n in group]
        got = ema(group, torch.randn(len(group), 2, generator=gen), [NO_SAMPLE_DIMS] * len(group))
        assert got.value.flatten().tolist() == before
        assert ema._values is table
        assert [float(ema.value("r", n.step)) for n in group] != before
