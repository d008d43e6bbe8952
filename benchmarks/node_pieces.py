"""What a Declared node's record is made of, in instructions per call (``instructions.py --pieces``).

The toy workload's hand-written step executes about 2.08 M instructions for 4 draws and 4 costs,
so issue 25's Declared target (1.10x) leaves scg 208 k instructions per step for 4 ``scg.sample``,
4 ``scg.cost``, the graph's opening and closing and the surrogate's work beyond the hand-written
credit assembly. These pieces say what those calls cannot do without: the Python call itself,
finding the open graph, the user's line (for error messages), each metadata read of a tensor
(a C getter through torch's Python binding: the checks and the signature are made of them), a
copy of a small tensor (the private copy a score-function node is scored on), and the calls
themselves in a Declared graph, each against its hand-written equivalent.

Each piece runs its operation ``PIECE_CALLS`` times per counted call; the count of the piece
named in ``minus`` (the bare loop, an empty graph, the hand-written draw) is subtracted and the
difference divided by ``PIECE_CALLS``: instructions per operation, over what ``minus`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.distributions import Bernoulli

import scg
from scg.graph.graph import eager_graph, is_compiling
from scg.graph.nodes import CostNode, Node, caller_location

#: operations per counted call of a piece
PIECE_CALLS = 8


@dataclass(kw_only=True, slots=True)
class Piece:
    """One counted operation: ``run`` does it `PIECE_CALLS` times; ``minus`` names the piece whose
    count is subtracted before dividing (None: nothing subtracted)."""

    label: str
    run: Callable[[], None]
    minus: str | None


def pieces() -> dict[str, Piece]:
    """The pieces, in the report's order (B = 32 values: the toy's batch)."""
    x = torch.randn(32)
    logits = torch.zeros(32, requires_grad=True)
    declared = scg.Declared()
    calls = range(PIECE_CALLS)

    def api(value: torch.Tensor, *, name: str | None = None, step: int | None = None, baseline: object = None) -> None:
        pass

    def located(value: torch.Tensor, *, name: str | None = None, step: int | None = None) -> None:
        caller_location(False)

    def loop() -> None:
        for _ in calls:
            pass

    def call() -> None:
        for t in calls:
            api(x, name="c", step=t)

    def lookup() -> None:
        for _ in calls:
            is_compiling()
            eager_graph()

    def location() -> None:
        for t in calls:
            located(x, name="c", step=t)

    # (each read spelled out: ``getattr(x, name)`` would add a builtin call to each)
    def dtype() -> None:
        for _ in calls:
            x.dtype  # noqa: B018

    def shape() -> None:
        for _ in calls:
            x.shape  # noqa: B018

    def device() -> None:
        for _ in calls:
            x.device  # noqa: B018

    def version() -> None:
        for _ in calls:
            x._version  # noqa: B018

    def layout() -> None:
        for _ in calls:
            x.layout  # noqa: B018

    def nested() -> None:
        for _ in calls:
            x.is_nested  # noqa: B018

    def floating() -> None:
        for _ in calls:
            x.is_floating_point()

    def copy() -> None:
        for _ in calls:
            x.clone()

    def records() -> None:  # (a cost node's record as scg.cost makes it, kept as GraphRecord.record keeps it)
        nodes: list[Node] = []
        kept: list[CostNode] = []
        keys: dict[tuple[str, int | None], Node] = {}
        for t in calls:
            node = object.__new__(CostNode)
            node.index = t
            node.name = "c"
            node.value = x
            node.parents = 0
            node.step = t
            node.location = "?"
            node.foreign = {}
            node.graph = 0
            node.version = 0
            node.baseline = None
            node.reduced = 0
            node.baseline_inputs = None
            nodes.append(node)
            kept.append(node)
            keys[("c", t)] = node

    def empty_graph() -> None:
        with scg.Graph(structure=declared):
            pass

    def graphs() -> None:
        for _ in calls:
            with scg.Graph(structure=declared):
                pass

    def costs() -> None:
        with scg.Graph(structure=declared):
            for t in calls:
                scg.cost(x, name="c", step=t)

    def hand_draws() -> None:
        for _ in calls:
            d = Bernoulli(logits=logits, validate_args=False)
            d.log_prob(d.sample())

    def samples() -> None:
        with scg.Graph(structure=declared):
            for t in calls:
                scg.sample(Bernoulli(logits=logits, validate_args=False), name="b", step=t)

    return {
        "loop": Piece(label="the loop itself (subtracted below)", run=loop, minus=None),
        "call": Piece(label="a Python call with scg.cost's keywords, doing nothing", run=call, minus="loop"),
        "lookup": Piece(label="finding the open graph (is_compiling + the context variable)", run=lookup, minus="loop"),
        "location": Piece(label="the user's line (caller_location), in such a call", run=location, minus="call"),
        "dtype": Piece(label="tensor.dtype", run=dtype, minus="loop"),
        "shape": Piece(label="tensor.shape", run=shape, minus="loop"),
        "device": Piece(label="tensor.device", run=device, minus="loop"),
        "version": Piece(label="tensor._version", run=version, minus="loop"),
        "layout": Piece(label="tensor.layout", run=layout, minus="loop"),
        "nested": Piece(label="tensor.is_nested", run=nested, minus="loop"),
        "floating": Piece(label="tensor.is_floating_point()", run=floating, minus="loop"),
        "clone": Piece(label="tensor.clone() of 32 values", run=copy, minus="loop"),
        "record": Piece(
            label="a cost node's record: the object, its 12 fields, kept in two lists and a dict",
            run=records,
            minus="loop",
        ),
        "empty graph": Piece(label="(an empty Declared graph, opened and closed)", run=empty_graph, minus=None),
        "graph": Piece(label="a Declared graph opened and closed, no nodes", run=graphs, minus="loop"),
        "scg.cost": Piece(label="scg.cost in a Declared graph", run=costs, minus="empty graph"),
        "hand draw": Piece(
            label="by hand: Bernoulli(logits) of 32, sample(), log_prob()", run=hand_draws, minus="loop"
        ),
        "scg.sample": Piece(
            label="scg.sample of the same Bernoulli in a Declared graph, over the hand-written draw",
            run=samples,
            minus="hand draw",
        ),
    }


def per_operation(counts: dict[str, float]) -> dict[str, float]:
    """Instructions per operation of each piece (its count minus its ``minus`` piece's, divided by
    `PIECE_CALLS`); the pieces subtracted from ``scg.sample`` are the hand-written draws plus an
    empty graph."""
    table = pieces()
    out: dict[str, float] = {}
    for key, piece in table.items():
        if piece.minus is None:
            continue
        base = counts[piece.minus]
        if key == "scg.sample":  # (the samples' graph: subtract it too)
            base += counts["empty graph"]
        out[key] = (counts[key] - base) / PIECE_CALLS
    return out


def render(per_op: dict[str, float]) -> list[str]:
    """The pieces' table for ``instructions.md``."""
    table = pieces()
    lines = [
        "",
        "## What a Declared node is made of (`--pieces`)",
        "",
        f"Instructions per operation (each piece runs it {PIECE_CALLS} times; the bare loop, the empty graph or "
        "the hand-written draw subtracted, as labelled; `benchmarks/node_pieces.py`).",
        "",
        "| piece | instructions |",
        "|---|---:|",
    ]
    lines += [f"| {table[k].label} | {v:,.0f} |" for k, v in per_op.items()]
    return lines
