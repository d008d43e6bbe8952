"""Stochastic computation graphs: nodes, influence tracking, and the record of a run (`GraphRecord`;
the user-facing [`scg.Graph`][scg.Graph] adds the surrogate, `scg.credit.graph`)."""

from scg.graph.annotate import deterministic, influenced_by
from scg.graph.costs import cost
from scg.graph.graph import GraphRecord, current_graph
from scg.graph.nodes import CostNode, DeterministicNode, Node, StochasticNode
from scg.graph.sampling import sample

__all__ = [
    "CostNode",
    "DeterministicNode",
    "GraphRecord",
    "Node",
    "StochasticNode",
    "cost",
    "current_graph",
    "deterministic",
    "influenced_by",
    "sample",
]
