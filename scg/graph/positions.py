"""Positional alignment: which leading dimensions of a tensor still line up with a node's.

scg credits each element of a batched stochastic node with the matching elements of the costs it
influences (Algorithm 1 of Schulman et al. 2015 applied per example). That is unbiased only if a
cost element ``c[i, ...]`` depends on node ``v`` through ``v[i, ...]`` alone — the *plate*
assumption: the examples of a batch are independent copies of one graph. Instead of guessing it
from shapes, scg *follows* it: for every tensor computed from a node it records, per node, the
first leading position that no longer lines up with the node's dimensions (its *foreign*
position ``f``): positions ``0 .. f-1`` of the tensor are the node's positions ``0 .. f-1``.

Each torch operation maps its inputs' positions to its output's by a rule (`prefix`): an
elementwise op of equal-rank inputs keeps every position; ``sum(dim=d)`` keeps ``0 .. d-1`` (and
all, when it removes the last dimension or keeps dims); ``cumsum``/``softmax``/``sort`` along
``d`` keep ``0 .. d-1``; ``transpose``/``permute`` keep the positions before the first moved one;
a reshape keeps the prefix of unchanged sizes; ``x @ W`` keeps all but the contracted dimension;
``stack``/``cat`` along ``d`` keep ``0 .. d-1``; a broadcast that adds leading dimensions or
expands a size-1 dimension keeps only the positions before it, except where the dimensions it
adds or expands hold sample dimensions (``n=k``, ``Enumerate``): the input's positions then move
right with its dimensions (`scg.graph.sample_shifts.samples_inserted`). **An operation without a rule
keeps none** (a conservative fallback: the node is then credited with whole costs). The rules
are `scg.graph.position_rules` (tensor operations), `scg.graph.index_rules` and
`scg.graph.nn_rules`, looked up by the operation's name in `TABLE`.

A position ``p ≥ f`` of a tensor is harmless when its size is 1 there (nothing to confuse), so
the foreign position stored is the first position ``≥ f`` of size > 1. Whether per-element
credit holds for a pair (node, cost) is decided when the surrogate is built (`scg.credit.plates`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from scg.graph import index_rules, nn_rules, position_rules
from scg.graph.position_rules import INF, Rule, elementwise

__all__ = ["BATCH", "INF", "Rule", "declare_rowwise", "foreign_from", "merge", "normalize", "prefix", "shift"]

Tensor = torch.Tensor

#: "foreign from the first batch position on", after however many sample dimensions a node holds:
#: the position of a pair declared whole-plate (`scg.graph.structure.declared_relation`), which is
#: not known to mix samples
BATCH = -1

#: called after declare_rowwise changes the rules (the tracker clears its per-function cache)
ON_CHANGE: list[Callable[[], None]] = []

#: op name -> how it maps positions (the name torch reports: ``add`` for ``torch.add``,
#: ``Tensor.add`` and ``Tensor.add_``): the elementwise operations, each with its in-place
#: ``name_``, then the rules of tensor operations, indexing and ``torch.nn.functional``
#: (`declare_rowwise` adds to it)
TABLE: dict[str, Rule] = {n: elementwise for base in position_rules.ELEMENTWISE.split() for n in (base, base + "_")}
TABLE.update(
    (n, rule)
    for rules in (position_rules.RULES, index_rules.RULES, nn_rules.RULES)
    for rule, names in rules
    for n in names.split()
)


def declare_rowwise(op: Callable[..., Any] | str, dims: int = 1, args: Sequence[int] | None = None) -> None:
    """Declare that ``op`` keeps rows: output row ``i`` is computed from row ``i`` of its
    row-aligned tensor arguments only (their leading ``dims`` dimensions line up with the
    outputs').

    Args:
        op: a function, a ``torch.library`` custom op, or its name as torch reports it
            (``"my_attend.default"``).
        dims: how many leading dimensions are rows.
        args: positions of the row-aligned arguments (default: all tensor arguments); a
            tracked value in any other argument is treated as mixing.

    Operations scg has no rule for are treated as mixing their inputs' rows (whole-batch credit
    for the nodes they carry, `scg.credit.plates`); this restores per-example credit through them.
    """
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 0:
        raise ValueError(f"declare_rowwise(dims=...): expected an int >= 0, got {dims!r}")
    if args is not None and (
        isinstance(args, (str, bytes))
        or not isinstance(args, Iterable)
        or not all(isinstance(a, int) and not isinstance(a, bool) and a >= 0 for a in args)
    ):
        raise ValueError(f"declare_rowwise(args=...): expected None or argument positions (ints >= 0), got {args!r}")
    if not isinstance(op, str) and not callable(op):
        raise ValueError(f"declare_rowwise(op): expected a function, a custom op or its name, got {type(op).__name__}")
    if getattr(op, "__name__", None) == "<lambda>":
        raise ValueError(
            "declare_rowwise(op): a lambda has no name torch reports its calls by, so the declaration "
            "would never apply; declare a named function or custom op"
        )
    aligned = None if args is None else frozenset(int(a) for a in args)
    names = [op] if isinstance(op, str) else [getattr(op, "__name__", "")]
    default = getattr(op, "default", None)  # a custom op's OpOverload
    if default is not None:
        names.append(getattr(default, "__name__", ""))
    qualified = getattr(op, "_qualname", None)  # torch.library.custom_op objects
    if isinstance(qualified, str):
        names.append(qualified.split("::")[-1] + ".default")

    def rule(name: str, call_args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
        if aligned is not None and pos not in aligned:
            return 0
        return min(dims, t.dim(), out.dim()) if t.dim() >= dims else 0

    for n in names:
        if n:
            TABLE[n] = rule
    for callback in ON_CHANGE:
        callback()


_NAMES: dict[Callable[..., Any], str] = {}

#: When a dict, counts the operations without a rule that tracked values went through (set it to
#: ``{}`` to see which operations a program sends to the conservative fallback).
UNKNOWN: dict[str, int] | None = None


def name_of(func: Callable[..., Any]) -> str:
    """``add`` for ``torch.add``; ``T`` for the ``Tensor.T`` getter."""
    name = _NAMES.get(func)
    if name is None:
        name = getattr(func, "__name__", "") or ""
        if name == "__get__":
            name = getattr(getattr(func, "__self__", None), "__name__", "") or ""
        _NAMES[func] = name
    return name


def rule_for(name: str) -> Rule | None:
    """The position rule of the operation called ``name`` (None: no rule, i.e. mixing)."""
    return TABLE.get(name)


def is_elementwise(name: str) -> bool:
    return TABLE.get(name) is elementwise


def record_unknown(func: Callable[..., Any]) -> None:
    if UNKNOWN is not None:
        n = name_of(func)
        UNKNOWN[n] = UNKNOWN.get(n, 0) + 1


def prefix(
    func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any] | None, t: Tensor, out: Tensor, pos: int
) -> int:
    """How many leading positions of ``out`` line up with those of the input ``t`` (argument
    ``pos`` of ``func``), before expansions are considered; 0 for an op without a rule."""
    name = name_of(func)
    rule = TABLE.get(name)
    if rule is None:
        record_unknown(func)
        return 0
    try:
        return rule(name, args, kwargs or {}, t, out, pos)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError):
        return 0


def foreign_from(p: int, t: Tensor, out: Tensor) -> int:
    """The first position ``≥`` the aligned prefix ``p`` where ``out`` has size > 1 (or ``p``
    itself when there is none: a dimension added later there is foreign too; INF when ``p`` is),
    where the aligned prefix also ends at the first size-1 dimension of ``t`` expanded in
    ``out``."""
    oshape = out.shape
    n = len(oshape)
    tshape = t.shape
    m = p if p < n else n
    if len(tshape) < m:
        m = len(tshape)
    for i in range(m):
        if tshape[i] == 1 and oshape[i] != 1:
            p = i
            break
    if p >= INF:
        return INF
    for i in range(p, n):
        if oshape[i] != 1:
            return i
    return p if p < n else n  # nothing foreign of size > 1 yet; kept for dimensions added later


def merge(into: dict[int, int], pos: int, mask: int) -> None:
    """Record that the nodes in ``mask`` are foreign from position ``pos`` (keeping the minimum)."""
    if mask:
        into[pos] = into.get(pos, 0) | mask


def normalize(fr: dict[int, int]) -> dict[int, int]:
    """Each node at its smallest foreign position only."""
    seen = 0
    out: dict[int, int] = {}
    for p in sorted(fr):
        m = fr[p] & ~seen
        if m:
            out[p] = m
            seen |= m
    return out


def shift(fr: dict[int, int], by: int) -> dict[int, int]:
    """Foreign positions moved ``by`` places to the right (leading dims added in front)."""
    return {p + by if p < INF else p: m for p, m in fr.items()}


def rule_prefix(
    func: Callable[..., Any],
    name: str,
    rule: Rule | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    a: torch.Tensor,
    o: torch.Tensor,
    pos: int,
) -> int:
    """How many leading positions of input ``a`` (argument ``pos``) line up with output ``o``
    under the op's rule (0 for an op without one, or where the rule cannot tell)."""
    if rule is None:
        if UNKNOWN is not None:
            record_unknown(func)
        return 0
    try:
        return rule(name, args, kwargs or {}, a, o, pos)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError):
        return 0
