"""Marking an operation's outputs: what each output of a tracked torch call takes from its inputs.

The tracker (`scg.graph.tracking`) sees a torch call, runs it and collects its tracked inputs as
``(argument position, tensor, mask)``; `propagate` then gives an output:

* the union of the inputs' influence masks (under the graph's ``attr``);
* its *foreign positions* (under ``fattr``): per input, the first leading position that no longer
  lines up with the input's (`scg.graph.positions`, by the op's position rule), merged with the
  positions the input already carried; positions at or beyond the deepest node value (counted
  after the output's leading dimensions of size 1 or holding samples: `_limit`) are dropped
  (they can never be compared with a node's dimensions), and nodes known only through a write
  into an input's storage (``aliased``) are foreign from position 0;
* the sample-dimension map of its inputs, moved by the op, once the graph has sample dimensions
  (`scg.graph.sample_positions`);
* the mask of the nodes its *shape* depends on (under ``dattr``), for an op whose output shape
  depends on sampled values (``nonzero``, boolean indexing) and whatever is computed from it
  (`mark_dynamic`).

``broadcast_tensors``, ``atleast_*d`` and ``meshgrid`` compute output k from argument k alone:
`paired_inputs` says which inputs each output takes.

The elementwise common case (same shapes, at most one foreign map) is handled inline by the
tracker and never reaches this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch

from scg.graph import positions
from scg.graph.ops import (
    F_DYNAMIC,
    F_ELEMENTWISE,
    F_GETITEM,
    F_SIZES,
    SIZE_ARGUMENTS,
    flat_tensors,
    shape_index_tensors,
)
from scg.graph.positions import INF
from scg.graph.sample_positions import MIXED, follow, held_dims
from scg.graph.sample_shifts import samples_combined, samples_inserted

__all__ = ["OutputMarks", "Tracked", "mark_dynamic", "mark_opaque", "nested_involved", "paired_inputs", "propagate"]

Tensor = torch.Tensor

#: the tracked inputs of a call: (argument position, -1 for a keyword; the tensor; its mask)
Tracked = list[tuple[int, Tensor, int]]


class OutputMarks(Protocol):
    """What this module reads and sets of the tracker (`scg.graph.tracking.InfluenceTracker`,
    which imports this module): the attribute names of its marks and the graph-wide switches."""

    attr: str
    fattr: str
    dattr: str
    sattr: str
    storages: dict[int, tuple[int, Tensor]]
    mixed_storages: dict[int, tuple[int, int]]
    wattr: str
    max_dim: int
    any_dynamic: bool
    dynamic: int
    sample_dims: bool

    def mask_of(self, t: Tensor) -> int:
        """The tensor's mask, including what was written into its storage through an alias."""
        ...

    def stale_mixed(self, t: Tensor, key: int | None = None) -> int:
        """The nodes written out of line into ``t``'s storage by a write ``t``'s marks predate."""
        ...


#: the ops whose output's shape may depend on sampled values (`mark_dynamic`), one module constant
_SHAPE_MARKS = F_DYNAMIC | F_GETITEM | F_SIZES


