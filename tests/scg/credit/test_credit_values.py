"""Issue 24, item 11: ``Graph.credit(v, c)`` says how each node was credited, for every kind.

It used to answer "none" for a pathwise or relaxed node that does influence the cost (only
score-function pairs were recorded). Every documented value is checked here, in tracked,
``Cached`` and ``Declared`` graphs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Normal, OneHotCategorical

import scg
from scg.estimators import Enumerate, GumbelSoftmax

MODES: list[tuple[str, Callable[[], dict[str, Any]]]] = [
    ("tracked", dict),
    ("cached", lambda: {"structure": scg.Cached(check_every=None)}),
    ("declared", lambda: {"structure": scg.Declared(lambda v, n: n.name != "c_free")}),
]


def _program() -> None:
    th = torch.zeros(3, requires_grad=True)
    table = torch.tensor([1.0, -1.0, 2.0])
    x = scg.sample(Normal(th, 1.0), name="x")  # pathwise (the default)
    y = scg.sample(OneHotCategorical(logits=th), name="y", estimator=GumbelSoftmax(0.5))
    e = scg.sample(Categorical(logits=th), name="e", estimator=Enumerate())  # (3,) support
    b = scg.sample(Bernoulli(logits=th), name="b")  # score function, (3,)
    scg.cost((x**2).sum() + y @ table + table[e] + b.sum(), name="c_all")
    scg.cost(b * 2.0, name="c_b")  # per element for b
    scg.cost(b.flip(0) * table, name="c_mix")  # mixes b's elements: whole plate
    scg.cost(th.sum() * 1.0, name="c_free")  # no node influences it


@pytest.mark.parametrize("mode", MODES, ids=[m for m, _ in MODES])
def test_credit_names_how_each_node_is_credited(mode: tuple[str, Callable[[], dict[str, Any]]]) -> None:
    structure = mode[1]()
    for _ in range(2):  # (a Cached structure: the tracked graph, then the cached one)
        with scg.Graph(**structure) as g:
            _program()
        with pytest.raises(scg.SCGError, match="build the surrogate first"):
            g.credit("x", "c_all")
        g.surrogate_loss()
        assert g.credit("x", "c_all") == "pathwise"
        assert g.credit("y", "c_all") == "relaxed"
        assert g.credit("e", "c_all") == "enumerated"
        assert g.credit("b", "c_b") == "per-element"
        for v in ("x", "y", "e", "b"):
            assert g.credit(v, "c_free") == "none"
        if mode[0] != "declared":  # (the causal declaration credits b per example: declared so)
            assert g.credit("b", "c_mix") == "whole-plate"
            assert g.credit("x", "c_b") == "none"
