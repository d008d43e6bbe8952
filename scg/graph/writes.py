"""In-place writes: a tensor written in place carries the influence written into it, and so
does every alias of its storage.

The tracker (`scg.graph.tracking`) calls `record_write` for each tensor a torch call writes (the
first argument of an in-place ``*_`` method, each tensor of an ``out=`` argument or of a
``_foreach_*_`` list), `mark_running` for a normalization's running statistics (updated from
every row of a batch: a write that mixes the rows), and `assign_data` for ``t.data = v``. A
write is recorded on the target's storage (`storage_key`, a host-side pointer) so that another
tensor object over that storage, made before or after the write, reads it (``mask_of``); a write
through a view is placed in its base along the dimensions the two share (`shared_leading_dims`),
and anywhere else (a slice, a selection) it is out of line: the base then carries it from
position 0 (whole-plate credit, `scg.credit.plates`). A write into a node's own value is reported
to the graph (``on_event("write", ...)``), which refuses or warns.
"""

from __future__ import annotations

import sys
from typing import Protocol

import torch

from scg.graph import positions
from scg.graph.escapes import Handler
from scg.graph.ops import user_frame
from scg.graph.sample_positions import MIXED

__all__ = ["WriteTables", "assign_data", "mark_running", "record_write", "shared_leading_dims", "storage_key"]

Tensor = torch.Tensor


class WriteTables(Protocol):
    """What this module reads and sets of the tracker (`scg.graph.tracking.InfluenceTracker`,
    which imports this module): the attribute names of its marks and its storage tables."""

    attr: str
    fattr: str
    dattr: str
    battr: str
    sattr: str
    wattr: str
    storages: dict[int, tuple[int, Tensor]]
    mixed_storages: dict[int, tuple[int, int]]
    node_storages: dict[int, int]
    writes: int
    drawing: int
    sample_dims: bool
    on_event: Handler

    def mask_of(self, t: Tensor) -> int:
        """The tensor's mask, including what was written into its storage through an alias."""
        ...


def shared_leading_dims(view: Tensor, base: Tensor) -> int:
    """How many leading dimensions of ``view`` are the base's own (the same sizes and strides, and
    the view's start within one step of the last of them): element ``(i_0 .. i_k-1, ...)`` of the
    view is then in row ``(i_0 .. i_k-1)`` of the base. 0 when the view slices, selects, flattens or
    reorders its leading dimension (``o[0:1]``, ``o[0]``, ``o.unsqueeze(0)``), or where it cannot
    tell (a conservative answer: the write is then credited as mixing from there)."""
    n = min(view.dim(), base.dim())
    k = 0
    while k < n and view.shape[k] == base.shape[k] and view.stride(k) == base.stride(k):
        k += 1
    offset = view.storage_offset() - base.storage_offset()
    while k > 0 and not 0 <= offset < base.stride(k - 1):
        k -= 1
    return k


def storage_key(t: Tensor) -> int:
    """An identifier of ``t``'s storage (0 when it has none, or is empty)."""
    try:
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, TypeError):
        return 0


def assign_data(tracker: WriteTables, target: Tensor, value: object) -> None:
    """``target.data = value``: ``target`` now holds ``value``'s data (and storage), so it takes
    ``value``'s marks (influence, positions, breaks, sample dimensions, data-dependent shape)
    in place of its own; the influence of a value read through its storage included."""
    for name in (tracker.attr, tracker.fattr, tracker.dattr, tracker.battr, tracker.sattr):
        if hasattr(target, name):
            delattr(target, name)
    if not isinstance(value, Tensor):
        return
    for name in (tracker.fattr, tracker.dattr, tracker.battr, tracker.sattr):
        got = getattr(value, name, None)
        if got is not None:
            setattr(target, name, got)
    m = tracker.mask_of(value)
    if m:
        setattr(target, tracker.attr, m)
        extra = m & ~getattr(value, tracker.attr, 0)  # (known through its storage only: mixing)
        if extra:
            fr = dict(getattr(target, tracker.fattr, None) or {})
            positions.merge(fr, 0, extra)
            setattr(target, tracker.fattr, positions.normalize(fr))


def mark_running(tracker: WriteTables, buffer: Tensor, m: int) -> None:
    """A normalization's running statistics, updated from every row of a batch carrying ``m``:
    a write into ``buffer`` that mixes the rows (foreign from position 0)."""
    setattr(buffer, tracker.attr, getattr(buffer, tracker.attr, 0) | m)
    fr = dict(getattr(buffer, tracker.fattr, None) or {})
    fr[0] = fr.get(0, 0) | m
    setattr(buffer, tracker.fattr, fr)
    record_write(tracker, buffer, m, "running statistics")


def record_write(tracker: WriteTables, target: Tensor, m: int, name: str) -> None:
    """An in-place write: the storage, and every alias of it, now carries ``m``."""
    key = storage_key(target)
    if not key:
        return
    node = tracker.node_storages.get(key)
    if node is not None and not tracker.drawing:
        frame, _ = user_frame(sys._getframe(2))
        if frame is not None:
            tracker.on_event("write", name, node, frame)
    old = tracker.storages.get(key)
    tracker.storages[key] = ((old[0] if old else 0) | m, target)
    tracker.writes += 1
    tfr: dict[int, int] = getattr(target, tracker.fattr, None) or {}  # (the write's positions, in the target)
    base = target._base
    shared = 0 if base is None else shared_leading_dims(target, base)
    whole = base is None or shared == base.dim()  # (the target is, or lines up with, its whole base)
    placed = 0  # the nodes at out-of-line positions of the target
    for bits in tfr.values():
        placed |= bits
    out_of_line = placed & m if whole else m  # (through a view of part of it: other aliases cannot tell where)
    if out_of_line:
        before = tracker.mixed_storages.get(key)
        tracker.mixed_storages[key] = ((before[0] if before else 0) | out_of_line, tracker.writes)
        setattr(target, tracker.wattr, tracker.writes)  # (its marks, and its base's below, account for it)
        if base is not None:
            setattr(base, tracker.wattr, tracker.writes)
    if base is None:
        return
    # a write through a view: the base's positions, through the view's
    setattr(base, tracker.attr, getattr(base, tracker.attr, 0) | m)
    fr = dict(getattr(base, tracker.fattr, None) or {})
    for pos, bits in tfr.items():
        positions.merge(fr, min(pos, shared), bits & m)  # (the view's positions past the shared)
    if not whole:  # aligned in the view: along the dims it shares with the base only
        positions.merge(fr, shared, m & ~placed)
    if fr:
        setattr(base, tracker.fattr, positions.normalize(fr))
    tmap = getattr(target, tracker.sattr, None) if tracker.sample_dims else None
    if tmap:  # the written samples land in the base at the view's places: unless the view is
        # the whole base holding them where the base does, they meet others there (mixed)
        smap = dict(getattr(base, tracker.sattr, None) or {})
        for u, d in tmap.items():
            if not (whole and smap.get(u) == d):
                smap[u] = MIXED
        setattr(base, tracker.sattr, smap)
