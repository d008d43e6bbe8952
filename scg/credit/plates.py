"""Plates: which batch dimensions of a node get per-element credit, verified rather than guessed.

Algorithm 1 credits a stochastic node v with the costs it influences. For a batch of
independent examples ("a plate", in graphical-model notation) each element v[i] may be credited
with the matching cost elements c[i, ...] alone, which removes the other examples' costs from its
learning signal (lower variance, same expectation) — *if* c[i, ...] depends on v only through
v[i]. scg does not guess this from shapes: the tracker records, per tensor and node, the first
leading position that no longer lines up (`scg.graph.positions`), and the positions are
composed along the graph (`foreign_closure`). For a pair (v, c):

* the *plate rank* of v is its number of batch dimensions (after its sample dimensions), or the
  ``plates=`` it was declared with (``scg.sample(..., plates=k)`` or ``scg.Graph(plates=k)``);
* ``plates=0`` declares no plate: every pair of a node with more than one element is
  *whole-plate* (its elements share the credit of the whole cost);
* the pair is *per-element* when every cost position up to that rank lines up with v's (or has
  size 1 in the cost or in v); otherwise it is *mixed*. A position that lines up has one size in
  both but for a size-1 place for samples none filled (`PlateCheck.mixed`): the positions from
  the first one of size 1 in exactly one of them on do not line up.

A mixed pair falls back to *whole-plate* credit: each element of v is credited with the sum of c
over the batch (correct: Σ_i ∇log p(v_i)·Σ_j c_j has the right expectation, since the cross terms
have zero mean; higher variance). Batch dimensions of v beyond its plates always share credit.
Sample dimensions (``n=k``, ``Enumerate``) are rearranged by design and checked by identity
and size (`scg.credit.sample_dims`); positions are verified after them: a node's positions move
right past the sample dimensions put in front of its own (``t[z] * b`` with ``z`` drawn with
``n=k`` and ``b`` without), so a mixing of its examples before that broadcast is still seen.
An enumerated node cannot fall back (its support is enumerated for all examples in lockstep,
which is exact only for per-example costs), so mixing there raises. ``Graph.credit(v, c)`` tells
which rule a pair got.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from scg.errors import SCGError
from scg.graph.graph import GraphRecord
from scg.graph.masks import bits
from scg.graph.nodes import Node, StochasticNode
from scg.graph.positions import BATCH, INF, normalize

__all__ = ["PlateCheck", "foreign_closure", "mixed_from", "share_beyond"]


def foreign_closure(graph: GraphRecord, full: Sequence[int], layout_len: dict[int, int]) -> list[dict[int, int]]:
    """``F[i]``: position -> mask of the ancestors of node i whose dimensions stop lining up with
    node i's value at that position (ancestors absent from F[i] line up everywhere).

    A parent's positions are carried into node i's value past the difference of their sample
    dimensions (``layout_len``: how many lead each value): one more for a node drawn with ``n=k``,
    fewer for a cost that reduced a parent's (``scg.cost(..., reduced=j)``); a position among
    the parent's own sample dimensions stays there, or at the first of node i's batch positions
    when node i has fewer sample dimensions (whole-plate, `PlateCheck.mixed`)."""
    out: list[dict[int, int]] = []
    # positions at or beyond every node's rank, after the sample dimensions put in front of it,
    # can never be compared (pruned to keep F small)
    limit = max((n.value.dim() for n in graph.nodes), default=0) + sum(
        1 for n in graph.nodes if isinstance(n, StochasticNode) and n.n is not None
    )
    some = 0  # the nodes whose F is not empty: only those parents pass anything on
    for node in graph.nodes:
        acc: dict[int, int] = {}
        li = layout_len.get(node.index, 0)
        for j in bits(node.parents & some):
            lj = layout_len.get(j, 0)
            for q, qm in out[j].items():
                # (BATCH stays: after however many sample dimensions)
                p = q if q == BATCH or q >= INF else q - lj + li if q >= lj else min(q, li)
                acc[p] = acc.get(p, 0) | qm
        for p, pm in node.foreign.items():
            if p >= limit:
                continue
            reach = 0
            for j in bits(pm):
                reach |= full[j] | (1 << j)
            acc[p] = acc.get(p, 0) | reach
        if acc:
            acc = {p: m for p, m in normalize(acc).items() if p < limit}
            if acc:
                some |= 1 << len(out)
        out.append(acc)
    return out


def _position(fr: dict[int, int], i: int) -> int:
    for p, m in fr.items():
        if m >> i & 1:
            return p
    return INF


def plate_rank(v: StochasticNode, n_sample: int) -> int:
    """Number of v's batch dimensions that are plates (declared, or all of them)."""
    assert v.log_prob is not None or v.value is not None
    shape = v.log_prob.shape if v.log_prob is not None else v.value.shape
    batch = len(shape) - n_sample
    declared = v.plates
    return batch if declared is None else min(int(declared), batch)