def propagate(
    tracker: OutputMarks,
    func: Callable[..., Any],
    name: str,
    rule: positions.Rule | None,
    flags: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    o: Tensor,
    m: int,
    tracked: Tracked,
    aliased: bool,
) -> None:
    """Mark output ``o`` with ``m`` and its foreign positions (``aliased``: an input may carry
    nodes known only through its storage, which are foreign from position 0)."""
    if tracker.sample_dims:
        follow(tracker.sattr, func, name, rule, args, kwargs, o, tracked)
    if tracker.mixed_storages:  # (a view made now accounts for the writes its input accounts for)
        written = max((getattr(a, tracker.wattr, 0) for _, a, _ in tracked), default=0)
        if written and o is not (args[0] if args else None):
            setattr(o, tracker.wattr, written)
    attr, fattr = tracker.attr, tracker.fattr
    setattr(o, attr, getattr(o, attr, 0) | m)
    fr: dict[int, int] | None = None
    if args and o is args[0]:
        old = getattr(o, fattr, None)
        fr = dict(old) if old else None
    limit = tracker.max_dim  # (past it, `_limit`: positions beyond the dims where samples may go)
    extended = False
    elementwise = flags & F_ELEMENTWISE
    if fr is None and len(tracked) == 1 and not aliased:
        # one tracked input (the common case): its foreign position once, its map carried
        pos, a, am = tracked[0]
        afr = getattr(a, fattr, None)
        dropped: tuple[int, ...] = ()
        added: tuple[int, ...] = ()
        if elementwise and a.shape == o.shape and not tracker.sample_dims:
            f = INF
        else:
            f, dropped, added = _foreign(tracker, func, name, rule, args, kwargs, a, o, pos)
            if limit <= f < INF:
                limit = _limit(tracker, o)
        if f >= limit and not ((dropped or added) and afr):  # positions kept: the input's map is the output's (shared)
            if afr is not None or getattr(o, fattr, None) is not None:
                setattr(o, fattr, afr)
        else:
            fr = {f: am} if f < limit else {}
            if afr:
                for q, qm in afr.items():
                    q = moved_dim(q, dropped, added)
                    q = q if q < f else f
                    fr[q] = fr.get(q, 0) | qm
                if len(fr) > 1:
                    fr = positions.normalize(fr)
            setattr(o, fattr, fr or None)
        if flags & _SHAPE_MARKS or tracker.any_dynamic:
            mark_dynamic(tracker, name, flags, args, o, m, tracked)
        return
    oshape = o.shape
    for pos, a, am in tracked:
        afr = getattr(a, fattr, None)
        dropped = ()
        added = ()
        if elementwise and a.shape == oshape and not tracker.sample_dims:
            f = INF  # same shape, positions kept: nothing new (with sample dimensions: `samples_inserted`)
        else:
            f, dropped, added = _foreign(tracker, func, name, rule, args, kwargs, a, o, pos)
            if limit <= f < INF and not extended:
                limit, extended = _limit(tracker, o), True
            if f >= limit:
                f = INF
        if f < INF:
            if fr is None:
                fr = {}
            fr[f] = fr.get(f, 0) | am
        if aliased:  # (whatever the rule: the layout of what an alias wrote is not known)
            # known only through an alias of its storage, or written there out of line since
            extra = am & ~getattr(a, attr, 0) | tracker.stale_mixed(a)
            if extra:
                if fr is None:
                    fr = {}
                q = positions.foreign_from(0, a, o)
                fr[q] = fr.get(q, 0) | extra
        if afr:
            if fr is None:
                fr = {}
            for q, qm in afr.items():
                q = moved_dim(q, dropped, added)
                q = q if q < f else f
                fr[q] = fr.get(q, 0) | qm
    if fr:
        if not extended and max(fr) >= limit:
            limit = _limit(tracker, o)
        fr = {q: qm for q, qm in positions.normalize(fr).items() if q < limit}
    if fr or getattr(o, fattr, None) is not None:
        setattr(o, fattr, fr or None)
    if flags & _SHAPE_MARKS or tracker.any_dynamic:
        mark_dynamic(tracker, name, flags, args, o, m, tracked)


def _foreign(
    tracker: OutputMarks,
    func: Callable[..., Any],
    name: str,
    rule: positions.Rule | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    a: Tensor,
    o: Tensor,
    pos: int,
) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """The first position of ``o`` that no longer lines up with input ``a``'s (by the op's position
    rule); the dimensions of ``a`` the output dropped without mixing its examples: a reduction
    over sample dimensions (`samples_combined`, which ``a``'s foreign positions move past); and
    where the output put ``a``'s dimensions when it inserted new ones among them where sample
    dimensions go (`samples_inserted`, which ``a``'s foreign positions move with)."""
    if tracker.sample_dims:
        dropped = samples_combined(tracker.sattr, name, rule, args, kwargs, a, o, pos)
        if dropped is not None:
            return INF, dropped, ()
        inserted = samples_inserted(tracker.sattr, name, rule, args, kwargs, a, o, pos)
        if inserted is not None:
            where, f = inserted
            return f, (), where
    return positions.foreign_from(positions.rule_prefix(func, name, rule, args, kwargs, a, o, pos), a, o), (), ()


def _limit(tracker: OutputMarks, o: Tensor) -> int:
    """The first position of ``o`` that can never be compared with a node's dimensions: past the
    deepest node value, counted after ``o``'s leading dimensions of size 1 or holding a sample
    dimension. Nodes drawn later with ``n=k`` fill such dimensions, or put new ones in front
    (`samples_inserted`, which moves the positions with them), so a position is measured from
    there: ``b[None, None].flip(-1)``'s flip at position 2 is ``b``'s own position 0."""
    held = held_dims(o, tracker.sattr) if tracker.sample_dims else ()
    shape = o.shape
    lead = 0
    while lead < len(shape) and (shape[lead] == 1 or lead in held):
        lead += 1
    return tracker.max_dim + lead


def moved_dim(q: int, dropped: tuple[int, ...], where: tuple[int, ...]) -> int:
    """Foreign position ``q`` of an input in the output that dropped its dimensions ``dropped``, or
    put its dimension ``d`` at ``where[d]`` (a position past the input's dimensions moves past all
    of them)."""
    if q >= INF:
        return q
    if dropped:
        return q - sum(1 for d in dropped if d < q)
    if where:  # (the first output position holding any of the input's dimensions from q on)
        return min(where[q:]) if q < len(where) else max(where) + 1 + q - len(where)
    return q


