"""Stochastic computation graphs: nodes, influence tracking, and the Graph that records them."""

from scg.graph.build import cost, deterministic, influenced_by, sample
from scg.graph.graph import Graph, current_graph
from scg.graph.nodes import CostNode, DeterministicNode, Node, StochasticNode

__all__ = [
    "CostNode",
    "DeterministicNode",
    "Graph",
    "Node",
    "StochasticNode",
    "cost",
    "current_graph",
    "deterministic",
    "influenced_by",
    "sample",
]
