"""The three ways a graph finds its structure, for tests that run one program in each (not a test module)."""

from __future__ import annotations

import scg

#: a tracked graph, a declared one, and a Cached one past its first (tracked) graph
MODES = ("tracked", "declared", "cached")


def graph_in(mode: str) -> scg.Graph:
    """A new graph of ``mode`` (one of `MODES`); a Cached graph past its first, so not tracked."""
    if mode == "tracked":
        return scg.Graph()
    if mode == "declared":
        return scg.Graph(structure=scg.Declared())
    cached = scg.Cached(check_every=None)
    with scg.Graph(structure=cached):  # (the first graph is tracked; the next one is not)
        pass
    return scg.Graph(structure=cached)