def mark_dynamic(
    tracker: OutputMarks, name: str, flags: int, args: tuple[Any, ...], o: Tensor, m: int, tracked: Tracked
) -> None:
    """Mark outputs whose shape depends on sampled values (and what is computed from them), and
    record the nodes the shape is built from (``tracker.dynamic``: a boolean index's, not the
    indexed tensor's)."""
    sizes = _size_mask(name, tracked) if flags & F_SIZES else 0
    deciders = shape_index_tensors(args) if flags & F_GETITEM else ()
    if flags & F_DYNAMIC or deciders or sizes:
        tracker.any_dynamic = True
        setattr(o, tracker.dattr, m)
        if flags & F_DYNAMIC:
            tracker.dynamic |= m
        else:  # (the sizes' nodes, or the index's, not the indexed tensor's)
            for t in deciders:
                sizes |= tracker.mask_of(t)
            tracker.dynamic |= sizes
    elif tracker.any_dynamic:
        dm = 0
        for _, a, _ in tracked:
            dm |= getattr(a, tracker.dattr, 0)
        if dm:
            setattr(o, tracker.dattr, dm)


def _size_mask(name: str, tracked: Tracked) -> int:
    """The nodes of the integer scalars given where the op takes sizes, bounds or counts
    (`SIZE_ARGUMENTS`: ``torch.ones(n)``, ``x.narrow(0, 0, n)``; not a fill value, a start or
    the method's own tensor: ``z.view(1)`` has a fixed shape)."""
    where = SIZE_ARGUMENTS[name]
    m = 0
    for pos, a, am in tracked:
        if (pos >= where if isinstance(where, int) else pos in where) and (
            a.numel() == 1 and not (a.is_floating_point() or a.is_complex())
        ):
            m |= am
    return m


def paired_inputs(tracker: OutputMarks, args: tuple[Any, ...], out: Any) -> list[tuple[Tensor, int, Tracked]]:
    """``broadcast_tensors(a, b)``, ``atleast_1d(a, b)``, ``meshgrid(a, b)``: the outputs to mark,
    each with the mask and the tracked inputs it takes. Output k is computed from tensor argument
    k alone (with equal shapes ``broadcast_tensors`` returns the arguments themselves, which must
    not take each other's influence, and an input returned as it is keeps its own marks)."""
    inputs = [a for arg in args for a in (arg if isinstance(arg, (list, tuple)) else (arg,)) if isinstance(a, Tensor)]
    outputs = flat_tensors(out)
    if len(inputs) != len(outputs):  # (not one output per argument: every output takes every input)
        m = 0
        tracked: Tracked = []
        for k, a in enumerate(inputs):
            am = tracker.mask_of(a)
            if am:
                m |= am
                tracked.append((k, a, am))
        return [(o, m, tracked) for o in outputs]
    marks = []
    for k, (a, o) in enumerate(zip(inputs, outputs)):
        if o is not a:
            am = tracker.mask_of(a)
            if am:
                marks.append((o, am, [(k, a, am)]))
    return marks


def nested_involved(out: Any, tracked: Tracked) -> bool:
    """Whether an output or a tracked input of a call is a nested tensor (``torch.nested``): a
    strided one has no sizes, so the position rules cannot read it (torch raises)."""
    return any(o.is_nested for o in flat_tensors(out)) or any(a.is_nested for _, a, _ in tracked)


def mark_opaque(tracker: OutputMarks, out: Any, m: int, tracked: Tracked) -> None:
    """Mark the outputs of a call that involves a nested tensor conservatively: ``m``, foreign
    from position 0 (its rows hold sequences of different examples, in an order the rules cannot
    read: whole-plate credit), the data-dependent shapes its inputs carry, and every sample
    dimension its inputs hold `MIXED` (a cost keeping one is refused)."""
    attr, fattr, dattr, sattr = tracker.attr, tracker.fattr, tracker.dattr, tracker.sattr
    dm = 0
    smap: dict[int, int] = {}
    for _, a, _ in tracked:
        dm |= getattr(a, dattr, 0)
        for u in getattr(a, sattr, None) or {}:
            smap[u] = MIXED
    for o in flat_tensors(out):
        setattr(o, attr, getattr(o, attr, 0) | m)
        fr = dict(getattr(o, fattr, None) or {})
        fr[0] = fr.get(0, 0) | m
        setattr(o, fattr, positions.normalize(fr))
        if dm:
            setattr(o, dattr, getattr(o, dattr, 0) | dm)
        if smap and tracker.sample_dims:
            setattr(o, sattr, dict(smap))
