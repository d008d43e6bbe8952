"""Tracking in worker threads, and detecting values computed outside it.

scg's tracker is a ``TorchFunctionMode`` (`scg.graph.tracking`), and torch keeps its mode
stack per thread: an operation run in another thread (a ``ThreadPoolExecutor`` computing a
reward from a sample) is not seen, so the cost it returns carries no influence, and Algorithm 1
of Schulman et al. (2015) would not credit the nodes it depends on with it (a biased gradient).

Two answers, one for the supported way and one for the unsupported one:

* **Carry the tracking into the worker.** ``with g.in_thread():`` (inside the worker) pushes the
  graph's tracker on that thread's mode stack and makes the graph current there, so the worker's
  operations are tracked (and its escapes, ``.tolist()``, warn) exactly as in the graph's own
  thread. ``g.wrap(fn)`` does it for a callable handed to an executor::

      with scg.Graph() as g, ThreadPoolExecutor() as pool:
          z = scg.sample(Categorical(logits=scores), name="z")
          r = pool.submit(g.wrap(reward), z).result()     # reward(z) runs tracked
          scg.cost(r, name="reward")

* **Detect a cost computed from a node outside the tracker.** A cost that carries no influence
  at all (and a stochastic node drawn from parameters that carry none) is checked against its
  autograd graph (`autograd_sources`): if that graph reaches the value of a node of the
  graph, the cost *was* computed from that node but the tracker did not see it (another
  thread, or any other path around the mode): scg warns with
  [`InfluenceLostWarning`][scg.InfluenceLostWarning] naming the cost (or node) and the nodes, and raises
  [`InfluenceLostError`][scg.InfluenceLostError] in ``scg.Graph(strict=True)``. A cost computed from data and
  parameters only reaches no node's value and is never reported. What this cannot see: a path
  without autograd (a discrete sample turned into a reward through ``.tolist()`` in the worker
  leaves no trace on the tensor it returns); use ``g.wrap``, or declare the dependency with
  [`scg.influenced_by`][scg.influenced_by].
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from contextvars import ContextVar, Token
from typing import Any, Protocol, TypeVar

import torch
from torch._C import _get_function_stack_at, _len_torch_function_stack
from torch.overrides import _pop_mode, _push_mode

from scg.errors import InfluenceLostError, InfluenceLostWarning, SCGError
from scg.graph.masks import bits
from scg.graph.nodes import Node
from scg.graph.tracking import InfluenceTracker

__all__ = ["InThread", "WatchedGraph", "autograd_sources", "check_untracked", "wrap"]

R = TypeVar("R")

#: The most autograd nodes `autograd_sources` visits for one cost (a bound on the work of
#: the check; a cost whose autograd graph is larger is checked up to this many nodes).
WALK_LIMIT = 100_000


class WatchedGraph(Protocol):
    """What this module reads of a graph (`scg.graph.graph.GraphRecord`, which imports this
    module, has it)."""

    tracked: bool
    strict: bool
    warn_on_escape: bool
    grad_fns: dict[Any, int]
    nodes: list[Node]

    @property
    def is_open(self) -> bool: ...

    @property
    def tracker(self) -> InfluenceTracker: ...


class InThread:
    """``with g.in_thread():`` — track this thread's torch calls in ``graph`` for the block.

    In the graph's own thread (or where its tracker is already active) it does nothing. It
    refuses a graph that is not open: a value computed after the block cannot be credited.
    """

    __slots__ = ("current", "graph", "pushed", "token")

    def __init__(self, graph: WatchedGraph, current: ContextVar[Any]) -> None:
        self.graph = graph
        self.current = current
        self.pushed = False
        self.token: Token[Any] | None = None

    def __enter__(self) -> WatchedGraph:
        g = self.graph
        if not g.is_open:
            raise SCGError(
                "Graph.in_thread()/Graph.wrap(): the graph is not open (its `with` block has "
                "ended); a value computed now cannot be credited to its nodes. Wait for the "
                "worker's result inside the block"
            )
        if not g.tracked:  # a Declared/Cached structure: nothing to watch, only the graph
            if self.current.get() is not g:
                self.token = self.current.set(g)
            return g
        tracker = g.tracker
        n = _len_torch_function_stack()
        if any(_get_function_stack_at(i) is tracker for i in range(n)):
            return g  # already tracked here (the graph's own thread, or a nested in_thread)
        _push_mode(tracker)  # type: ignore[no-untyped-call]
        self.pushed = True
        self.token = self.current.set(g)
        return g

    def __exit__(self, *exc: object) -> None:
        if not self.pushed:
            if self.token is not None:
                self.current.reset(self.token)
                self.token = None
            return
        self.pushed = False
        n = _len_torch_function_stack()
        if n and _get_function_stack_at(n - 1) is self.graph.tracker:
            _pop_mode()  # type: ignore[no-untyped-call]
        if self.token is not None:
            self.current.reset(self.token)
            self.token = None


def wrap(graph: WatchedGraph, current: ContextVar[Any], fn: Callable[..., R]) -> Callable[..., R]:
    """``fn`` run under ``graph``'s tracking in whichever thread calls it."""
    if not callable(fn):
        raise SCGError(f"Graph.wrap(fn): expected a callable, got {type(fn).__name__}")

    def tracked(*args: Any, **kwargs: Any) -> R:
        with InThread(graph, current):
            return fn(*args, **kwargs)

    tracked.__name__ = getattr(fn, "__name__", "tracked")
    tracked.__doc__ = getattr(fn, "__doc__", None)
    return tracked