class PlateCheck:
    """Per (score node, cost) pair: per-element credit or whole-plate fallback."""

    def __init__(self, graph: GraphRecord, full: Sequence[int], layout_len: dict[int, int]) -> None:
        self.graph = graph
        self.full = full
        self.layout_len = layout_len  # node index -> number of leading sample dimensions
        self.foreign = foreign_closure(graph, full, layout_len)
        self.any = [sum(f.values()) for f in self.foreign]  # nodes with a foreign position
        # (a graph with sample dimensions: a pair without a foreign position may be displaced)
        self.places = bool(layout_len)

    def mixed(self, v: StochasticNode, c: Node, every_batch_dim: bool = False) -> bool:
        """Whether cost ``c`` mixes the plate elements of ``v`` (see the module docstring);
        ``every_batch_dim``: along any of v's batch dimensions, its declared plates or not (an
        enumeration in lockstep is exact only when no element's cost reads another's).

        A position that lines up has the same size in ``c`` and ``v`` (an operation that changes
        it marks it foreign), except after a size-1 dimension put in as a place for samples
        (`scg.graph.sample_shifts.samples_inserted`) that none filled: ``z[:, None] * M`` of
        ``z`` (n, B, D) is ``(n, 1, B, D)``, z's positions one place right of the cost's. The
        first position where one of them has size 1 and the other not is therefore foreign too
        (before, ``z[b, d]`` was credited with ``c[0, d, :]``: a biased gradient)."""
        lv = self.layout_len.get(v.index, 0)
        vshape = (v.log_prob if v.log_prob is not None else v.value).shape
        if v.plates is not None and not every_batch_dim and plate_rank(v, lv) == 0:
            # plates=0: no plate elements, every element of v shares the credit of the whole cost,
            # which is whole-plate credit (reported so, and refused by DiCE, whose per-element
            # magic boxes cannot express it); none to share for a node with one element
            return any(s > 1 for s in vshape[lv:])
        marked = self.any[c.index] >> v.index & 1
        if not marked and not (self.places and self.full[c.index] >> v.index & 1):
            return False
        lc = self.layout_len.get(c.index, 0)
        rank = len(vshape) - lv if every_batch_dim else plate_rank(v, lv)
        if rank == 0:  # (no plate elements to mix: a node without batch dimensions)
            return False
        f = _position(self.foreign[c.index], v.index) if marked else INF
        cshape = c.value.shape
        if f == BATCH:  # (a pair declared whole-plate: from the cost's first batch position on)
            f = lc
        if f < lc:
            # among the cost's sample dimensions: a node's positions move past the sample
            # dimensions put in front of them (`scg.graph.sample_shifts.samples_inserted`) and
            # past those a reduction removed (`samples_combined`), so a position left there is a
            # mixing that happened where the node's examples could no longer be followed
            return True
        return mixed_from(vshape[lv : lv + rank], cshape[lc:], f - lc)

    def check_sample_slices(self, c: Node, layout: tuple[int, ...]) -> None:
        """A cost that keeps the sample dimension of a single multi-sample/enumerated node must
        not mix its slices (centring over samples, a sort along them): that needs a declared
        reduction, ``scg.cost(..., reduced=node)``. (With several sample dimensions, each is
        followed as an index and mixing is found by `scg.graph.sample_positions`.)"""
        if len(layout) != 1 or c.value.dim() == 0 or c.value.shape[0] <= 1:
            return
        u = layout[0]
        if _position(self.foreign[c.index], u) == 0:
            node = self.graph.nodes[u]
            raise SCGError(
                f"{c.describe()} mixes the samples of {node.describe()} along its sample "
                "dimension (e.g. centring over the samples, or a reduction broadcast back), or goes "
                "through an operation scg cannot follow along it (a flatten of the samples into the "
                "batch, as before F.cross_entropy: write the loss on the unflattened tensor, "
                "-logits.log_softmax(-1).gather(-1, y[..., None]).squeeze(-1)), but keeps that "
                "dimension: each sample would be credited with a cost that depends on the others. "
                "If it truly mixes them, reduce it and declare it with scg.cost(..., reduced=node) "
                "(a multi-sample objective), or keep the samples apart"
            )

    def matrix(self, rows: Sequence[StochasticNode], cols: Sequence[Node], a: np.ndarray) -> np.ndarray:
        """``M[i, j]``: rows[i] influences cols[j] and the cost mixes its plate elements."""
        m = np.zeros(a.shape, dtype=bool)
        rowmask = 0
        whole = 0  # the nodes declared plates=0: whole-plate with every cost (`mixed`)
        for v in rows:
            rowmask |= 1 << v.index
            if v.plates == 0:
                whole |= 1 << v.index
        for j, c in enumerate(cols):
            if not self.places and not (self.any[c.index] | whole) & rowmask:
                continue  # every node that influences this cost lines up with it
            for i in np.nonzero(a[:, j])[0]:
                m[i, j] = self.mixed(rows[int(i)], c)
        return m


def mixed_from(vshape: Sequence[int], cshape: Sequence[int], first: int) -> bool:
    """Whether a cost of batch shape ``cshape`` mixes the elements of a node whose plate
    dimensions are ``vshape`` (both without their sample dimensions), given that the cost's
    positions line up with the node's before ``first`` (`PlateCheck.mixed`): from ``first`` on, or
    from the first position where one of them has size 1 and the other not (a size-1 place for
    samples that none filled, which displaced the node's positions), a position of size > 1 in
    both is a mixing. Plain Python on the shapes: the traced surrogate calls it too."""
    end = min(len(vshape), len(cshape))
    for q in range(min(first, end)):  # (a size-1 place for samples left unfilled: displaced from there)
        if (cshape[q] == 1) != (vshape[q] == 1):
            first = q
            break
    for q in range(first, end):
        if cshape[q] > 1 and vshape[q] > 1:
            return True
    return False


def share_beyond(x: torch.Tensor, start: int) -> torch.Tensor:
    """``x`` (q, *shape) summed over the dims ``start..`` of ``shape``, kept with size 1: every
    element of those dimensions gets the credit of all of them once broadcast. ``x`` must not
    be expanded along them (a cost broadcast to a node's shape would be counted once per copy)."""
    dims = tuple(range(1 + start, x.dim()))
    if not dims:
        return x
    return x.sum(dim=dims, keepdim=True)
