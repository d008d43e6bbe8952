"""The examples' positions past the sample dimensions: ops that insert, drop or move dimensions there.

A node drawn with ``n=k`` (or enumerated) puts its *sample dimensions* in front of the batch
dimensions (`scg.graph.sample_positions` follows where each one is), and a tensor meets them
through ops whose position rule alone would make its examples foreign: a broadcast that inserts
dimensions where samples go (``t[z] * b``, ``t[u][None] * v[:, None]``, a batched ``matmul``, an
``einsum``), a permutation of the sample dimensions (``z.transpose(0, 1)``), a reduction over
them or over size-1 dimensions (``z.sum(0)``, ``z[..., None, :].sum(-2)``). `samples_inserted`
and `samples_combined` say where the input's dimensions went instead, and from which output
position its alignment really breaks, so that `scg.graph.propagate` moves its foreign positions
with them: its examples stay lined up with the cost's after the sample dimensions, which is where
`scg.credit.plates` compares them.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise
from typing import Any

import torch

from scg.graph.position_rules import along_dims, along_rule, elementwise, reduced_dims, reduction_rule
from scg.graph.positions import INF
from scg.graph.sample_positions import EXPAND_OPS, PERMUTE_OPS, held_dims, moved_dim, norm_dim

__all__ = ["samples_combined", "samples_inserted"]

Tensor = torch.Tensor

_BATCHED = frozenset("matmul __matmul__ __rmatmul__".split())


def samples_combined(
    sattr: str,
    name: str,
    rule: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    a: Tensor,
    o: Tensor,
    pos: int,
) -> tuple[int, ...] | None:
    """When the op reduces, or mixes along, dimensions of input ``a`` that each hold a sample
    dimension (``a``'s map) or have size 1, or squeezes dimensions of size 1 that hold none: the
    dimensions the output dropped (sorted; ``()`` when it kept them: ``keepdim``, a softmax along
    the samples). Such an op combines samples, which the map records (`MIXED`: a cost must declare
    the reduction), or nothing at all (a size-1 dimension), not the batch's examples, so it adds no
    foreign position: the examples' positions after the dropped dimensions move down
    (``z[..., None, :].sum(-2)`` is ``z``; a node's own size-1 dimension dropped leaves its
    examples one place left of the cost's, which `scg.credit.plates.PlateCheck.mixed` reads as
    foreign from there). None for any other op (its position rule decides)."""
    if pos != 0:
        return None
    held = held_dims(a, sattr)
    shape = a.shape
    n = len(shape)
    ones = {d for d in range(n) if shape[d] == 1}
    if not held and not ones:
        return None
    kwargs = kwargs or {}
    if rule is reduction_rule and not (len(args) > 1 and isinstance(args[1], Tensor)):
        dims = reduced_dims(args, kwargs, n)
        if dims is None or not dims <= held | ones:
            return None
        return tuple(sorted(dims)) if o.dim() == n - len(dims) else () if o.dim() == n else None
    if rule is along_rule and o.dim() == n:
        dims = along_dims(name, args, kwargs, n)
        return () if dims is not None and dims <= held | ones else None
    if name == "squeeze" and a is not o:  # (squeeze_: a is already squeezed, its old shape unknown)
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        sel = range(n) if dim is None else [norm_dim(x, n) for x in (dim if isinstance(dim, (list, tuple)) else [dim])]
        gone = tuple(sorted({d for d in sel if d in ones}))
        return gone if gone and o.dim() == n - len(gone) and not held & set(gone) else None
    return None


def samples_inserted(
    sattr: str,
    name: str,
    rule: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    a: Tensor,
    o: Tensor,
    pos: int,
) -> tuple[tuple[int, ...], int] | None:
    """When the op keeps every dimension of input ``a``, in order, and only inserts new ones
    among them (right-aligned broadcasting, ``expand``, ``unsqueeze``, ``a[None]``, ``a[:, None]``),
    or only permutes ``a``'s dimensions so that those that hold no sample dimension keep their
    order (``transpose(0, 1)`` of two sample dimensions, or of ``(n, B)``, there and back):
    ``(where, f)``, ``where[d]`` the output dimension of ``a``'s dimension ``d``, and ``f`` the
    first position of ``o`` that breaks the alignment of ``a``'s positions moved there (`INF`
    when none does). A new dimension breaks it unless it holds a sample dimension (``o``'s map,
    `follow`) or has size 1 (a later broadcast may make it one), and so does a size-1 dimension of
    ``a`` expanded into anything but a sample dimension; so does a dimension of ``a`` of size > 1
    that a broadcast lays over a sample dimension ``a`` does not hold (``t[z][:, None] * b`` with
    ``b`` of batch ``(n, D)`` and ``z`` drawn with ``n=n``: ``b``'s rows meet ``z``'s samples).

    This is how a node drawn without another node's sample dimension meets a cost that holds it
    (``t[z] * b``, ``t[u][None] * v[:, None]``): its examples stay lined up with the cost's after
    the sample dimensions, which is where `scg.credit.plates` compares them, and its foreign
    positions move with them, so a mixing of its examples before the broadcast is still seen.
    None for any other op (its position rule decides)."""
    n, no = a.dim(), o.dim()
    if no < n:
        return None
    if name in _BATCHED:
        return _batched_matmul(sattr, name, args, a, o, pos)
    if name == "einsum":
        return _einsum_operand(sattr, args, a, o)
    kwargs = kwargs or {}
    oshape, ashape = o.shape, a.shape
    broadcast = (
        rule is elementwise
        or name in EXPAND_OPS
        or (rule is reduction_rule and len(args) > 1 and isinstance(args[1], Tensor))
    )
    if broadcast:
        k = no - n
        where = tuple(range(k, no))
    else:
        permutes = name in PERMUTE_OPS
        if (no == n and not permutes) or pos != 0:
            return None
        try:
            moved = [moved_dim(name, rule, args, kwargs, a, o, pos, d) for d in range(n)]
        except (TypeError, ValueError, IndexError, AttributeError):
            return None
        if not all(isinstance(w, int) and w >= 0 for w in moved):
            return None
        where = tuple(w for w in moved if w is not None)
        if any(oshape[w] != ashape[d] for d, w in enumerate(where)):
            return None
        if permutes:  # (the sample dimensions moved, the others in their order: read after the
            samples = held_dims(a, sattr)  # sample dimensions, the examples' positions stay)
            rest = [w for d, w in enumerate(where) if ashape[d] != 1 and d not in samples]
            if any(b <= p for p, b in pairwise(rest)):
                return None
        elif any(b <= p for p, b in pairwise(where)):
            return None
    held = held_dims(o, sattr)
    if broadcast and not held and ashape == oshape:
        return None
    own = held_dims(a, sattr) if broadcast and held else set()
    kept = set(where)
    places = ((g, g - (no - n) if g in kept else None) for g in range(no) if broadcast or g not in kept)
    f = _first_misplaced(places, ashape, oshape, held, own)
    return (() if no == n and broadcast else where), INF if f is None else f


def _first_misplaced(
    places: Iterable[tuple[int, int | None]],
    ashape: torch.Size,
    oshape: torch.Size,
    held: set[int],
    own: set[int],
) -> int | None:
    """The first output dimension ``g`` of ``places`` (each ``g`` with the dimension ``d`` of the
    operand ``a`` it holds, None for a new one) where ``a``'s examples stop lining up behind the
    samples: a dimension of ``a`` (size > 1) laid over samples ``a`` does not hold (``held``: the
    output's sample dimensions, ``own``: ``a``'s), or a new or expanded dimension of size > 1
    that holds no samples; None where there is none. A new dimension of size 1 is a place for
    samples (a later broadcast that fills it is checked then)."""
    for g, d in places:
        if d is not None and ashape[d] != 1:
            if g in held and d not in own:  # (its examples lined up with the samples, not behind them)
                return g
            continue
        if oshape[g] != 1 and g not in held:
            return g
    return None


def _batched_matmul(
    sattr: str, name: str, args: tuple[Any, ...], a: Tensor, o: Tensor, pos: int
) -> tuple[tuple[int, ...], int] | None:
    """`samples_inserted` for an operand ``a`` of a batched ``matmul`` (both operands of rank
    >= 2): its batch dimensions are broadcast from the right as by an elementwise op (the same
    checks: a new or expanded dimension must hold samples or have size 1, a dimension of ``a``
    must not lie on samples it does not hold); of its last two, the left operand keeps its rows
    (the output's second-last dimension) and is foreign from the output's last, the right operand
    from the output's second-last (its rows are contracted). ``b_mats (B, R, K) @ x (n, B, K, C)``
    keeps ``b_mats``'s examples lined up after the samples."""
    left = pos == 0 if name != "__rmatmul__" else pos == 1  # (x.__rmatmul__(m) is m @ x)
    if pos not in (0, 1) or len(args) < 2 or not isinstance(args[1 - pos], Tensor):
        return None
    n, no = a.dim(), o.dim()
    if n < 2 or args[1 - pos].dim() < 2 or no != max(n, args[1 - pos].dim()):
        return None
    oshape, ashape = o.shape, a.shape
    k = no - n
    where = tuple(range(k, no - 1 if left else no - 2))  # (batch dimensions, and the left's rows)
    held = held_dims(o, sattr)
    own = held_dims(a, sattr)
    f = _first_misplaced(((g, g - k if g >= k else None) for g in range(no - 2)), ashape, oshape, held, own)
    return where, (no - 1 if left else no - 2) if f is None else f


def _einsum_operand(sattr: str, args: tuple[Any, ...], a: Tensor, o: Tensor) -> tuple[tuple[int, ...], int] | None:
    """`samples_inserted` for an operand ``a`` of ``einsum`` with explicit subscripts, no ``...``
    and none repeated (``a`` given once): ``a``'s dimensions up to its first contracted one go
    where the output's subscripts put them, in their order (else None: the position rule
    decides); the output's other dimensions are new ones, checked as a broadcast's (they must
    hold samples or have size 1, and ``a``'s own must not lie on samples it does not hold); the
    output is foreign from the place after the last kept one when ``a`` has a contracted
    dimension. ``einsum("s,b->sb", t[z], b)`` keeps ``b``'s examples behind z's samples."""
    eq = args[0] if args and isinstance(args[0], str) else None
    if eq is None or "..." in eq or eq.count("->") != 1:
        return None
    ins, out = eq.replace(" ", "").split("->")
    subs = ins.split(",")
    ops = list(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else list(args[1:])
    places = [i for i, x in enumerate(ops) if x is a]
    if len(places) != 1 or len(subs) != len(ops):
        return None
    sub = subs[places[0]]
    if len(sub) != a.dim() or len(set(sub)) != len(sub) or len(set(out)) != len(out) or len(out) != o.dim():
        return None
    kept = []
    for ch in sub:
        if ch not in out:
            break
        kept.append(out.index(ch))
    if any(q <= p for p, q in pairwise(kept)):
        return None
    where = tuple(kept)
    end = INF if len(kept) == len(sub) else kept[-1] + 1 if kept else 0
    held = held_dims(o, sattr)
    own = held_dims(a, sattr)
    oshape, ashape = o.shape, a.shape
    into = ((g, kept.index(g) if g in kept else None) for g in range(min(end, o.dim())))
    f = _first_misplaced(into, ashape, oshape, held, own)
    return where, end if f is None else f
