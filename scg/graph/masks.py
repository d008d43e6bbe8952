"""Influence masks: a set of a graph's nodes as a Python ``int``, bit ``i`` standing for node ``i``.

The tracker (`scg.graph.tracking`) gives every tensor the mask of the nodes it was computed from,
a declared or cached structure stores its relation as masks, and the credit code reads which nodes
a mask holds (`bits`) and which nodes influence each node (`closure` of the direct masks).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["bits", "closure", "with_ancestors"]


def bits(mask: int) -> tuple[int, ...]:
    """Indices of the set bits of ``mask``, lowest first: one step per set bit. Not memoised: the
    credit code asks for them when it builds a plan (once per graph signature), not at every step,
    and under ``torch.compile`` dynamo warns about every ``functools.lru_cache`` it traces."""
    found = []
    rest = mask
    while rest:
        low = rest & -rest
        found.append(low.bit_length() - 1)
        rest ^= low
    return tuple(found)


def closure(direct: list[int]) -> list[int]:
    """Transitive closure of direct-influence masks.

    ``direct[i]`` is the mask of nodes that node ``i`` was computed from directly; nodes are in
    creation order, so every parent index is smaller than its child's. Returns ``full`` with
    ``full[i]`` the mask of every node that influences node ``i``: with ``P(i)`` the direct
    parents, ``full[i] = direct[i] ∪ ⋃_{j ∈ P(i)} full[j]``. Parents are visited from the newest
    down, skipping those already covered by a later parent's closure, so a long chain (where every
    value depends on all earlier ones) costs one step per node, not one per bit.
    """
    full: list[int] = []
    for d in direct:
        acc = d
        pending = d
        while pending:
            j = pending.bit_length() - 1
            reach = full[j]
            acc |= reach
            pending &= ~(reach | (1 << j))
        full.append(acc)
    return full


def with_ancestors(mask: int, full: Sequence[int]) -> int:
    """``mask`` and every node that influences one of its nodes (``full[j]``: node j's influencers,
    from `closure`): what a value computed from the nodes of ``mask`` depends on."""
    reach = mask
    for j in bits(mask):
        reach |= full[j]
    return reach
