"""The nodes of a stochastic computation graph (Schulman et al. 2015, Section 2).

Three kinds of node are recorded while a [`Graph`][scg.Graph] is open:

* [`StochasticNode`][scg.StochasticNode] (a circle in the paper's drawings): a value drawn from a distribution
  whose parameters may depend on the parameters θ and on other nodes.
* [`CostNode`][scg.CostNode]: a tensor whose elements are summed into the objective E[Σ c].
* [`DeterministicNode`][scg.DeterministicNode] (a square): an optional, user-named intermediate value, recorded only
  so that the graph can be inspected and drawn.

A node's ``parents`` mask holds the nodes it was *directly* computed from (see
`scg.graph.tracking`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any, Protocol

import torch
from torch.distributions import Distribution

__all__ = [
    "NO_SAMPLE_DIMS",
    "BaselineInputs",
    "CostNode",
    "DeterministicNode",
    "Location",
    "Node",
    "NodeBaseline",
    "NodeEstimator",
    "SampleInfo",
    "StochasticNode",
    "caller_location",
    "user_stacklevel",
]

_SCG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Location:
    """Where a node was made: ``file:line`` of the user's call, formatted when first read.

    Finding the line of a frame decodes its code object's line table up to the current
    instruction (linear in the size of the user's function) on every call; a node's location is
    only read in error messages, drawings and inspection, so only the code object and the
    instruction offset are kept when the node is made. ``str(loc)``, f-strings, ``==`` with a
    string, hashing and pickling behave as for the formatted text.
    """

    __slots__ = ("_code", "_lasti", "_text")

    def __init__(self, code: CodeType | None = None, lasti: int = -1, text: str | None = None) -> None:
        self._code = code
        self._lasti = lasti
        self._text = text

    def __str__(self) -> str:
        text = self._text
        if text is None:
            code = self._code
            if code is None:
                text = "<unknown>"
            else:
                line = next((ln for start, end, ln in code.co_lines() if start <= self._lasti < end), None)
                text = f"{code.co_filename}:{code.co_firstlineno if line is None else line}"
            self._text = text
            self._code = None  # (the code object is not needed any more)
        return text

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __repr__(self) -> str:
        return repr(str(self))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Location, str)):
            return str(self) == str(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))

    def __reduce__(self) -> tuple[type[Location], tuple[None, int, str]]:
        return Location, (None, -1, str(self))  # (code objects do not pickle)


_UNKNOWN = Location(text="<unknown>")


def _compiled_line() -> str:
    """``file:line`` of the compiled function's line that is being traced (the user's step: its
    call that led here), read from dynamo's translator at trace time; a constant of the graph."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        return f"{tx.f_code.co_filename}:{tx.lineno} (traced by torch.compile)"
    except Exception:  # (dynamo's internals moved: the location is only for messages)
        return "<traced by torch.compile>"


#: dynamo runs it while tracing and keeps its result as a constant (a string, which the traced
#: error messages can format; a Location object would print as a dynamo variable). This is what
#: ``torch.compiler.assume_constant_result`` does, without importing dynamo when scg is imported
#: (importing it changes torch's namespace)
_compiled_line._dynamo_marked_constant = True  # type: ignore[attr-defined]


def caller_location(compiling: bool | None = None) -> Location | str:
    """``file:line`` of the first frame outside the scg package (for error messages).

    Called from scg's own functions only, so the search starts at their caller: asking for a
    frame object makes CPython build one (and keep it until its function returns), and the scg
    frames in between need none. The line number is found when the location is first
    formatted (`Location`). Both matter inside a training loop, where this runs for
    every node. ``compiling``: ``torch.compiler.is_compiling()`` if the caller has asked
    already (None: ask).
    """
    if compiling is None:
        compiling = torch.compiler.is_compiling()
    if compiling:  # dynamo cannot trace frame objects
        return _compiled_line()
    try:
        frame: FrameType = _getframe(2)
    except ValueError:  # (called from the outermost frame)
        return _UNKNOWN
    code = frame.f_code
    inside = _IN_SCG.get(code.co_filename)  # (a dict hit per file: cheaper than ``startswith``)
    while inside is not False:
        if inside is None:
            inside = _in_scg(code.co_filename)
            continue
        back = frame.f_back
        if back is None:
            return _UNKNOWN
        frame = back
        code = frame.f_code
        inside = _IN_SCG.get(code.co_filename)
    loc = _new(Location)  # (its slots stored here: a call of the class costs about three times as much)
    loc._code = code
    loc._lasti = frame.f_lasti
    loc._text = None
    return loc


_getframe = sys._getframe
_new = object.__new__
#: source file -> whether it is in the scg package (`caller_location`; one entry per file seen,
#: cleared past `_IN_SCG_LIMIT`: generated code, notebook cells, can have a name per function)
_IN_SCG: dict[str, bool] = {}
_IN_SCG_LIMIT = 4096


def _in_scg(filename: str) -> bool:
    if len(_IN_SCG) >= _IN_SCG_LIMIT:
        _IN_SCG.clear()
    inside = _IN_SCG[filename] = filename.startswith(_SCG_DIR)
    return inside


def user_stacklevel() -> int:
    """``warnings.warn``'s ``stacklevel`` for a warning raised in scg's caller of this function:
    the user's frame, the first outside the scg package, whichever of scg's paths led there."""
    level = 2
    frame = sys._getframe(2)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_SCG_DIR):
        frame = frame.f_back
        level += 1
    return level


