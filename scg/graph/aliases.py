"""Aliases torch makes without a torch call: ``nn.Parameter(z)``, ``z.as_subclass(C)``,
``torch.Tensor._make_subclass(C, z)``.

These create a new tensor object that shares ``z``'s storage, but no torch function mode sees
the call, so the new object carries no influence mask (`scg.graph.tracking`) and a cost
computed from it would silently lose its dependence on the node. Every such object is of a
tensor *subclass* (``Parameter``, ``C``), which gives a cheap test: when the tracker meets an
input of a subclass type with no mask while the graph has nodes, it looks its storage up among
the node values' storages (a host-side pointer, ``untyped_storage().data_ptr()``: no device
synchronisation). On a hit the object *adopts* the node's influence:

* with the node value's exact geometry (shape, strides, offset) its positions line up with the
  node's, so per-example credit is kept (`scg.graph.positions`);
* otherwise (a view of part of the value, ``nn.Parameter(z[0])``) conservatively the whole
  storage: the node is foreign from position 0 (whole-plate credit, `scg.credit.plates`).

Storages written through an alias (``storages`` of the tracker) are already looked up for every
input. An alias of a *cast or copy* of tracked values (``nn.Parameter(z.float())``,
``z.float().as_subclass(C)``, ``nn.Parameter(h.clone())``) is found through the storages the
tracker records for those operations' outputs (``copies``), and adopted with whole-plate credit.
What is not covered: an alias of another derived value (``nn.Parameter(z * 2)``; recording
every tracked output's storage would cost every torch call), and ``as_subclass(torch.Tensor)``
(a plain tensor: inputs of the plain type are not looked up), see ``docs/tracking.md``.

The cost, paid only for inputs of a subclass type without a mask (model weights are
``Parameter``\\ s): one storage-pointer read and a dictionary lookup per such input.
"""

from __future__ import annotations

from typing import Protocol

import torch

__all__ = ["AliasTables", "adopt", "geometry"]

Geometry = tuple[tuple[int, ...], tuple[int, ...], int]


class AliasTables(Protocol):
    """What `adopt` reads of the tracker (`scg.graph.tracking.InfluenceTracker`, which imports
    this module): the attribute names of its marks and its tables of node storages."""

    attr: str
    fattr: str
    node_storages: dict[int, int]
    node_geometry: dict[int, Geometry]
    copies: dict[int, int]


def geometry(t: torch.Tensor) -> Geometry:
    """(shape, strides, storage offset) of ``t``, read without torch function handling."""
    with torch._C.DisableTorchFunction():
        return tuple(t.shape), tuple(t.stride()), int(t.storage_offset())


def adopt(tracker: AliasTables, t: torch.Tensor) -> int:
    """The mask ``t`` (a subclass instance with no mask) inherits from the node value whose
    storage it shares (0 when none); stored on ``t`` with its positions."""
    try:
        idx = tracker.node_storages.get(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, TypeError):
        return 0
    if idx is None:
        return _adopt_copy(tracker, t)
    m = 1 << idx
    setattr(t, tracker.attr, m)
    if geometry(t) != tracker.node_geometry.get(idx):
        setattr(t, tracker.fattr, {0: m})  # a part of the value: whole-plate
    return m


def _adopt_copy(tracker: AliasTables, t: torch.Tensor) -> int:
    """``nn.Parameter(z.float())``: the storage of a cast or copy of tracked values (recorded
    by the tracker); adopted whole, from position 0 (whole-plate credit: the copy's positions
    are not recorded)."""
    if not tracker.copies:
        return 0
    try:
        m = tracker.copies.get(t.untyped_storage().data_ptr(), 0)
    except (RuntimeError, NotImplementedError, TypeError):
        return 0
    if m:
        setattr(t, tracker.attr, m)
        setattr(t, tracker.fattr, {0: m})
    return m