def autograd_sources(value: torch.Tensor, grad_fns: dict[Any, int], limit: int = WALK_LIMIT) -> int:
    """Mask of the nodes whose value's autograd node is reachable from ``value``'s.

    ``grad_fns`` maps the ``grad_fn`` of each node value (a fresh view per node, so it is the
    node's own) to the node's index. Host-side only: reads the autograd graph's structure, never
    tensor data (no device synchronisation).
    """
    root = value.grad_fn
    if root is None or not grad_fns:
        return 0
    found = 0
    seen: set[int] = set()
    alive: list[Any] = []  # keeps the visited wrappers alive, so that their ids stay unique
    stack: list[Any] = [root]
    while stack and len(seen) < limit:
        fn = stack.pop()
        key = id(fn)
        if key in seen:
            continue
        seen.add(key)
        alive.append(fn)
        idx = grad_fns.get(fn)
        if idx is not None:
            found |= 1 << idx
            continue  # what the node was computed from is the node's own business
        for nxt, _ in fn.next_functions:
            if nxt is not None and id(nxt) not in seen:
                stack.append(nxt)
    return found


def check_untracked(graph: WatchedGraph, node: Any, values: Sequence[torch.Tensor], mask: int) -> None:
    """Report a node (a cost, or a stochastic node through its distribution's tensors) that
    carries no influence but whose autograd graph reaches a node's value (computed from it
    outside the tracker): a warning, or an error in strict mode."""
    if mask or not graph.grad_fns or not (graph.warn_on_escape or graph.strict):
        return
    own = node.index
    if all(i == own for i in graph.grad_fns.values()):
        return  # only the node's own value (a pathwise draw): its parameters were computed before it
    lost = 0
    for v in values:
        lost |= autograd_sources(v, graph.grad_fns)
    if not lost:
        return
    names = ", ".join(f"'{graph.nodes[i].name}'" for i in bits(lost))
    what = "its distribution's parameters are" if node.kind == "stochastic" else "it is"
    msg = (
        f"{node.describe()}: {what} computed from node(s) {names} (the autograd graph "
        "reaches their values) but carry none of their influence: computed where scg's "
        "tracking does not reach, typically another thread (torch's function modes are per "
        "thread). Run the worker under g.wrap(fn) or `with g.in_thread():`, or declare the "
        "dependency with scg.influenced_by(value, *nodes); without it the nodes would not "
        "be credited with what depends on it (a biased gradient)"
    )
    if graph.strict:
        raise InfluenceLostError(msg + " (scg.Graph(strict=True))")
    file, _, line = str(node.location).rpartition(":")
    warnings.warn_explicit(msg, InfluenceLostWarning, file or "<unknown>", int(line) if line.isdigit() else 0)