class NodeEstimator(Protocol):
    """What the record and the credit plan read of a node's estimator
    ([`scg.estimators.Estimator`][scg.estimators.Estimator] has it; the records sit below the
    estimators, so they name this protocol, not the class)."""

    @property
    def score(self) -> bool: ...

    @property
    def enumerates(self) -> bool: ...

    @property
    def relaxed(self) -> bool: ...

    @property
    def higher_order(self) -> bool: ...

    @property
    def reducible(self) -> bool: ...

    def log_prob(self, dist: Distribution, value: torch.Tensor) -> torch.Tensor: ...

    def weights(self, node: StochasticNode) -> torch.Tensor: ...

    def control_variate(self, node: StochasticNode) -> tuple[torch.Tensor, torch.Tensor] | None: ...


class NodeBaseline(Protocol):
    """What the records know of a node's baseline ([`scg.baselines.Baseline`][scg.baselines.Baseline]
    has it): a callable on the group of nodes sharing it, their targets and sample layouts."""

    def __call__(self, nodes: Sequence[Node], targets: torch.Tensor, info: Sequence[SampleInfo]) -> Any: ...


@dataclass(kw_only=True, slots=True)
class BaselineInputs:
    """What a baseline's declared ``inputs`` were computed from when its node was registered:
    ``mask``, the nodes (0 in an untracked graph), and each input tensor with its version
    counter (a write after registration is refused, `scg.credit.soundness`)."""

    mask: int
    versions: list[tuple[torch.Tensor, int]]


@dataclass(frozen=True)
class SampleInfo:
    """What a stochastic node's leading dimensions are (given to its baseline with its targets,
    `scg.credit.sample_dims`).

    ``layout``: node indices of the sample dimensions leading the node's shape, newest first.
    ``sizes``/``enumerated``: their sizes and whether each is an enumeration (not i.i.d. draws).
    ``joint``: a cost that the node influences reduced the node's leading sample dimension, so
    each slice of the node is credited with a cost that depends on every slice.
    """

    layout: tuple[int, ...]
    sizes: tuple[int, ...]
    enumerated: tuple[bool, ...]
    joint: bool = False


#: The SampleInfo of every node of a graph without sample dimensions.
NO_SAMPLE_DIMS = SampleInfo((), (), ())


@dataclass(eq=False, kw_only=True, slots=True)
class Node:
    """Common fields: the node's position in its graph, its name, step and where it was made."""

    index: int
    name: str
    value: torch.Tensor
    parents: int
    step: int | None
    location: Location | str
    #: first leading position of the value that no longer lines up with each parent's dimensions
    #: (position -> mask of parents; see `scg.graph.positions`)
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


@dataclass(eq=False, kw_only=True, slots=True)
class StochasticNode(Node):
    """A sample ``value ~ dist``; ``log_prob`` is log p(value | parents) when the estimator needs it.

    ``n`` is the number of independent samples along a new leading dimension (``None`` for one
    sample and no extra dimension). ``private``: the log-probability was computed from a copy of
    the value, so the program may write into the value. ``plates``: the declared number of
    leading batch dimensions credited per element (``None``: all, `scg.credit.plates`).
    ``enumerated``: the value is the node's whole support (``Enumerate``). ``version``: the
    value's version counter when it was drawn (None while ``torch.compile`` traces). ``drawn``:
    the value as drawn, a copy kept for an estimator that reads it again when the surrogate is
    built (`Estimator.rereads_value`: a control variate's relaxation, the weights of an
    enumerated set), so that a write into the sample does not change it (None: ``value`` is it;
    read it with `drawn_value`). ``dist_log_prob``: what [`scg.log_prob`][scg.log_prob] returned
    for the node (None until it is asked for).
    """

    dist: Distribution = field(repr=False)
    estimator: NodeEstimator = field(repr=False)
    baseline: NodeBaseline | None = field(repr=False, default=None)
    log_prob: torch.Tensor | None = field(repr=False, default=None)
    dist_log_prob: torch.Tensor | None = field(repr=False, default=None)
    version: int | None = field(repr=False, default=None)
    n: int | None = None
    private: bool = field(repr=False, default=True)
    plates: int | None = field(repr=False, default=None)
    enumerated: bool = field(repr=False, default=False)
    baseline_inputs: BaselineInputs | None = field(repr=False, default=None)
    drawn: torch.Tensor | None = field(repr=False, default=None)

    @property
    def kind(self) -> str:
        return "stochastic"

    def drawn_value(self) -> torch.Tensor:
        """The value as the estimator drew it (detached), whatever the program wrote into the
        sample since (``tok.masked_fill_(done, pad)``)."""
        return (self.value if self.drawn is None else self.drawn).detach()


@dataclass(eq=False, kw_only=True, slots=True)
class CostNode(Node):
    """A cost tensor; the objective is E[sum of its elements] (minimized).

    ``reduced``: mask of the multi-sample nodes whose sample dimension the cost has already
    reduced (``scg.cost(..., reduced=...)``; see `scg.credit.sample_dims`). ``version``: the
    value's version counter when it was registered (None while ``torch.compile`` traces).
    """

    baseline: NodeBaseline | None = field(repr=False, default=None)
    version: int | None = field(repr=False, default=None)
    reduced: int = field(repr=False, default=0)
    baseline_inputs: BaselineInputs | None = field(repr=False, default=None)

    @property
    def kind(self) -> str:
        return "cost"


@dataclass(eq=False, kw_only=True, slots=True)
class DeterministicNode(Node):
    """A named intermediate value, recorded for inspection (``scg.deterministic``)."""

    @property
    def kind(self) -> str:
        return "deterministic"


def value_version(value: torch.Tensor) -> int | None:
    """The tensor's version counter (writes after the node is recorded are detected by it); None
    for a tensor made under ``torch.inference_mode``, which keeps none (and cannot be written
    outside inference mode anyway)."""
    try:
        return value._version
    except RuntimeError:
        return None
