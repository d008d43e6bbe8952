"""Graph inspection: the recorded SCG as a ``networkx.DiGraph``.

Nodes carry a ``kind``: ``"parameter"`` (a leaf tensor that requires grad, found through autograd),
``"deterministic"`` (named with ``scg.deterministic``),
``"stochastic"`` or ``"cost"``. Edges are *direct* influence: u → w when w was computed from u
without passing through another recorded node.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import torch

from scg.errors import SCGError
from scg.graph.graph import GraphRecord
from scg.graph.masks import bits
from scg.graph.nodes import StochasticNode

__all__ = ["parameter_leaves", "to_networkx"]


def parameter_leaves(
    tensors: list[torch.Tensor], *, stop: set[int] | None = None, limit: int = 100_000
) -> list[torch.Tensor]:
    """Leaf tensors requiring grad that ``tensors`` were computed from (through autograd).

    The walk does not go past autograd nodes whose ``id`` is in ``stop`` (the values of other
    recorded nodes), so that only direct dependencies are returned.
    """
    seen: set[int] = set(stop or ())
    leaves: dict[int, torch.Tensor] = {}
    stack: list[Any] = [t.grad_fn for t in tensors if isinstance(t, torch.Tensor)]
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is None:
            leaves[id(t)] = t
    while stack and len(seen) < limit:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        var = getattr(fn, "variable", None)
        if isinstance(var, torch.Tensor):
            leaves[id(var)] = var
        stack.extend(nxt for nxt, _ in fn.next_functions)
    return list(leaves.values())


def _dist_tensors(node: StochasticNode) -> list[torch.Tensor]:
    return [v for v in vars(node.dist).values() if isinstance(v, torch.Tensor)]


def to_networkx(graph: GraphRecord, *, parameters: bool = True, names: dict[int, str] | None = None) -> nx.DiGraph:
    """The graph's nodes and direct-influence edges.

    Args:
        parameters: also add a node per parameter (leaf tensor requiring grad) that a stochastic
            node's distribution or a cost depends on through autograd, with an edge to it.
        names: ``{id(tensor): name}`` for parameters (e.g. from ``module.named_parameters()``);
            default names are ``θ0, θ1, ...``.

    Node attributes: ``kind``, ``step``, ``shape`` and, for stochastic nodes, ``distribution``
    and ``estimator``.
    """
    if not isinstance(graph, GraphRecord):
        raise SCGError(f"to_networkx(graph): expected a scg.Graph, got {type(graph).__name__}")
    g = nx.DiGraph()
    for n in graph.nodes:
        attrs: dict[str, Any] = {
            "kind": n.kind,
            "step": n.step,
            "shape": tuple(n.value.shape),
            "location": str(n.location),
        }
        if isinstance(n, StochasticNode):
            attrs["distribution"] = type(n.dist).__name__
            attrs["estimator"] = repr(n.estimator)
        g.add_node(n.name if n.step is None else f"{n.name}[{n.step}]", **attrs)
    label = {n.index: (n.name if n.step is None else f"{n.name}[{n.step}]") for n in graph.nodes}
    for n in graph.nodes:
        for j in bits(n.parents):
            g.add_edge(label[j], label[n.index])
    if parameters:
        names = dict(names or {})
        counter = 0
        stop = {id(n.value.grad_fn) for n in graph.nodes if n.value.grad_fn is not None}
        for n in graph.nodes:
            if isinstance(n, StochasticNode):
                sources = _dist_tensors(n)
            else:
                sources = [n.value]
            own = set() if isinstance(n, StochasticNode) else {id(n.value.grad_fn)}
            for leaf in parameter_leaves(sources, stop=stop - own):
                if id(leaf) not in names:
                    names[id(leaf)] = f"θ{counter}"
                    counter += 1
                pname = names[id(leaf)]
                g.add_node(pname, kind="parameter", step=None, shape=tuple(leaf.shape))
                g.add_edge(pname, label[n.index])
    return g
