"""The nodes of a stochastic computation graph (Schulman et al. 2015, Section 2).

Three kinds of node are recorded while a :class:`~scg.Graph` is open:

* :class:`StochasticNode` (a circle in the paper's drawings): a value drawn from a distribution
  whose parameters may depend on the parameters θ and on other nodes.
* :class:`CostNode`: a tensor whose elements are summed into the objective E[Σ c].
* :class:`DeterministicNode` (a square): an optional, user-named intermediate value, recorded only
  so that the graph can be inspected and drawn.

A node's ``parents`` mask holds the nodes it was *directly* computed from (see
:mod:`scg.graph.tracking`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch.distributions import Distribution

if TYPE_CHECKING:
    from scg.baselines.base import Baseline
    from scg.estimators.base import Estimator

__all__ = ["CostNode", "DeterministicNode", "Node", "StochasticNode", "caller_location"]

_SCG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def caller_location() -> str:
    """``file:line`` of the first frame outside the scg package (for error messages)."""
    if torch.compiler.is_compiling():  # dynamo cannot trace frame objects
        return "<traced by torch.compile>"
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_SCG_DIR):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "<unknown>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


@dataclass(eq=False)
class Node:
    """Common fields: the node's position in its graph, its name, step and where it was made."""

    index: int
    name: str
    value: torch.Tensor
    parents: int
    step: int | None
    location: str
    #: first leading position of the value that no longer lines up with each parent's dimensions
    #: (position -> mask of parents; see :mod:`scg.graph.positions`)
    foreign: dict[int, int] = field(repr=False, default_factory=dict)
    #: the id of the graph the node belongs to
    graph: int = field(repr=False, default=-1)

    @property
    def kind(self) -> str:
        raise NotImplementedError

    def describe(self) -> str:
        """``"stochastic node 'z' (step 3, created at model.py:42)"``, for error messages."""
        step = "" if self.step is None else f"step {self.step}, "
        return f"{self.kind} node '{self.name}' ({step}created at {self.location})"


@dataclass(eq=False)
class StochasticNode(Node):
    """A sample ``value ~ dist``; ``log_prob`` is log p(value | parents) when the estimator needs it.

    ``n`` is the number of independent samples along a new leading dimension (``None`` for one
    sample and no extra dimension).
    """

    dist: Distribution = field(repr=False, default=None)  # type: ignore[assignment]
    estimator: Estimator = field(repr=False, default=None)  # type: ignore[assignment]
    baseline: Baseline | None = field(repr=False, default=None)
    log_prob: torch.Tensor | None = field(repr=False, default=None)
    n: int | None = None
    extra: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def kind(self) -> str:
        return "stochastic"


@dataclass(eq=False)
class CostNode(Node):
    """A cost tensor; the objective is E[sum of its elements] (minimized).

    ``extra["reduced"]``: mask of the multi-sample nodes whose sample dimension the cost has
    already reduced (``scg.cost(..., reduced=...)``; see :mod:`scg.sample_dims`).
    """

    baseline: Baseline | None = field(repr=False, default=None)
    extra: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def kind(self) -> str:
        return "cost"


@dataclass(eq=False)
class DeterministicNode(Node):
    """A named intermediate value, recorded for inspection (``scg.deterministic``)."""

    @property
    def kind(self) -> str:
        return "deterministic"
