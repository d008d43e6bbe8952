"""The marks of influence tracking: what the tracker records per tensor and per storage, and how
a tensor's are read back.

A tensor computed from a graph's stochastic nodes carries *marks*: attributes named for the graph
(`scg.graph.tracking.mask_attribute`) that hold its influence mask (``attr``), its foreign
positions (``fattr``, `scg.graph.positions`), the nodes its shape depends on (``dattr``), where
each of its sample dimensions is (``sattr``, `scg.graph.sample_positions`), its gradient breaks
(``battr``, `scg.graph.breaks`) and the number of the last write its marks account for
(``wattr``). What torch does without a torch call the tracker sees is recorded per *storage*: the
masks written into it through an alias (`scg.graph.writes`), the node values in it and the tracked
values made in it (`scg.graph.aliases`). `Marks` holds these tables and the graph-wide switches,
and reads a tensor's marks from both (`Marks.mask_of`, `Marks.foreign_of`); its subclass, the
tracker (`scg.graph.tracking.InfluenceTracker`), sets them for every torch call.
"""

from __future__ import annotations

import torch
from torch._C import _is_torch_function_mode_enabled as _modes_on

from scg.graph import positions
from scg.graph.aliases import Derived, adopt, geometry
from scg.graph.escapes import Handler
from scg.graph.writes import storage_key

__all__ = ["Marks"]

Tensor = torch.Tensor


