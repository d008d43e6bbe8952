"""Aliases torch makes without a torch call: ``nn.Parameter(z)``, ``z.as_subclass(C)``,
``torch.Tensor._make_subclass(C, z)``, of a node's value or of a value computed from it.

These create a new tensor object that shares ``z``'s storage, but no torch function mode sees
the call, so the new object carries no influence mask (`scg.graph.tracking`) and a cost
computed from it would silently lose its dependence on the node. When the tracker meets an input
with no mask while the graph has nodes, it asks `adopt`:

* a *view* (``as_subclass`` returns one, of any class, ``torch.Tensor`` included): its base
  tensor is the value it aliases (torch keeps the base's Python object, so its mask with it);
  a node's value is marked on its base too (`scg.graph.sampling`);
* another tensor of a *subclass* type (``nn.Parameter(...)``, ``_make_subclass``): its storage
  (a host-side pointer, ``untyped_storage().data_ptr()``: no device synchronisation) is looked
  up among the node values' storages, then among the storages of the tracked values that do not
  require grad and of casts and copies (``derived`` of the tracker, which keeps those storages
  alive for the graph's lifetime, so that a freed storage's address reused by an unrelated
  tensor is never mistaken for one: ``nn.Parameter(z * 2)``).

On a hit the object *adopts* the influence: with the source's exact geometry (shape, strides,
offset) its positions line up with the source's, so per-example credit is kept
(`scg.graph.positions`); otherwise (``nn.Parameter(z[0])``, an alias of a computed value found
through its storage) conservatively the whole storage: the nodes are foreign from position 0
(whole-plate credit, `scg.credit.plates`).

Not covered: a subclass alias of a value that requires grad and is neither a node's value nor a
cast or copy (``nn.Parameter(h)`` with ``h`` computed from a pathwise sample: it also cuts the
pathwise gradient; the autograd check of ``scg.cost`` reports a cost computed only from it).

The cost, paid only for inputs without a mask while the graph has nodes: one ``_base`` read,
and for subclass inputs (model weights are ``Parameter``\\ s) one storage-pointer read and two
dictionary lookups.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import torch

__all__ = ["AliasTables", "Derived", "adopt", "geometry"]

Geometry = tuple[tuple[int, ...], tuple[int, ...], int]


class Derived(NamedTuple):
    """A storage of tracked values: their ``mask``, and the first ``value`` seen in it (kept
    alive, so that the storage's address is not reused); ``exact`` while no value of another
    mask was seen in it (an alias with the value's geometry then takes its positions)."""

    mask: int
    value: torch.Tensor
    exact: bool


class AliasTables(Protocol):
    """What `adopt` reads of the tracker (`scg.graph.tracking.InfluenceTracker`, which imports
    this module): the attribute names of its marks and its tables of node storages."""

    attr: str
    fattr: str
    node_storages: dict[int, int]
    node_geometry: dict[int, Geometry]

    def derived_at(self, key: int) -> Derived | None:
        """The tracked values recorded in the storage ``key`` (None if none)."""
        ...


def geometry(t: torch.Tensor) -> Geometry:
    """(shape, strides, storage offset) of ``t``, read without torch function handling."""
    with torch._C.DisableTorchFunction():
        return tuple(t.shape), tuple(t.stride()), int(t.storage_offset())


def adopt(tracker: AliasTables, t: torch.Tensor) -> int:
    """The mask ``t`` (an input with no mask) inherits from the value it aliases (0 when none);
    stored on ``t`` with its positions."""
    base = t._base
    if base is not None:
        m: int = getattr(base, tracker.attr, 0)
        if m:
            setattr(t, tracker.attr, m)
            same = geometry(t) == geometry(base)
            setattr(t, tracker.fattr, getattr(base, tracker.fattr, None) if same else {0: m})
            return m
    if type(t) is torch.Tensor:
        return 0
    try:
        key = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError, TypeError):
        return 0
    idx = tracker.node_storages.get(key)
    if idx is not None:
        m = 1 << idx
        setattr(t, tracker.attr, m)
        if geometry(t) != tracker.node_geometry.get(idx):
            setattr(t, tracker.fattr, {0: m})  # a part of the value: whole-plate
        return m
    got = tracker.derived_at(key)
    if got is None:
        return 0
    m = got.mask
    setattr(t, tracker.attr, m)
    same = got.exact and geometry(t) == geometry(got.value)
    # (the value's positions as they are now, for its layout now; else a part of it: whole-plate)
    setattr(t, tracker.fattr, getattr(got.value, tracker.fattr, None) if same else {0: m})
    return m
