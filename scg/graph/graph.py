"""The record of a stochastic computation graph, made while a ``with scg.Graph()`` block runs.

`GraphRecord` holds the nodes, the influence tracking and the relation; it knows nothing of
inference (as Pyro's ``Trace``): the credit layer (`scg.credit`) reads a record and builds its
surrogate, and [`scg.Graph`][scg.Graph] is the record with its ``surrogate_loss`` method
(`scg.credit.graph`). This module is the open graph of a context (entered, exited, or opened
while ``torch.compile`` traces), its tracker (`scg.graph.tracking`, whose reports
`scg.graph.escapes` turns into warnings) and its relation (tracked, or from a structure); the
nodes' names and records are `scg.graph.recording`, what users ask of a record `scg.graph.queries`.
Other modules of scg use the record through its internal API (`record`, `tracker`, `costs`,
`stochastic`, `mark_built`, ...), never its private attributes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any, TypeVar

import torch
from torch.distributions import Distribution

from scg.errors import SCGError, expect_bool
from scg.graph.escapes import EscapeReports
from scg.graph.masks import bits, closure
from scg.graph.nodes import CostNode, Node, StochasticNode
from scg.graph.queries import GraphQueries
from scg.graph.recording import FN, NodeRecording
from scg.graph.structure import Declared, Structure, signature
from scg.graph.threads import InThread, wrap
from scg.graph.tracking import InfluenceTracker, Paused, mask_attribute

__all__ = ["GraphRecord", "Intervention", "current_graph", "is_compiling"]

#: ``intervene(name, step, dist, sample_shape) -> value or None``
Intervention = Callable[[str, "int | None", Distribution, torch.Size], "torch.Tensor | None"]

G = TypeVar("G", bound="GraphRecord")

_CURRENT: ContextVar[GraphRecord | None] = ContextVar("scg_current_graph", default=None)
_IDS = itertools.count()


#: the graphs opened inside a function that ``torch.compile`` is tracing, innermost last. Dynamo
#: cannot trace a ContextVar, so a graph entered while compiling is found here instead; the
#: list is only touched during tracing (dynamo replays its net effect, which is empty)
_TRACED: list[GraphRecord] = []


#: ``torch.compiler.is_compiling``, read once: asked for every node, and the attribute lookups
#: through ``torch.compiler`` cost a fifth of the call. Dynamo knows the function by identity
#: (it traces it as True under any name)
is_compiling = torch.compiler.is_compiling


def current_graph(compiling: bool | None = None) -> GraphRecord | None:
    """The innermost open graph of this thread/context, or None. ``compiling``:
    ``torch.compiler.is_compiling()`` if the caller has asked already (None: ask)."""
    if is_compiling() if compiling is None else compiling:
        return _TRACED[-1] if _TRACED else None
    return _CURRENT.get()


#: the innermost open graph of this thread/context outside ``torch.compile``: `current_graph`
#: with ``compiling=False``, as the context variable's own (C) method, for ``scg.sample`` and
#: ``scg.cost``, which run for every node
eager_graph = _CURRENT.get

#: torch functions and modes off: for scg's own reads of metadata in a tracked graph
_UNTRACKED = torch._C.DisableTorchFunction


class GraphRecord(NodeRecording, GraphQueries):
    """One run of a program recorded as a stochastic computation graph: its nodes, their
    influence relation and how it was found. [`scg.Graph`][scg.Graph] (the class users open)
    adds the surrogate; its docstring describes the arguments. Its nodes are named and recorded
    by `NodeRecording`; the questions users ask of it (``g.node``, ``g.credit``...) are `GraphQueries`."""

    def __init__(
        self,
        *,
        warn_on_escape: bool = True,
        intervene: Intervention | None = None,
        strict: bool = False,
        plates: int | None = None,
        structure: Structure | None = None,
    ) -> None:
        if structure is not None and not isinstance(structure, Structure):
            raise SCGError(
                f"scg.Graph(structure=...): expected scg.Declared, scg.Cached or None, got {type(structure).__name__}"
            )
        if plates is not None and (isinstance(plates, bool) or not isinstance(plates, int) or plates < 0):
            raise SCGError(f"scg.Graph(plates=...): expected None or an int >= 0, got {plates!r}")
        if intervene is not None and not callable(intervene):
            raise SCGError(
                f"scg.Graph(intervene=...): expected None or a function (name, step, dist, sample_shape) -> "
                f"value or None, got {type(intervene).__name__}"
            )
        if type(strict) is not bool or type(warn_on_escape) is not bool:  # (no call in the common case)
            for option, flag in (("strict", strict), ("warn_on_escape", warn_on_escape)):
                expect_bool(flag, f"scg.Graph({option}=...)")
        self.intervene = intervene
        #: the estimators' own random calls as they score a node's value (ARM redraws its u given
        #: the pair, forced or drawn) leave torch's CPU generator as they found it: set by
        #: scg.testing's enumeration, whose check that a run with every value forced did not move
        #: the generator then sees the program's hidden draws only (`scg.testing.exact.joint_runs`)
        self.scores_apart = False
        self.strict = strict
        self.plates = plates
        #: the open graph this one was entered in (None if none, and once it is closed)
        self.outer: GraphRecord | None = None
        #: the graph's id: a new one when it is entered, where `__enter__` asks whether
        #: ``torch.compile`` traces (-1 for a graph opened while it does, and until it is entered)
        self.id = -1
        self.nodes: list[Node] = []
        self.warn_on_escape = warn_on_escape
        self._keys: dict[tuple[str, int | None], Node] = {}
        self._n_deterministic = 0  # (the stochastic and cost nodes are counted by their lists)
        self._tracker_obj: InfluenceTracker | None = None  # made when first needed
        self._reports: EscapeReports | None = None  # its handler of escapes, writes and draws
        #: cost index -> the nodes whose values had left tensor land when the cost of a step, which
        #: has a baseline, was made: whether it exists may depend on them
        #: (`scg.credit.soundness.check_baseline_inputs`)
        self.escaped_before: dict[int, int] = {}
        self._token: Token[GraphRecord | None] | None = None
        self._state = "new"  # new -> open -> closed
        #: whether the surrogate was built from this graph (no node may be added after it;
        #: `mark_built` sets it)
        self.built = False
        #: marker node index -> the node of a nested graph whose draw it marks (`foreign_sample`)
        self.nested: dict[int, str] = {}
        self._credit: Callable[[], dict[tuple[int, int], bool]] = dict  # (node, cost) -> mixed (whole credit)
        self._full: list[int] | None = None
        #: grad_fn of each node value that has one -> node index (scg.graph.threads)
        self.grad_fns: dict[Any, int] = {}
        self.structure = structure
        #: whether torch calls are watched (set when the graph is entered)
        self.tracked = True
        self._sig: tuple[Any, ...] | None = None
        #: the signature entry of each node, recorded when the node is made (`record`)
        self._node_keys: list[Any] = []
        #: the stochastic and the cost nodes in creation order (read-only for other modules;
        #: `stochastic_nodes` and `cost_nodes` are copies for users)
        self.stochastic: list[StochasticNode] = []
        self.costs: list[CostNode] = []
        self.grad_at_open = True
        #: whether any node was recorded with a baseline (the surrogate skips them if not; an
        #: attribute, not a property: read for every graph)
        self.has_baselines = False
        #: whether any cost node was recorded with a baseline
        self.has_cost_baselines = False

    # ------------------------------------------------------------------ context manager
    def __enter__(self: G) -> G:
        if self._state != "new":
            raise SCGError("a scg.Graph records one run: it cannot be entered twice; make a new one")
        if torch._C._are_functorch_transforms_active():
            raise SCGError(
                "scg.Graph entered inside torch.func.vmap/grad/jacrev: its nodes' "
                "values would be wrapped tensors scg cannot record. Vectorise through a "
                "batch dimension instead (each row of a batched node is credited with "
                "its own cost rows), and apply the transform to model functions only"
            )
        self._state = "open"
        #: whether gradients were on when the graph was opened (a node drawn with them off in it
        #: has a score term without a gradient: `scg.graph.sampling.sample` warns)
        self.grad_at_open = torch.is_grad_enabled()
        if is_compiling():
            return self._enter_traced()
        self.id = next(_IDS)
        outer = _CURRENT.get()
        self.outer = outer if outer is not None and outer.is_open else None
        self._token = _CURRENT.set(self)
        try:
            if self.structure is not None:
                self.tracked = self.structure._begin()
                if not self.tracked and self.strict:
                    raise SCGError(
                        "scg.Graph(strict=True): escapes can only be found by tracking; "
                        f"{self.structure!r} does not track this graph"
                    )
            if self.tracked:
                self.tracker.__enter__()  # type: ignore[no-untyped-call]
        except BaseException:  # a graph that failed to open is neither open nor current
            _CURRENT.reset(self._token)
            self._token = None
            self._state = "closed"
            self.outer = None
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state != "open":  # (closed already: by the graph it is nested in, exited first)
            return
        if self._token is None:  # entered while torch.compile traced the program
            _TRACED.pop()
        else:
            still_open = []  # graphs nested in this one and not exited (an ExitStack unwound out of order)
            inner = _CURRENT.get()
            while inner is not None and inner is not self:
                still_open.append(inner)
                inner = inner.outer
            for g in still_open:  # (closed innermost first: their trackers are above this one's)
                g.__exit__(exc_type, exc, tb)
            if self.tracked:
                self.tracker.__exit__(exc_type, exc, tb)  # type: ignore[no-untyped-call]
            _CURRENT.reset(self._token)
            self._token = None
            if still_open and exc_type is None:
                self._state, self.outer = "closed", None
                raise SCGError(
                    f"a scg.Graph was exited while {len(still_open)} graph(s) nested in it (opened after it, "
                    "not exited) were still open; they are closed too. Exit nested graphs first (with-blocks do)"
                )
        self._state = "closed"
        self.outer = None

    def _enter_traced(self: G) -> G:
        """``__enter__`` while ``torch.compile`` traces the program (``docs/performance.md``):
        only a declared structure can be used there (tracking watches every torch call through
        a torch function mode, and a learned structure needs tracked graphs)."""
        if not isinstance(self.structure, Declared) or self.strict:
            raise SCGError(
                "scg.Graph inside torch.compile: only scg.Graph(structure=scg.Declared(...)) "
                "can be traced (got "
                + (
                    "strict=True"
                    if self.structure is not None and isinstance(self.structure, Declared)
                    else f"structure={self.structure!r}"
                )
                + "); a tracked or "
                "scg.Cached graph watches torch calls, which dynamo cannot trace. Declare the "
                "structure (check it with scg.testing.check_structure), or compile the model's "
                "functions only"
            )
        self.outer = _TRACED[-1] if _TRACED else None
        # not structure._begin(): its counters would be read by the trace, and every new value
        # would make dynamo compile the step again (stats count eager graphs only)
        self.tracked = False
        _TRACED.append(self)
        return self

    @property
    def tracker(self) -> InfluenceTracker:
        """The graph's tracking mode (made on first use: an untracked graph needs none)."""
        if self._tracker_obj is None:
            self._reports = EscapeReports(nodes=self.nodes, warn=self.warn_on_escape, strict=self.strict)
            self._tracker_obj = InfluenceTracker(mask_attribute(self.id), self._reports)
        return self._tracker_obj

    @property
    def live_tracker(self) -> InfluenceTracker | None:
        """The tracking mode if the graph is tracked and made one (None otherwise)."""
        return self._tracker_obj if self.tracked else None

    def mark_built(self) -> None:
        """The credit layer is building the surrogate: no node may be added from now on."""
        self.built = True

    def set_credit(self, credit: Callable[[], dict[tuple[int, int], bool]]) -> None:
        """The credit the surrogate gave, made when first asked: (node, cost) -> whole-plate
        (read by `credit` and `credit_pairs`)."""
        self._credit = credit

    @property
    def is_open(self) -> bool:
        """True inside the ``with`` block."""
        return self._state == "open"

    # ------------------------------------------------------------------ worker threads
    def in_thread(self) -> InThread:
        """``with g.in_thread():`` inside a worker thread tracks its torch calls in this graph.

        torch's function modes are per thread, so without it a value computed from a sample in
        another thread carries no influence (see `scg.graph.threads`). A no-op in the
        graph's own thread; refused once the graph's block has ended.
        """
        return InThread(self, _CURRENT)

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` run under this graph's tracking in whichever thread calls it: pass
        ``g.wrap(reward)`` to ``ThreadPoolExecutor.submit``/``map``."""
        return wrap(self, _CURRENT, fn)

    # ------------------------------------------------------------------ masks
    @property
    def escaped(self) -> int:
        """The mask of the nodes whose values have left tensor land so far (0 untracked)."""
        return 0 if self._reports is None else self._reports.escaped

    @property
    def dynamic(self) -> int:
        """The mask of the nodes a data-dependent shape was built from (``nonzero``, a boolean
        index: ``scg.graph.propagate.mark_dynamic``) so far (0 untracked)."""
        return 0 if self._tracker_obj is None else self._tracker_obj.dynamic

    def draws_read(self, full: list[int]) -> str | None:
        """Where this tracked graph's program read a sampled value into Python (an escape of a
        value computed from a stochastic node, ``full`` giving each node's influencers), or built
        a data-dependent shape from one: what its structure (which nodes exist, their shapes) may
        then depend on (`scg.Cached` refuses its conservative fallback once it has seen one). The
        first such escape's source line, or the nodes of the shape; None if neither."""
        reports = self._reports
        if reports is None or not (reports.escaped or self.dynamic):
            return None
        drawn = 0
        for v in self.stochastic:
            drawn |= 1 << v.index

        def draws(mask: int) -> int:
            reach = mask
            for j in bits(mask):
                if j < len(full):
                    reach |= full[j]
            return reach & drawn

        def names(mask: int) -> str:
            return ", ".join(f"'{self.nodes[i].name}'" for i in bits(mask))

        for (file, line), (mask, what) in reports.sites.items():
            hit = draws(mask)
            if hit:
                return f"{what} at {file}:{line} (a value computed from node(s) {names(hit)})"
        hit = draws(self.dynamic)
        if hit:
            return f"a data-dependent shape (nonzero, boolean indexing, ...) built from node(s) {names(hit)}"
        return None

    def mask(self, value: object) -> int:
        """The direct-influence mask of a tensor computed in this graph (0 if untracked),
        including what was written into its storage through another alias."""
        if self._tracker_obj is None or not isinstance(value, torch.Tensor):
            return 0
        return self._tracker_obj.mask_of(value)

    def foreign(self, value: torch.Tensor) -> dict[int, int]:
        """The tensor's foreign positions: position -> mask (see `scg.graph.positions`)."""
        return self.tracker.foreign_of(value)

    def sample_places(self, value: object) -> dict[int, int] | None:
        """Where each sample dimension lies in a tensor computed in this tracked graph: node
        index -> dimension, or `scg.graph.sample_positions.LOST` / ``MIXED`` (None: the tensor
        carries none, or the graph is not tracked)."""
        if self._tracker_obj is None or not isinstance(value, torch.Tensor):
            return None
        places: dict[int, int] | None = getattr(value, self._tracker_obj.sattr, None)
        return places

    def paused(self) -> Paused:
        """Suspend tracking (when this graph's tracker is the innermost torch function mode)."""
        return Paused(self._tracker_obj if self.tracked else None)

    def set_mask(self, value: torch.Tensor, mask: int, foreign: dict[int, int] | None = None) -> None:
        """Mark ``value`` as computed from the nodes of ``mask`` (and its foreign positions)."""
        tracker = self.tracker
        setattr(value, tracker.attr, mask)
        setattr(value, tracker.fattr, foreign or None)

    def full_influence(self) -> list[int]:
        """``full[i]``: the mask of every node that influences node ``i`` (transitive closure)."""
        if self._full is None:
            if not self.tracked:
                self._full = self._apply_structure()
            else:
                self._full = closure([n.parents for n in self.nodes])
        return self._full

    def signature(self) -> tuple[Any, ...]:
        """The graph's signature (`scg.graph.structure.signature`), computed once the
        surrogate is built or the relation is asked for."""
        if self._sig is None or len(self._sig) != len(self.nodes):
            sig = signature(self.nodes, self._node_keys)
            self._sig = sig if self.structure is None else self.structure._intern(sig)
        return self._sig

    def _apply_structure(self) -> list[int]:
        """An untracked graph: its nodes' parents and foreign positions from the structure;
        returns the closure (cached with the relation)."""
        assert self.structure is not None
        relation, full = self.structure._relation(self.nodes, self.signature())
        for node, (parents, foreign) in zip(self.nodes, relation):
            node.parents = parents
            if foreign:
                node.foreign = dict(foreign)
        return full

    def use_relation(self, full: list[int]) -> None:
        """Set the influence closure (the traced surrogate computes a declared one)."""
        self._full = full

    def __repr__(self) -> str:
        kinds = ", ".join(f"{self._count(k)} {k}" for k in FN)
        return f"<scg.Graph {self._state}: {kinds}>"
