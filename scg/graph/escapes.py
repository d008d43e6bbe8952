"""Escapes, hidden randomness and writes into node values: what the tracker reports, and what the graph does.

The tracker (`scg.graph.tracking`) sees three kinds of events it cannot turn into influence:

* an **escape**: a torch call on a tracked value returns a non-tensor (``.item()``, ``bool()``,
  ``x in z``, ``np.asarray``, ...), a data-dependent shape is read (``len(z.nonzero())``), or a
  tracked value is captured inside a ``torch.func`` transform: whatever Python computes from the
  result carries no influence (`report_escape`, `check_transform`);
* **hidden randomness**: a draw (``torch.bernoulli``, ``Distribution.sample()``) from tracked
  values, or from probabilities that require grad, outside ``scg.sample``: the draw is not a
  stochastic node, so it gets no score term (`report_random`, `draw_loses_grad`);
* a **write into a node's value** (an in-place operation on the storage of a node's value).

Each is reported as ``on_event(kind, what, mask, frame)`` with ``kind`` ``"escape"``, ``"random"``
or ``"write"`` (for a write ``mask`` is the node's index) and ``frame`` the user's frame. The
graph's handler, `EscapeReports`, warns (`InfluenceLostWarning`, `UntrackedRandomnessWarning`)
once per source line, raises `InfluenceLostError` in strict mode, and refuses a write into the
value of a stochastic node that scored it (``docs/tracking.md``). Escapes inside torch's own code
(argument validation in ``torch.distributions``) are not reported.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Protocol

import torch
from torch._C import _functorch
from torch.distributions import Distribution

from scg.errors import InfluenceLostError, InfluenceLostWarning, SCGError, UntrackedRandomnessWarning
from scg.graph.masks import bits
from scg.graph.nodes import Node, StochasticNode
from scg.graph.ops import outside_libraries, user_frame

__all__ = [
    "TRANSFORM",
    "EscapeReports",
    "Handler",
    "Reporter",
    "check_transform",
    "draw_loses_grad",
    "report_escape",
    "report_random",
]

Tensor = torch.Tensor

#: ``on_event(kind, what, mask, frame)``
Handler = Callable[[str, str, int, FrameType], None]

#: what a tracked value captured inside a ``torch.func`` transform is reported as
TRANSFORM = "a torch.func transform (vmap, grad, jacrev: scg does not follow values inside it)"


class Reporter(Protocol):
    """What this module reads of the tracker (`scg.graph.tracking.InfluenceTracker`, which
    imports this module)."""

    #: the graph's handler of the events (`EscapeReports`)
    on_event: Handler

    def mask_of(self, t: Tensor) -> int:
        """The tensor's mask, including what was written into its storage through an alias."""
        ...


# The reports below find the user's frame two frames up: they are called from the tracker's
# ``__torch_function__`` (or from `check_transform`, called from it) directly.


def report_escape(tracker: Reporter, what: str, m: int, library_ok: bool = False) -> None:
    """A value computed from the nodes of ``m`` left tensor land through ``what`` (not reported
    from library code unless ``library_ok``)."""
    if library_ok:
        frame: FrameType | None = outside_libraries(sys._getframe(2))
        library = False
    else:
        frame, library = user_frame(sys._getframe(2))
    if frame is not None and not library:
        tracker.on_event("escape", what, m, frame)


def report_random(tracker: Reporter, name: str, m: int) -> None:
    """A draw ``name`` outside ``scg.sample`` from values computed from the nodes of ``m`` (0:
    from probabilities that require grad)."""
    frame = outside_libraries(sys._getframe(2))
    if frame is not None:
        tracker.on_event("random", name, m, frame)


