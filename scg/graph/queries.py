"""The questions users ask of a recorded graph: a node by name, step or value, whether one node
influences another, which nodes a node was computed from, and how the surrogate credited a node
with a cost.

`GraphQueries` is mixed into the record (`scg.graph.graph.GraphRecord`), so they are methods of
[`scg.Graph`][scg.Graph] (``g.node(name)``, ``g.influences(v, c)``, ``g.parents(v)``,
``g.credit(v, c)``, ``g.stochastic_nodes``, ``g.cost_nodes``, ``g.credit_pairs``); they only read
the record (`Recorded`: its nodes, its influence closure and the credit its surrogate gave).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from scg.errors import SCGError
from scg.graph.masks import bits
from scg.graph.nodes import CostNode, Node, StochasticNode

__all__ = ["GraphQueries", "Recorded"]


class Recorded(Protocol):
    """What the questions read of the record (`scg.graph.graph.GraphRecord`, which imports this
    module): its nodes, the lookup of a (name, step), the influence closure and the credit."""

    nodes: list[Node]
    stochastic: list[StochasticNode]
    costs: list[CostNode]
    _keys: dict[tuple[str, int | None], Node]
    _credit: Callable[[], dict[tuple[int, int], bool]]
    built: bool

    def full_influence(self) -> list[int]: ...

    def node(self, ref: str | Node | torch.Tensor, step: int | None = None) -> Node: ...


class GraphQueries:
    """The questions of the module docstring, as methods of the record."""

    @property
    def stochastic_nodes(self: Recorded) -> list[StochasticNode]:
        """The stochastic nodes, in creation order."""
        return list(self.stochastic)

    @property
    def cost_nodes(self: Recorded) -> list[CostNode]:
        """The cost nodes, in creation order."""
        return list(self.costs)

    def node(self: Recorded, ref: str | Node | torch.Tensor, step: int | None = None) -> Node:
        """Look a node up by name (and step), by its value tensor, or pass a node through."""
        if isinstance(ref, Node):
            if ref.index < len(self.nodes) and self.nodes[ref.index] is ref:
                return ref
            raise SCGError(f"{ref.describe()} belongs to another graph")
        if isinstance(ref, torch.Tensor):
            for n in self.nodes:
                if n.value is ref:
                    return n
            raise SCGError("this tensor is not the value of a node of this graph")
        if (ref, step) in self._keys:
            return self._keys[(ref, step)]
        matches = [n for n in self.nodes if n.name == ref]
        if step is None and len(matches) == 1:
            return matches[0]
        known = ", ".join(sorted({repr(n.name) for n in self.nodes})) or "none"
        if matches:
            steps = ", ".join(repr(n.step) for n in matches)
            if step is None:
                raise SCGError(f"node {ref!r} exists at several steps ({steps}); pass step=")
            raise SCGError(f"node {ref!r} has no step {step!r}; its steps: {steps}")
        raise SCGError(
            f"no node named {ref!r}{'' if step is None else f' at step {step}'} in this graph (known nodes: {known})"
        )

    def influences(self: Recorded, v: str | Node | torch.Tensor, c: str | Node | torch.Tensor) -> bool:
        """Whether node ``v`` influences node ``c`` (there is a data-flow path from v to c)."""
        vn, cn = self.node(v), self.node(c)
        return bool(self.full_influence()[cn.index] >> vn.index & 1)

    def parents(self: Recorded, ref: str | Node | torch.Tensor) -> list[Node]:
        """The nodes that ``ref`` was directly computed from."""
        return [self.nodes[i] for i in bits(self.node(ref).parents)]

    def credit(self: Recorded, v: str | Node | torch.Tensor, c: str | Node | torch.Tensor) -> str:
        """How ``surrogate_loss`` credited node ``v`` with cost ``c``. Available after the
        surrogate is built. The values:

        * ``"per-element"``: a score-function node, each plate element credited with its own
          cost elements;
        * ``"whole-plate"``: a score-function node whose plate elements the cost mixes, or one
          declared with ``plates=0``, so each element is credited with the whole cost (see
          `scg.credit.plates`);
        * ``"pathwise"``: a reparameterized node (``Pathwise``): the cost's gradient reaches it
          through its value, with no score term;
        * ``"relaxed"``: a relaxed node (``GumbelSoftmax``): pathwise through a continuous
          relaxation of the discrete sample (biased);
        * ``"enumerated"``: an enumerated node (``Enumerate``): the cost is weighted by
          p(value) over the node's support;
        * ``"none"``: ``v`` does not influence ``c`` (or ``v`` is not a stochastic node).
        """
        vn, cn = self.node(v), self.node(c)
        if not self.built:
            raise SCGError("Graph.credit(): build the surrogate first (g.surrogate_loss())")
        if not isinstance(vn, StochasticNode) or not self.full_influence()[cn.index] >> vn.index & 1:
            return "none"
        got = self._credit().get((vn.index, cn.index))
        if got is not None:
            return "whole-plate" if got else "per-element"
        estimator = vn.estimator
        if estimator.enumerates:
            return "enumerated"
        return "relaxed" if estimator.relaxed else "pathwise"

    @property
    def credit_pairs(self: Recorded) -> dict[tuple[int, int], bool]:
        """(score node index, cost index) -> whether the surrogate credited the node whole-plate
        with the cost (per-element: False), for each pair it credited (a copy; see `credit`)."""
        return dict(self._credit())
