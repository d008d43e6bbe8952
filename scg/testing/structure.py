"""Check a declared structure against tracking: ``check_structure(program, declared)``.

A [`scg.Declared`][scg.Declared] structure replaces influence tracking by a statement of which stochastic
nodes influence which costs, and with which credit (per example or whole plate). Algorithm 1 of
Schulman et al. (2015) stays unbiased when the declared relation *contains* the true one (a
cost a node does not influence adds a zero-mean term to its score) and when it is coarser
(whole-plate credit where per-element would do); it is biased when it misses a pair, or claims
per-element credit for a cost that mixes the examples. This check runs the program once
tracked and once under the declaration, with the same seed (so the same nodes are drawn), and
compares the credit of every (score-function node, cost) pair, and whether each enumerated node
influences each cost.

A declared graph is not watched, so neither are its baselines' inputs (Theorem 2: a baseline must
not depend on a node it is subtracted for). The tracked run refuses a baseline computed from its
own node, or a cost's baseline computed from a node that influences the cost, with the
`SCGError` a tracked graph raises (biased under any declaration). A cost's baseline is subtracted
from the credit of every node the *declaration* credits with the cost, so an over-declared pair is
unbiased only while the baseline does not depend on the node: its inputs computed from it (or
from a value it influences) make the extra term ∇log p(v)·(c − b_c) have a nonzero mean. The check
reads the inputs' influence off the tracked run and refuses that pair as biased.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from scg.credit.graph import Graph
from scg.errors import SCGError
from scg.graph.masks import with_ancestors
from scg.graph.nodes import CostNode, StochasticNode
from scg.graph.structure import Declared, signature
from scg.testing.arguments import at_least

__all__ = ["check_structure"]

_NAMES = {None: "no credit (does not influence)", False: "per-element credit", True: "whole-plate credit"}


def _run(program: Callable[[], Any], seed: int, **graph_kwargs: Any) -> Graph:
    torch.manual_seed(seed)
    with Graph(**graph_kwargs) as g:
        program()
    g.surrogate_loss()
    return g


def check_structure(
    program: Callable[[], Any],
    structure: Declared,
    *,
    runs: int = 1,
    seed: int = 0,
    exact: bool = True,
    graph_kwargs: dict[str, Any] | None = None,
) -> None:
    """Raise ``AssertionError`` if ``structure`` credits a (node, cost) pair differently from
    tracking.

    Args:
        program: builds the graph (``scg.sample`` / ``scg.cost`` calls), as for
            [`scg.testing.estimate_gradients`][scg.testing.estimate_gradients]; it is run inside ``scg.Graph``.
        structure: the declaration to check.
        runs: how many seeds (``seed``, ``seed + 1``, ...) to check with (a program whose data
            flow depends on sampled values needs several).
        exact: also report *over*-declared pairs (a pair tracking does not credit, or whole-plate
            credit where tracking finds per-element): unbiased, but a higher variance. With
            ``False`` only the pairs that bias the gradient are reported.
        graph_kwargs: passed to both graphs (``plates=``, ``intervene=``).

    The message names the first pair that differs, what each side credits, and whether the
    difference biases the gradient. A cost's baseline (``Learned.given(h)``, ``SelfCritical``
    with a tensor) whose inputs tracking finds computed from a node the declaration credits with
    the cost is reported first, as biased (over-declaring is unbiased only without such a
    baseline). The program's own errors, found by the tracked run, are raised as it raises them
    (an `SCGError`: a baseline computed from its node, or from a node that influences its cost).
    """
    if not isinstance(structure, Declared):
        raise SCGError(f"check_structure: expected a scg.Declared, got {type(structure).__name__}")
    at_least(runs, 1, "runs", "check_structure")
    kwargs = dict(graph_kwargs or {})
    for r in range(runs):
        tracked = _run(program, seed + r, **kwargs)
        declared = _run(program, seed + r, structure=structure, **kwargs)
        if signature(tracked.nodes) != signature(declared.nodes):
            raise AssertionError(
                "check_structure: the program built different nodes in the two runs with the "
                f"same seed ({len(tracked.nodes)} vs {len(declared.nodes)} nodes); it must draw "
                "only through scg.sample and torch's global generator"
            )
        want, got = tracked.credit_pairs, declared.credit_pairs
        _check_baseline_inputs(tracked, got, structure, seed + r)
        for key in sorted(set(want) | set(got)):
            w, d = want.get(key), got.get(key)
            if w == d:
                continue
            biased = w is not None and (d is None or (w and not d))
            if not biased and not exact:
                continue
            v, c = tracked.nodes[key[0]], tracked.nodes[key[1]]
            effect = (
                "the declared surrogate is BIASED" if biased else "unbiased, but with a higher variance than tracking"
            )
            raise AssertionError(
                f"check_structure (seed {seed + r}): {structure!r} gives {v.describe()} "
                f"{_NAMES[d]} from {c.describe()}; tracking finds {_NAMES[w]}: {effect}"
            )
        _check_enumerated(tracked, declared, structure, seed + r, exact)


def _check_baseline_inputs(tracked: Graph, credit: dict[tuple[int, int], bool], structure: Declared, seed: int) -> None:
    """Theorem 2 under the declaration: a cost's baseline must not be computed from a node the
    declaration credits with the cost (`scg.credit.soundness.check_baseline_inputs` makes the
    check for the tracked credit; the declared graph recorded no influence to make it with)."""
    nodes, full = tracked.nodes, tracked.full_influence()
    for (i, j), _ in sorted(credit.items()):
        c = nodes[j]
        if not isinstance(c, CostNode) or c.baseline_inputs is None or not c.baseline_inputs.mask:
            continue  # (no inputs, or constants)
        if with_ancestors(c.baseline_inputs.mask, full) >> i & 1:  # (the inputs, or what they are computed from)
            v = nodes[i]
            raise AssertionError(
                f"check_structure (seed {seed}): {structure!r} credits {v.describe()} with {c.describe()} "
                f"(tracking finds it does not influence the cost), and the cost's baseline "
                f"({type(c.baseline).__name__}) is computed from the node: its inputs depend on it. Subtracted "
                "from the node's credit, the baseline biases its gradient (Theorem 2): the declared surrogate is "
                "BIASED. Leave the pair out of the declaration, or compute the baseline's inputs from values that "
                "do not depend on the node"
            )


def _check_enumerated(tracked: Graph, declared: Graph, structure: Declared, seed: int, exact: bool) -> None:
    """An enumerated node gets no credit (its support is summed exactly, weighted by its
    probabilities), so the pairs above miss it: compare whether it influences each cost. A cost
    declared free of it, which holds its support dimension, is summed over the support without the
    weights: the value and the gradient are wrong."""
    for v in tracked.nodes:
        if not (isinstance(v, StochasticNode) and v.enumerated):
            continue
        for c in tracked.nodes:
            if not isinstance(c, CostNode):
                continue
            w, d = tracked.influences(v, c), declared.influences(declared.nodes[v.index], declared.nodes[c.index])
            if w == d or (not w and not exact):
                continue
            effect = (
                "the declared surrogate is BIASED (the cost is summed over the support without its probabilities)"
                if w
                else "unbiased, but the cost is enumerated over a support it does not depend on"
            )
            raise AssertionError(
                f"check_structure (seed {seed}): {structure!r} declares that the enumerated {v.describe()} "
                f"{'influences' if d else 'does not influence'} {c.describe()}; tracking finds it "
                f"{'does' if w else 'does not'}: {effect}"
            )
