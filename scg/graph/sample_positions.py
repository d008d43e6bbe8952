"""Where each sample dimension is: following ``n=k`` / ``Enumerate`` dimensions through torch ops.

A node drawn with ``n=k`` (or enumerated) has a *sample dimension*, and every cost it influences
must hold it at a fixed place: the layout of `scg.credit.sample_dims` (sample dimensions newest
node first, before the batch dimensions). The layout used to be checked by size alone, so with
two sample dimensions of equal size a cost that swapped them (``f(u[:, None], v[None])`` instead
of ``f(u[None], v[:, None])``, or a ``transpose(0, 1)``) was credited to the wrong samples
silently: the weight of sample ``i`` of ``u`` went to sample ``i`` of ``v``.

This module follows each sample dimension as an *index*: per tensor, a map ``node -> dim`` (or
`LOST`) stored next to the influence mask (only while the graph has sample dimensions, so
other graphs pay nothing). Each torch call maps an input's dimension ``d`` to the output's:

* moving rules: ``transpose/swapaxes/swapdims/t/T/mT/permute/movedim`` (the permutation),
  ``unsqueeze``/``squeeze``, basic indexing with ``None``/ints/slices/``...``, reductions over
  other dimensions (the later ones shift down), ``stack``, and right-aligned broadcasting
  (elementwise ops of different ranks, ``expand``, batched ``matmul`` and ``einsum``, whose
  operands' examples move with their dimensions: `scg.graph.sample_shifts`);
* otherwise the op's position rule (`scg.graph.positions`): a dimension inside the prefix
  the rule keeps stays where it is;
* anything else, or a reduction over the sample dimension itself, loses it (`LOST`).

When the surrogate is built (`check_layout`), a dimension found at a place other than the
layout's is an error (a swap); so is one whose slices were combined (`MIXED`: a reduction over it
broadcast back, two inputs holding it at different places, a write of some of its samples into a
slice of a tensor that holds it) and, when the layout has two or more sample dimensions, one lost
on the way (an index, a reshape or an op without a rule across it could have permuted or mixed the
samples: a silently biased gradient before). With one sample dimension, the positional check of
`scg.credit.plates` refuses a cost that mixes its slices.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from scg.errors import SCGError
from scg.graph.nodes import Node
from scg.graph.position_rules import along_dims, along_rule, elementwise, reduced_dims, reduction_rule
from scg.graph.positions import rule_prefix

__all__ = [
    "EXPAND_OPS",
    "LOST",
    "MIXED",
    "PERMUTE_OPS",
    "check_layout",
    "follow",
    "held_dims",
    "moved_dim",
    "node_value_map",
    "norm_dim",
]

Tensor = torch.Tensor

#: the sample dimension went through an operation that does not keep it in one place
LOST = -1
#: the slices of the sample dimension were combined (a reduction over it, a cumsum/softmax/sort/
#: flip along it) but the node's influence is still there
MIXED = -2

PERMUTE_OPS = frozenset("transpose swapaxes swapdims t T mT permute movedim".split())
_MATMUL = frozenset("matmul __matmul__ __rmatmul__ bmm baddbmm".split())
EXPAND_OPS = frozenset("expand expand_as broadcast_to".split())


def norm_dim(d: Any, n: int) -> int:
    return int(d) % max(n, 1)


def _permutation(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], n: int) -> list[int] | None:
    """``perm[i]``: the input dimension that output dimension ``i`` is."""
    order = list(range(n))
    if name in ("transpose", "swapaxes", "swapdims"):
        a = norm_dim(args[1] if len(args) > 1 else kwargs.get("dim0", 0), n)
        b = norm_dim(args[2] if len(args) > 2 else kwargs.get("dim1", 1), n)
        order[a], order[b] = order[b], order[a]
        return order
    if name in ("t", "T"):
        return order[::-1]
    if name == "mT":
        if n < 2:
            return None
        order[-2], order[-1] = order[-1], order[-2]
        return order
    if name == "permute":
        dims = args[1:] if len(args) > 2 or not isinstance(args[1], (list, tuple)) else args[1]
        return [norm_dim(d, n) for d in dims]
    if name == "movedim":
        src = args[1] if len(args) > 1 else kwargs.get("source")
        dst = args[2] if len(args) > 2 else kwargs.get("destination")
        srcs = [norm_dim(d, n) for d in (src if isinstance(src, (list, tuple)) else [src])]
        dsts = [norm_dim(d, n) for d in (dst if isinstance(dst, (list, tuple)) else [dst])]
        rest = [d for d in order if d not in srcs]
        out: list[int | None] = [None] * n
        for s, t in zip(srcs, dsts):
            out[t] = s
        it = iter(rest)
        return [next(it) if o is None else o for o in out]
    return None


def _basic_index(items: tuple[Any, ...], n: int) -> list[int | None] | None:
    """``where[d]``: the output dimension of input dimension ``d`` (None: indexed away), for
    basic indexing only (None, ints, slices, Ellipsis); None for anything else."""
    consumed = sum(1 for it in items if it is not None and it is not Ellipsis)
    where: list[int | None] = []
    out = 0
    for it in items:
        if it is Ellipsis:
            for _ in range(n - consumed):
                where.append(out)
                out += 1
        elif it is None:
            out += 1
        elif isinstance(it, bool) or not isinstance(it, (int, slice)):
            return None
        elif isinstance(it, int):
            where.append(None)
        else:
            where.append(out)
            out += 1
    while len(where) < n:
        where.append(out)
        out += 1
    return where


def moved_dim(
    name: str, rule: Any, args: tuple[Any, ...], kwargs: dict[str, Any], a: Tensor, o: Tensor, pos: int, d: int
) -> int | None:
    """Where a dimension-moving op puts input dimension ``d`` (LOST when it is consumed); None
    when the op has no moving rule (the position rule decides)."""
    n = a.dim()
    if name in PERMUTE_OPS and pos == 0:
        perm = _permutation(name, args, kwargs, n)
        return None if perm is None or len(perm) != o.dim() else perm.index(d)
    if name in ("unsqueeze", "unsqueeze_") and pos == 0:
        k = norm_dim(kwargs.get("dim", args[1] if len(args) > 1 else 0), o.dim())
        return d + 1 if d >= k else d
    if name in ("squeeze", "squeeze_") and pos == 0:
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        if dim is None:
            gone = [i for i in range(n) if a.shape[i] == 1]
        else:
            sel = [norm_dim(x, n) for x in (dim if isinstance(dim, (list, tuple)) else [dim])]
            gone = [i for i in sel if a.shape[i] == 1]
        return LOST if d in gone else d - sum(1 for i in gone if i < d)
    if name == "__getitem__" and pos == 0:
        idx = args[1] if len(args) > 1 else None
        where = _basic_index(idx if isinstance(idx, tuple) else (idx,), n)
        if where is None:
            return None
        w = where[d]
        return LOST if w is None else w
    if rule is reduction_rule and pos == 0 and not (len(args) > 1 and isinstance(args[1], Tensor)):
        dims = reduced_dims(args, kwargs, n)
        if dims is None:
            dim = kwargs.get("dim", kwargs.get("axis", args[1] if len(args) > 1 else None))
            if dim is None or (isinstance(dim, (list, tuple)) and not dim):  # (all of them)
                return MIXED if o.dim() < n or n == 0 else d
            return None
        if d in dims:
            return MIXED
        return d if o.dim() == n else d - sum(1 for i in dims if i < d)
    if rule is along_rule and pos == 0 and o.dim() == n:
        along = along_dims(name, args, kwargs, n)  # (None: roll without dims, the flattened tensor)
        return MIXED if along is None or d in along else d
    if name == "stack":
        k = norm_dim(kwargs.get("dim", args[1] if len(args) > 1 else 0), o.dim())
        return d + 1 if d >= k else d
    if (rule is elementwise or name in EXPAND_OPS) and a.dim() < o.dim():
        return d + o.dim() - n  # broadcasting aligns dimensions from the right
    if name in _MATMUL and n >= 3 and d < n - 2 and o.dim() >= n:
        return d + o.dim() - n  # a batch dimension of a batched matmul (a matrix @ vector: the rule's prefix)
    return None


def held_dims(t: Tensor, sattr: str) -> set[int]:
    """The dimensions of ``t`` that hold a sample dimension (its map's places; `LOST` and `MIXED`
    are not places)."""
    tmap: dict[int, int] | None = getattr(t, sattr, None)
    return {d for d in tmap.values() if d >= 0} if tmap else set()


def follow(
    sattr: str,
    func: Callable[..., Any],
    name: str,
    rule: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    o: Tensor,
    tracked: Sequence[tuple[int, Tensor, int]],
) -> None:
    """Give output ``o`` the sample-dimension map (attribute ``sattr``) of its tracked inputs,
    moved by the op. A sample dimension lost behind a dimension of examples (one that holds no
    sample dimension and has size > 1: ``z.T[:, 0]`` of ``z`` drawn with ``n=k``) is `MIXED`:
    a permutation keeps the examples' positions (`samples_inserted`), so with one sample
    dimension the positional check no longer sees such a loss, and the examples in front would
    be read as the samples."""
    out: dict[int, int] | None = None
    for pos, a, _ in tracked:
        amap: dict[int, int] | None = getattr(a, sattr, None)
        if not amap:
            continue
        if out is None:
            out = {}
        for u, d in amap.items():
            nd = d if d == MIXED else LOST
            if d >= 0:
                try:
                    got = moved_dim(name, rule, args, kwargs or {}, a, o, pos, d)
                    if got is None:
                        p = rule_prefix(func, name, rule, args, kwargs, a, o, pos)
                        got = d if d < p else LOST
                except (TypeError, ValueError, IndexError, AttributeError):
                    got = LOST
                if got == MIXED or (0 <= got < o.dim() and o.shape[got] == a.shape[d]):
                    nd = got
                elif any(a.shape[e] != 1 and e not in amap.values() for e in range(d)):
                    nd = MIXED  # (lost behind dimensions of examples: see the docstring)
            prev = out.get(u)
            # two inputs holding u's samples at different places (one of them lost: a single
            # sample, a subset, a permutation) combine samples: output sample i depends on others
            out[u] = nd if prev is None or prev == nd or (prev == LOST and nd == LOST) else MIXED
    if out is not None:
        setattr(o, sattr, out)


def node_value_map(
    sattr: str, own: int | None, n_sample: int, params: Sequence[Tensor], batch_dims: int
) -> dict[int, int]:
    """The map of a node's value: its own sample dimension (``own``) at 0 and those of its
    parameters' sample dimensions after its ``n_sample`` new ones (a parameter with fewer
    dimensions than the batch is broadcast from the right: its dimensions are LOST; a parameter
    that combined a node's samples keeps them `MIXED`, which `check_layout` refuses)."""
    out: dict[int, int] = {}
    for t in params:
        for u, d in (getattr(t, sattr, None) or {}).items():
            nd = MIXED if d == MIXED else d + n_sample if d >= 0 and t.dim() >= batch_dims else LOST
            prev = out.get(u)  # (two parameters holding u's samples at different places: combined)
            out[u] = nd if prev is None or prev == nd else LOST if prev == nd == LOST else MIXED
    if own is not None:
        out[own] = 0
    return out