def check_transform(tracker: Reporter, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
    """Inside ``torch.func.vmap/grad/jacrev`` tensors are wrapped in new objects, so their masks
    are not seen: report a tracked value found under the wrapper."""
    m = 0
    for a in (*args, *(kwargs or {}).values()):
        while isinstance(a, Tensor) and _functorch.is_functorch_wrapped_tensor(a):
            a = _functorch.get_unwrapped(a)
        if isinstance(a, Tensor):
            m |= tracker.mask_of(a)
    if m:
        report_escape(tracker, TRANSFORM, m, library_ok=True)


#: draws whose gradient with respect to their probabilities is defined as zero: a result that
#: requires grad still carries none of its dependence on them
ZERO_GRADIENT_DRAWS = frozenset({"bernoulli", "bernoulli_", "poisson", "binomial", "normal"})


def draw_loses_grad(name: str, args: tuple[Any, ...], out: Any) -> bool:
    """A random draw from probabilities that require grad (``torch.multinomial(softmax(θ))``,
    ``Categorical(logits=θ).sample()``, which expands θ under ``no_grad``) whose result does not,
    or whose gradient is zero by definition (``torch.bernoulli(sigmoid(θ))``, ``torch.normal(θ, 1.0)``,
    `ZERO_GRADIENT_DRAWS`): its dependence on θ has no gradient. (``randn_like(x)`` reads only
    ``x``'s shape.)"""
    if name.endswith("_like"):
        return False
    if isinstance(out, Tensor) and out.requires_grad and name not in ZERO_GRADIENT_DRAWS:
        return False
    for a in args:
        if isinstance(a, Tensor) and (a.requires_grad or (a._base is not None and a._base.requires_grad)):
            return True
    return False


#: how many frames above a random call `hidden_sample` looks for a ``Distribution.sample``
_SAMPLE_DEPTH = 8


def hidden_sample(tracker: Reporter) -> tuple[str, int] | None:
    """``("Exponential.sample", mask)`` when the random call being handled (no argument of which
    requires grad or was computed from a node) is made inside ``Distribution.sample`` of a
    distribution whose parameters require grad (mask 0) or were computed from nodes (their mask):
    the noise comes from a fresh tensor and the parameters enter afterwards under ``no_grad``
    (``Exponential``, ``Uniform``, ``ContinuousBernoulli``, ...), so the draw alone shows no
    dependence on them. The outermost such ``sample`` names the draw (``NegativeBinomial``, not
    the ``Gamma`` it samples through). None otherwise. Called only on random calls, so the
    frame walk costs nothing per operation."""
    frame: FrameType | None = sys._getframe(2)
    name, grad, mask = None, False, 0
    for _ in range(_SAMPLE_DEPTH):
        if frame is None:
            break
        if frame.f_code.co_name == "sample":
            dist = frame.f_locals.get("self")
            if isinstance(dist, Distribution):
                name = f"{type(dist).__name__}.sample"
                for value in getattr(dist, "__dict__", {}).values():  # (a class with __slots__ has none)
                    if isinstance(value, Tensor):
                        grad = grad or value.requires_grad
                        mask |= tracker.mask_of(value)
        frame = frame.f_back
    return (name, mask) if name is not None and (grad or mask) else None


@dataclass(kw_only=True, slots=True)
class EscapeReports:
    """A graph's handler of the tracker's events: warns once per source line (``warn``), raises
    in ``strict`` mode, and checks writes into node values. It holds the graph's node list, not
    the graph (the graph owns its tracker, which holds this handler: no reference cycle)."""

    nodes: list[Node]
    warn: bool
    strict: bool
    #: the (file, line) of each escape warned about already
    seen: set[tuple[str, int]] = field(default_factory=set)
    #: the nodes whose values have left tensor land so far: what the program may have branched on
    escaped: int = 0
    #: (file, line) of each escape, in the order first seen -> (the nodes whose values left
    #: there, what they left through): where the program read them (`GraphRecord.draws_read`)
    sites: dict[tuple[str, int], tuple[int, str]] = field(default_factory=dict)

    def __call__(self, kind: str, what: str, mask: int, frame: FrameType) -> None:
        where = (frame.f_code.co_filename, frame.f_lineno)
        if kind == "write":
            _check_write(self.nodes[mask], what, where)
            return
        if kind == "escape":
            self.escaped |= mask
            site = self.sites.get(where)
            self.sites[where] = (mask, what) if site is None else (site[0] | mask, site[1])
        if not (self.warn or self.strict):
            return
        names = ", ".join(f"'{self.nodes[i].name}'" for i in bits(mask) if i < len(self.nodes))
        if kind == "random":
            source = (
                f"values computed from node(s) {names}"
                if names
                else "probabilities that require grad (computed from parameters)"
            )
            msg = (
                f"{what}() at {where[0]}:{where[1]} draws from {source} "
                "outside scg.sample: the draw is not a stochastic node, so the "
                "gradient misses its dependence on the parameters (no score term). Draw it "
                "with scg.sample(dist) instead."
            )
            category: type[Warning] = UntrackedRandomnessWarning
        else:
            msg = (
                f"a value computed from node(s) {names} left tensor land through {what} at "
                f"{where[0]}:{where[1]}; scg cannot see what is computed from the resulting "
                "Python value, so costs computed from it would lose their dependency on these "
                "nodes. Keep the computation in torch, or declare the dependency with "
                "scg.influenced_by(value, *nodes)."
            )
            category = InfluenceLostWarning
        if self.strict:
            raise InfluenceLostError(msg + " (scg.Graph(strict=True))")
        if where in self.seen:
            return
        self.seen.add(where)
        warnings.warn_explicit(msg, category, where[0], where[1])


def _check_write(node: Node, what: str, where: tuple[str, int]) -> None:
    """A write into a node's value: safe when the node scored a private copy of it."""
    if isinstance(node, StochasticNode) and not node.private:
        raise SCGError(
            f"{what}() at {where[0]}:{where[1]} writes into the value of {node.describe()} "
            "in place; its log-probability (or pathwise gradient) was computed from that "
            "value, so backward would fail or be wrong. Write into a copy (value.clone())"
        )
