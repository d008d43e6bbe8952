"""The position rules of indexing: ``x[idx]``, ``x[idx] = v``, ``gather``, ``index_select``, ``scatter``.

Rules as in `scg.graph.position_rules` (``p``: the output's positions ``0 .. p-1`` are the input's);
here an input is the indexed tensor or (in) the index, and an index made of a node's values keeps
their positions where each output element reads one index element (``emb[z]``,
``gather(..., index=z)``).
"""

from __future__ import annotations

from typing import Any

import torch

from scg.graph.position_rules import INF, Rule

__all__ = ["RULES"]

Tensor = torch.Tensor


def _gather(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    d = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    if pos == 2 or t is kwargs.get("index"):  # the index: out[i] reads index[i]
        return INF if t.dim() == out.dim() else 0
    return int(d) % max(t.dim(), 1) if isinstance(d, int) else 0


def _index_select(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    d = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    if not isinstance(d, int):
        return 0
    d %= max(out.dim(), 1)
    if pos == 0 or (pos < 0 and t is kwargs.get("input")):
        return d
    if pos == 2 or (pos < 0 and t is kwargs.get("index")):
        return INF if d == 0 and t.dim() == 1 else 0
    return 0


def _scatter(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    if pos == 0:
        return INF  # the input's own elements stay where they are
    d = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    return int(d) % max(out.dim(), 1) if isinstance(d, int) else 0


def _getitem(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    idx = args[1] if len(args) > 1 else None
    items = idx if isinstance(idx, tuple) else (idx,)
    if pos != 0:  # t is (in) an index
        return _advanced_index_rule(items, t, out)
    advanced = [k for k, it in enumerate(items) if isinstance(it, (Tensor, list))]
    if advanced and advanced[-1] - advanced[0] + 1 != len(advanced):  # (non-adjacent: their dims go first)
        return 0
    p = 0
    consumed = 0
    for k, it in enumerate(items):
        if it is Ellipsis:  # (a boolean mask indexes as many dimensions as it has)
            rest = sum(
                x.dim() if isinstance(x, Tensor) and x.dtype == torch.bool else 1
                for x in items[k + 1 :]
                if x is not None
            )
            span = t.dim() - consumed - rest
            p += span
            consumed += span
            continue
        if isinstance(it, slice) and it.start in (None, 0) and it.stop is None and it.step in (None, 1):
            p += 1
            consumed += 1
            continue
        return p
    return INF


def _setitem(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """``out[idx] = value``: the value lands at the indexed positions."""
    if pos == 0:
        return INF
    idx = args[1] if len(args) > 1 else None
    items = idx if isinstance(idx, tuple) else (idx,)
    if pos == 1:  # (in) the index: a boolean mask of out's leading shape is elementwise
        if t.dtype == torch.bool and len(items) == 1 and out.shape[: t.dim()] == t.shape:
            return INF
        return 0
    k = 0
    for it in items:
        if isinstance(it, slice) and it.start in (None, 0) and it.stop is None and it.step in (None, 1):
            k += 1
        elif it is Ellipsis:  # (``out[...] = value``: every dimension the other items leave)
            k += out.dim() - sum(1 for other in items if other is not None and other is not Ellipsis)
        else:
            break
    region = _region_rank(items, out.dim())
    # (the value is broadcast to the indexed region from the right: its rows are out's only when
    # it has the region's rank, e.g. not z (B, D) into o[:, idx] with a 2-D idx, a (B, n1, n2) region)
    return k if region is not None and t.dim() == region else 0


def _list_rank(x: Any) -> int:
    """The rank of a (nested) list used as an index."""
    rank = 0
    while isinstance(x, (list, tuple)):
        rank += 1
        x = x[0] if x else None
    return rank


def _region_rank(items: tuple[Any, ...], ndim: int) -> int | None:
    """The rank of ``out[items]`` for ``out`` of rank ``ndim``: None when its advanced indices are
    not adjacent (their dimensions then go first)."""
    advanced = [k for k, it in enumerate(items) if isinstance(it, (Tensor, list))]
    if advanced and advanced[-1] - advanced[0] + 1 != len(advanced):
        return None
    consumed = sum(
        it.dim() if isinstance(it, Tensor) and it.dtype == torch.bool else 1
        for it in items
        if isinstance(it, (int, Tensor, list)) and not isinstance(it, bool)
    )
    rank = max(
        (
            1 if it.dtype == torch.bool else it.dim() if isinstance(it, Tensor) else _list_rank(it)
            for it in (items[k] for k in advanced)
        ),
        default=0,
    )
    nones = sum(1 for it in items if it is None)
    return ndim - consumed + rank + nones


def _advanced_index_rule(items: tuple[Any, ...], t: Tensor, out: Tensor) -> int:
    """A tracked tensor used as an index: positional when the advanced indices come first."""
    k = 0  # the tensor indices must be the first k items
    for it in items:
        if not isinstance(it, Tensor):
            break
        k += 1
    if k == 0:
        return 0
    for it in items[k:]:
        if isinstance(it, Tensor):
            return 0
    if t.dtype == torch.bool:
        return INF if k == 1 and t.dim() <= out.dim() and out.shape[:1] == t.shape[:1] and t.dim() == 1 else 0
    rank = items[0].dim() if k == 1 else max(items[i].dim() for i in range(k))
    return INF if t.dim() == rank else 0


#: rule -> the operations it covers, by the name torch reports
RULES: tuple[tuple[Rule, str], ...] = (
    (_gather, "gather take_along_dim"),
    (_index_select, "index_select"),
    (_scatter, "scatter scatter_ scatter_add scatter_add_ scatter_reduce scatter_reduce_"),
    (_getitem, "__getitem__"),
    (_setitem, "__setitem__"),
)