class Marks:
    """The tables influence tracking keeps, and the reading of a tensor's marks (the base of
    `scg.graph.tracking.InfluenceTracker`, which sets them).

    Args:
        attr: attribute name under which masks are stored (unique per graph).
        on_event: called as ``on_event(kind, what, mask, frame)`` with ``kind`` one of
            ``"escape"``, ``"random"``, ``"write"`` (a write into a node's value; ``mask`` is then
            the node's index): the graph's `scg.graph.escapes.EscapeReports`. Held strongly, so it
            must not refer to the graph (the graph owns its tracker: a reference back would make
            every graph a reference cycle that only the cyclic garbage collector frees, keeping
            its nodes' tensors alive until it runs).
    """

    def __init__(self, attr: str, on_event: Handler):
        super().__init__()
        self.attr = attr
        self.fattr = attr + "_f"  # foreign positions: dict position -> mask
        self.dattr = attr + "_d"  # data-dependent shape: mask of the nodes it depends on
        #: storage key -> (mask written into it, a reference keeping the storage alive)
        self.storages: dict[int, tuple[int, Tensor]] = {}
        #: storage key -> (the nodes written into it at positions that do not line up, the write's
        #: number): an alias made before that write (its ``wattr`` older) still reads them as
        #: aligned, so they are foreign from 0 for it (``x.cumsum_(0)`` seen through ``v = x[:]``)
        self.mixed_storages: dict[int, tuple[int, int]] = {}
        self.writes = 0  # in-place writes so far (their numbers)
        self.wattr = attr + "_w"  # the number of the last write a tensor's marks account for
        #: storage key -> node index, for node values
        self.node_storages: dict[int, int] = {}
        #: storage key -> (mask, the first value, kept alive so that the storage's address is not
        #: reused), for tracked outputs that do not require grad and casts and copies of tracked
        #: values (``nn.Parameter(z * 2)``, ``nn.Parameter(h.float())`` alias one:
        #: scg.graph.aliases); filled from ``pending`` (the outputs in the order they were made)
        #: only when an alias is looked up or before an in-place operation: most graphs never
        #: look one up, and reading a storage's address costs more than the operation's record
        self.derived: dict[int, Derived] = {}
        self.pending: list[tuple[Tensor, int]] = []
        #: node index -> (shape, strides, offset) of its value (scg.graph.aliases)
        self.node_geometry: dict[int, tuple[tuple[int, ...], tuple[int, ...], int]] = {}
        self.drawing = 0  # > 0 while scg.sample draws (its own randomness is not hidden)
        #: the largest number of dimensions of a node's value: a foreign position at or beyond
        #: it (counted after a tensor's leading dimensions of size 1 or holding samples,
        #: `scg.graph.propagate._limit`) can never be compared with a node's dimensions (the bits
        #: of a mask are existing nodes), so it is dropped, which keeps most tensors free of
        #: foreign maps
        self.max_dim = 0
        self.any_dynamic = False
        #: the nodes whose influence reached a ``backward`` in the graph: a ``.grad`` read takes it
        self.grads = 0
        #: the nodes a data-dependent shape was built from (``nonzero``, boolean indexing, ...;
        #: for an index, the mask's nodes, not the indexed tensor's): ``any_dynamic``'s sources
        self.dynamic = 0
        self.sattr = attr + "_s"  # sample dimensions: node -> dim (scg.graph.sample_positions)
        self.sample_dims = False  # True once a node has a sample dimension
        #: gradient breaks (``docs/tracking.md``): the nodes whose value requires grad (pathwise
        #: samples), and per tensor, under ``battr``, the mask of those whose influence reached it
        #: through an operation autograd does not differentiate (a comparison, ``round``, an
        #: integer cast, ``detach``, ``torch.no_grad``)
        self.grad_nodes = 0
        self.battr = attr + "_b"
        self.breaks = False  # True once a tensor carries a break
        self.on_event = on_event

    def mask_of(self, t: Tensor) -> int:
        """The tensor's mask, including what was written into its storage through an alias."""
        m: int = getattr(t, self.attr, 0)
        if self.storages:
            got = self.storages.get(storage_key(t))
            if got is not None:
                m |= got[0]
        if not m and self.node_storages:
            if _modes_on():  # scg's own call in the open graph: adopt's reads bypass the modes
                with torch._C.DisableTorchFunction():
                    return adopt(self, t)  # nn.Parameter(z), z.as_subclass(C): no torch call was seen
            m = adopt(self, t)
        return m

    def foreign_of(self, t: Tensor) -> dict[int, int]:
        """The tensor's foreign positions (bits only known through its storage, or written into it
        out of line after this alias was made: from 0)."""
        fr: dict[int, int] = dict(getattr(t, self.fattr, None) or {})
        if self.storages:
            key = storage_key(t)
            got = self.storages.get(key)
            if got is not None:
                extra = got[0] & ~getattr(t, self.attr, 0) | self.stale_mixed(t, key)
                if extra:
                    positions.merge(fr, 0, extra)
        return fr

    def stale_mixed(self, t: Tensor, key: int | None = None) -> int:
        """The nodes written out of line into ``t``'s storage (``key``, when known) by a write
        ``t``'s marks predate."""
        if not self.mixed_storages:
            return 0
        got = self.mixed_storages.get(storage_key(t) if key is None else key)
        return 0 if got is None or getattr(t, self.wattr, 0) == got[1] else got[0]

    def broken(self, t: Tensor) -> int:
        """The mask of the pathwise nodes whose influence reached ``t`` through at least one
        operation that autograd does not differentiate (a *gradient break*)."""
        return int(getattr(t, self.battr, 0))

    def register_node_value(self, value: Tensor, index: int) -> None:
        with torch._C.DisableTorchFunction():  # (metadata reads: not through this tracker)
            if value.requires_grad:
                self.grad_nodes |= 1 << index
            elif self.breaks and self.broken(value):
                setattr(value, self.battr, 0)  # a score-function draw: its score term carries it
            key = storage_key(value)
            if key:
                self.node_storages[key] = index
                self.node_geometry[index] = geometry(value)

    def _drawn(self) -> int:
        """The mask of every node value recorded so far."""
        drawn = 0
        for index in self.node_storages.values():
            drawn |= 1 << index
        return drawn

    def derived_at(self, key: int) -> Derived | None:
        """The tracked values recorded in the storage ``key`` (see ``derived``)."""
        if self.pending:
            self._record_derived()
        return self.derived.get(key)

    def _record_derived(self) -> None:
        """Move ``pending`` into ``derived`` (before an alias is looked up, and before an in-place
        operation could move a pending value to another storage)."""
        derived = self.derived
        with torch._C.DisableTorchFunction():  # (scg's own reads: not through the tracker)
            for out, m in self.pending:
                key = storage_key(out)
                if key:
                    got = derived.get(key)
                    if got is None:  # (the first value of a storage is its whole, most often)
                        derived[key] = Derived(m, out, True)
                    elif m & ~got.mask:
                        derived[key] = Derived(got.mask | m, got.value, False)
        self.pending.clear()
