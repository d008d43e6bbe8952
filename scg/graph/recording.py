"""Naming and recording the nodes of a graph: the checked name of the next node, the record with
the fields every node has (`NodeRecording.new_node`, for ``scg.sample`` and ``scg.cost``, which
fill in the fields of their kind), its entry in the graph's lists and signature (`record`), and
the marker of a draw of a nested graph (`foreign_sample`). A base of
`scg.graph.graph.GraphRecord`, as `scg.graph.queries.GraphQueries` is: its methods read the
record through `Recording`, the attributes GraphRecord sets."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

import torch

from scg.errors import SCGError
from scg.graph.nodes import CostNode, DeterministicNode, Location, Node, StochasticNode, value_version
from scg.graph.structure import node_key
from scg.graph.tracking import InfluenceTracker

__all__ = ["FN", "NodeRecording", "Recording"]

#: a node kind -> the scg function that makes it (for messages and default names)
FN = {"stochastic": "sample", "cost": "cost", "deterministic": "deterministic"}

_Record = TypeVar("_Record", StochasticNode, CostNode)

#: torch functions and modes off: for scg's own reads of metadata in a tracked graph
_UNTRACKED = torch._C.DisableTorchFunction


class Recording(Protocol):
    """What the recording reads and writes of the record (`scg.graph.graph.GraphRecord`, which
    imports this module)."""

    id: int
    nodes: list[Node]
    stochastic: list[StochasticNode]
    costs: list[CostNode]
    tracked: bool
    built: bool
    has_baselines: bool
    has_cost_baselines: bool
    grad_fns: dict[Any, int]
    nested: dict[int, str]
    _state: str
    _keys: dict[tuple[str, int | None], Node]
    _n_deterministic: int
    _node_keys: list[Any]
    _full: list[int] | None

    @property
    def tracker(self) -> InfluenceTracker: ...

    def mask(self, value: object) -> int: ...

    def _name(self, name: str | None, kind: str, step: int | None, location: Location | str) -> str: ...

    def next_name(self, kind: str) -> str: ...

    def node_name(self, name: str | None, kind: str, step: int | None, location: Location | str) -> str: ...

    def _count(self, kind: str) -> int: ...


class NodeRecording:
    """The methods of the module docstring, as methods of the record."""

    _full: list[int] | None  # (written here, through `Recording`: typed once for both)

    def _name(self: Recording, name: str | None, kind: str, step: int | None, location: Location | str) -> str:
        """The checked name of the next node of ``kind`` (a default one for ``None``): the graph
        must be open and its surrogate not built, the step an int or None, and (name, step)
        unused."""
        if self.built:
            raise SCGError(
                f"scg.{FN[kind]}(name={name!r}) at {location}: surrogate_loss() was "
                "already built from this graph, so it would silently omit this node; "
                "add every node before building the surrogate"
            )
        if self._state != "open":
            raise SCGError(f"scg.{FN[kind]}(name={name!r}) at {location}: the graph is not open")
        if name is None:
            name = self.next_name(kind)
            count = self._count(kind)
            while (name, step) in self._keys:  # (a node named like a default one: the next free default)
                count += 1
                name = f"{FN[kind]}_{count}"
        elif not isinstance(name, str) or not name:
            raise SCGError(f"scg.{FN[kind]}(name=...) at {location}: name must be a non-empty string, got {name!r}")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
            raise SCGError(f"scg.{FN[kind]}(name={name!r}, step=...) at {location}: step must be an int, got {step!r}")
        other = self._keys.get((name, step))
        if other is not None:
            raise SCGError(
                f"duplicate node name {name!r}{'' if step is None else f' at step {step}'} at "
                f"{location}: {other.describe()} has it; names (with their step) must be unique"
            )
        return name

    def next_name(self: Recording, kind: str) -> str:
        """The default name the next node of ``kind`` gets (``"sample_3"``)."""
        return f"{FN[kind]}_{self._count(kind)}"

    def _count(self: Recording, kind: str) -> int:
        """How many nodes of ``kind`` were recorded (a nested graph's markers are not counted)."""
        if kind == "stochastic":
            return len(self.stochastic)
        return len(self.costs) if kind == "cost" else self._n_deterministic

    def node_name(self: Recording, name: str | None, kind: str, step: int | None, location: Location | str) -> str:
        """The name of the next node of ``kind`` (``"stochastic"``, ``"cost"``,
        ``"deterministic"``): ``name`` itself in the common case; otherwise checked (the graph
        open, its surrogate not built, ``(name, step)`` unused: raises naming the call) and a
        default one for None. The node is then made with it and `record` ed."""
        if (
            self.built
            or self._state != "open"
            or type(name) is not str
            or not name
            or not (step is None or type(step) is int)
            or (name, step) in self._keys
        ):  # (the checks, which raise or give the default name, only off the common case)
            return self._name(name, kind, step, location)
        return name

    def new_node(
        self: Recording,
        cls: type[_Record],
        name: str | None,
        kind: str,
        step: int | None,
        location: Location | str,
        value: torch.Tensor,
        parents: int,
        foreign: dict[int, int],
    ) -> _Record:
        """The graph's next record of ``kind`` (``"stochastic"`` or ``"cost"``) with the fields
        every node has: its name (`node_name`) and its value's version counter; the caller stores
        the fields of its kind, then `record` s it.

        Made field by field: a class called with keywords packs them into a dictionary and unpacks
        it again, about five times the work of the stores (13k instructions for a `StochasticNode`);
        a test checks that every field of both records is set."""
        name = self.node_name(name, kind, step, location)
        # spelled out: dynamo traces ``object.__new__(cls)`` as making a user object, but refuses
        # the builtin called through an alias (torch 2.11: "Attempted to call function marked as skipped")
        node = object.__new__(cls)
        node.index = len(self.nodes)
        node.name = name
        node.value = value
        node.parents = parents
        node.step = step
        node.location = location
        node.foreign = foreign
        gid = node.graph = self.id
        if gid < 0:  # (no version counters while dynamo traces)
            node.version = None
        elif self.tracked:  # (a property read: through the tracker's mode unless disabled)
            with _UNTRACKED():
                node.version = value_version(value)
        else:
            try:  # (`value_version` inline: a call per node)
                node.version = value._version
            except RuntimeError:
                node.version = None
        return node

    def record(self: Recording, node: Node) -> Node:
        """Add ``node`` to the graph's lists and record its signature entry (``signature``): the
        node was made (by ``scg.sample``, ``scg.cost``, ``scg.deterministic``) with every field
        given, ``index=len(graph.nodes)``, ``graph=graph.id`` and its name from `node_name`."""
        index = node.index
        self.nodes.append(node)
        self._keys[(node.name, node.step)] = node
        self._full = None
        cost = False
        if isinstance(node, StochasticNode):
            self.stochastic.append(node)
            if node.baseline is not None:
                self.has_baselines = True
        elif isinstance(node, CostNode):
            self.costs.append(node)
            cost = True
            if node.baseline is not None:
                self.has_baselines = self.has_cost_baselines = True
        else:
            self._n_deterministic += 1
        keys = self._node_keys
        if not self.tracked:
            if len(keys) == index:
                keys.append(node_key(node))
            return node
        value = node.value
        tracker = self.tracker
        with _UNTRACKED():  # scg's own metadata reads: not through the tracker (each costs a dispatch)
            tracker.max_dim = max(tracker.max_dim, value.dim())
            grad_fn = None if cost else value.grad_fn
            if len(keys) == index:
                keys.append(node_key(node))
        if grad_fn is not None:
            self.grad_fns[grad_fn] = index
        return node

    def foreign_sample(self: Recording, value: torch.Tensor, node: StochasticNode) -> None:
        """``node`` was drawn in a graph nested in this one: mark its value, so that a cost of
        this graph computed from it is refused (this graph cannot score the draw)."""
        key = (f"<nested {node.name}>", len(self.nodes))
        marker = DeterministicNode(
            index=len(self.nodes), name=key[0], value=value, parents=self.mask(value), step=None, location=node.location
        )
        self.nodes.append(marker)
        self._keys[key] = marker
        self._full = None
        self.nested[marker.index] = node.describe()
        setattr(value, self.tracker.attr, 1 << marker.index)