def check_layout(
    node: Node,
    layout: Sequence[int],
    smap: dict[int, int] | None,
    names: Callable[[int], str],
) -> None:
    """Check that each sample dimension of ``layout`` is where the layout puts it (see the
    module docstring). With one sample dimension, a lost one is left to the positional check of
    `scg.credit.plates` (which refuses a cost that mixes its slices)."""
    smap = smap or {}
    for i, u in enumerate(layout):
        d = smap.get(u, LOST)
        if d == i:
            continue
        if d == MIXED:
            raise SCGError(
                f"{node.describe()} mixes the samples of {names(u)} along its sample dimension "
                "(a reduction over it broadcast back, a cumsum/softmax/sort/flip along it, or two "
                "of its samples combined) but keeps that dimension: each sample would be credited "
                "with a cost that depends on the others. Reduce it and declare it with "
                "scg.cost(..., reduced=node), or keep the samples apart"
            )
        if d != LOST:
            raise SCGError(
                f"{node.describe()} holds the sample dimension of {names(u)} at dimension {d}, "
                f"but scg credits dimension {i} to it (sample dimensions lead, newest node "
                "first): the sample dimensions were swapped or moved (e.g. f(u[:, None], "
                "v[None]) instead of f(u[None], v[:, None]), or a transpose), so each sample "
                "would be credited with another node's samples' costs. Keep them in that order"
            )
        if len(layout) > 1:  # (lost: it may have been indexed, permuted or mixed on the way)
            raise SCGError(
                f"{node.describe()} keeps the sample dimension of {names(u)}, but scg lost it on the way "
                "(an index, a reshape or another operation scg does not follow across it: a permutation "
                "or a single sample broadcast back would credit each sample with others' costs). Keep "
                "the sample dimensions in front and apply to them only ops scg follows (broadcasting, "
                "basic indexing, unsqueeze, permute/transpose, reductions and reshapes of the trailing "
                "dimensions), or reduce them and declare it with scg.cost(..., reduced=node)"
            )
