"""Influence tracking: which stochastic nodes a tensor was computed from, and how it lines up.

Algorithm 1 of Schulman et al. (2015) credits each stochastic node only with the costs it
*influences*. scg finds influence from data flow: while a [`Graph`][scg.Graph] is open, a
``TorchFunctionMode`` sees every torch operation and gives its outputs the union of the *direct
influence masks* of its inputs. A mask is a Python ``int`` used as a bit set; bit ``i`` stands for
node ``i`` of the graph. Masks are stored as an attribute on the tensor objects themselves, under a
name private to the graph, so there is no global table and a tensor from another graph is ignored.

Why this is exact where autograd is not: a discrete sample has no ``grad_fn`` and influences its
consumers through indexing, ``gather``, ``one_hot`` and comparisons; a comparison of a continuous
sample (``x > 0``) has no ``grad_fn`` either. The mode sees all of these, and also ``detach()`` and
operations under ``torch.no_grad()``: influence is data flow, not differentiability.

Each stochastic (or named deterministic) node *resets* the mask of its value to its own bit and
records the mask its value was computed from as its direct parents. The full influence relation is
the transitive closure of these direct edges (`scg.graph.masks.closure`), computed once per surrogate.

What else the mode records (each documented in ``docs/tracking.md``):

* **Positions** (`scg.graph.positions`): per tensor, the first leading position that no
  longer lines up with each node's dimensions, so that per-example credit is verified, not
  guessed from shapes.
* **Writes through aliases**: an in-place write also records its mask on the written *storage*,
  so every alias of it (a view taken before the write, a sibling view, ``.data``, ``.detach()``,
  ``out=`` into a slice) carries the influence when it is read.
* **Escapes**: any torch call on a tracked value that returns a non-tensor (``.item()``,
  ``bool()``, ``x in z``, ``torch.equal``, ``np.asarray``, f-strings, ``__dlpack__``, ...) and any
  read of a data-dependent shape (``len(z.nonzero())``, ``z[z > 0].shape``) is reported to the
  graph, which warns with `InfluenceLostWarning` (raises in strict mode).
* **Hidden randomness**: ``torch.bernoulli``/``multinomial``/``normal``/``Distribution.sample()``
  on tracked values outside ``scg.sample`` is reported (the draw is not a stochastic node).
* **Writes into a node's value** are reported to the graph (which checks that it is safe).
* **Gradient breaks**: per tensor, the pathwise nodes whose influence reached it through an
  operation autograd does not differentiate (checked against the costs by
  `scg.credit.soundness.check_pathwise`).
* **One output per argument** (``broadcast_tensors``, ``atleast_*d``, ``meshgrid``): output k
  takes argument k's influence only.

Escapes inside torch's own code (argument validation in ``torch.distributions``) are not reported.
"""

from __future__ import annotations

import inspect
import sys
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch
from torch._C import _are_functorch_transforms_active as _transforms_active
from torch._C import _functorch
from torch._C import _is_torch_function_mode_enabled as _modes_on
from torch.compiler import is_dynamo_compiling as _dynamo_compiling
from torch.overrides import TorchFunctionMode

from scg.errors import SCGError
from scg.graph import positions
from scg.graph.aliases import Derived, adopt, geometry
from scg.graph.ops import (
    ESCAPES,
    F_COPY,
    F_DYNAMIC,
    F_ELEMENTWISE,
    F_GETITEM,
    F_METADATA,
    F_MUTATES,
    F_PAIRED,
    F_RANDOM,
    F_SHAPE,
    F_ZERO_GRAD,
    INFO,
    bool_index,
    flat_tensors,
    is_tensor_result,
    outside_libraries,
    user_frame,
)
from scg.graph.ops import info as op_info
from scg.graph.positions import INF
from scg.graph.sample_positions import follow

__all__ = ["ESCAPES", "InfluenceTracker"]

Tensor = torch.Tensor


def storage_key(t: Tensor) -> int:
    """An identifier of ``t``'s storage (0 when it has none, or is empty)."""
    try:
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, TypeError):
        return 0


Handler = Callable[[str, str, int, FrameType], None]

_COMPILED = (
    "torch.compile traced a function called inside a tracked scg.Graph: tracking watches every "
    "torch call through a torch function mode, which dynamo cannot trace. To compile it, run "
    "the graph with "
    "scg.Graph(structure=scg.Declared(...)) (no mode is pushed; check the declaration with "
    "scg.testing.check_structure), or call the compiled function outside the graph's block"
)


_PRODUCTS = frozenset({"mul", "mul_", "multiply", "__mul__", "__rmul__", "__imul__"})


def _draw_loses_grad(name: str, args: tuple[Any, ...], out: Any) -> bool:
    """A random draw from probabilities that require grad (``torch.multinomial(softmax(θ))``,
    ``Categorical(logits=θ).sample()``, which expands θ under ``no_grad``) whose result does not:
    its dependence on θ has no gradient. (``randn_like(x)`` reads only ``x``'s shape.)"""
    if name.endswith("_like") or (isinstance(out, Tensor) and out.requires_grad):
        return False
    for a in args:
        if isinstance(a, Tensor) and (a.requires_grad or (a._base is not None and a._base.requires_grad)):
            return True
    return False


class InfluenceTracker(TorchFunctionMode):
    """Propagates influence masks (and positions) through every torch operation of a graph.

    Args:
        attr: attribute name under which masks are stored (unique per graph).
        on_event: called as ``on_event(kind, what, mask, frame)`` with ``kind`` one of
            ``"escape"``, ``"random"``, ``"write"`` (a write into a node's value; ``mask`` is then
            the node's index). A bound method is held weakly (the graph owns its tracker, so a
            strong reference back would make every graph a reference cycle that only the cyclic
            garbage collector frees, keeping its nodes' tensors alive until it runs).
    """

    def __init__(self, attr: str, on_event: Handler):
        super().__init__()
        self.attr = attr
        self.fattr = attr + "_f"  # foreign positions: dict position -> mask
        self.dattr = attr + "_d"  # data-dependent shape: mask of the nodes it depends on
        #: storage key -> (mask written into it, a reference keeping the storage alive)
        self.storages: dict[int, tuple[int, Tensor]] = {}
        #: storage key -> node index, for node values
        self.node_storages: dict[int, int] = {}
        #: storage key -> (mask, the first value, kept alive so that the storage's address is not
        #: reused), for tracked outputs that do not require grad and casts and copies of tracked
        #: values (``nn.Parameter(z * 2)``, ``nn.Parameter(h.float())`` alias one:
        #: scg.graph.aliases); filled from ``pending`` (the outputs in the order they were made)
        #: only when an alias is looked up or before an in-place operation: most graphs never
        #: look one up, and reading a storage's address costs more than the operation's record
        self.derived: dict[int, Derived] = {}
        self.pending: list[tuple[Tensor, int]] = []
        #: node index -> (shape, strides, offset) of its value (scg.graph.aliases)
        self.node_geometry: dict[int, tuple[tuple[int, ...], tuple[int, ...], int]] = {}
        self.drawing = 0  # > 0 while scg.sample draws (its own randomness is not hidden)
        #: the largest number of dimensions of a node's value: a foreign position at or beyond
        #: it can never be compared with a node's dimensions (the bits of a mask are existing
        #: nodes), so it is dropped, which keeps most tensors free of foreign maps
        self.max_dim = 0
        self.any_dynamic = False
        self.sattr = attr + "_s"  # sample dimensions: node -> dim (scg.graph.sample_positions)
        self.sample_dims = False  # True once a node has a sample dimension
        #: gradient breaks (``docs/tracking.md``): the nodes whose value requires grad (pathwise
        #: samples), and per tensor, under ``battr``, the mask of those whose influence reached it
        #: through an operation autograd does not differentiate (a comparison, ``round``, an
        #: integer cast, ``detach``, ``torch.no_grad``)
        self.grad_nodes = 0
        self.battr = attr + "_b"
        self.breaks = False  # True once a tensor carries a break
        self._on_event: Callable[[], Handler | None]
        if inspect.ismethod(on_event):
            self._on_event = weakref.WeakMethod(on_event)
        else:
            self._on_event = lambda: on_event

    # ------------------------------------------------------------------ helpers for the graph
    def mask_of(self, t: Tensor) -> int:
        """The tensor's mask, including what was written into its storage through an alias."""
        m: int = getattr(t, self.attr, 0)
        if self.storages:
            got = self.storages.get(storage_key(t))
            if got is not None:
                m |= got[0]
        if not m and self.node_storages:
            if _modes_on():  # scg's own call in the open graph: adopt's reads bypass the modes
                with torch._C.DisableTorchFunction():
                    return adopt(self, t)  # nn.Parameter(z), z.as_subclass(C): no torch call was seen
            m = adopt(self, t)
        return m

    def foreign_of(self, t: Tensor) -> dict[int, int]:
        """The tensor's foreign positions (bits only known through its storage: from 0)."""
        fr: dict[int, int] = dict(getattr(t, self.fattr, None) or {})
        if self.storages:
            got = self.storages.get(storage_key(t))
            if got is not None:
                extra = got[0] & ~getattr(t, self.attr, 0)
                if extra:
                    positions.merge(fr, 0, extra)
        return fr

    def broken(self, t: Tensor) -> int:
        """The mask of the pathwise nodes whose influence reached ``t`` through at least one
        operation that autograd does not differentiate (a *gradient break*)."""
        return int(getattr(t, self.battr, 0))

    def register_node_value(self, value: Tensor, index: int) -> None:
        with torch._C.DisableTorchFunction():  # (metadata reads: not through this tracker)
            if value.requires_grad:
                self.grad_nodes |= 1 << index
            elif self.breaks and self.broken(value):
                setattr(value, self.battr, 0)  # a score-function draw: its score term carries it
            key = storage_key(value)
            if key:
                self.node_storages[key] = index
                self.node_geometry[index] = geometry(value)

    def _emit(self, kind: str, what: str, mask: int, frame: FrameType) -> None:
        handler = self._on_event()
        if handler is not None:
            handler(kind, what, mask, frame)

    # ------------------------------------------------------------------ the mode
    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if _dynamo_compiling():  # dynamo traces this mode (a graph break, so that the error
            torch._dynamo.graph_break()  # below is raised, not traced)
            raise SCGError(_COMPILED)
        known = INFO.get(func)
        if known is None:
            known = op_info(func)
        name, rule, flags = known
        if self.pending and (flags & F_MUTATES or name == "__set__"):
            self._record_derived()  # (before the operation can move a value to another storage)
        out = func(*args, **kwargs) if kwargs else func(*args)
        if flags & F_METADATA and not (flags & F_SHAPE and self.any_dynamic):
            return out  # t.shape, t.dim(), t.dtype, ...: not data flow
        attr = self.attr
        storages = self.storages
        node_storages = self.node_storages
        m = 0
        tracked: list[tuple[int, Tensor, int]] = []
        aliased = False  # an input carries nodes known only through its storage (an alias was written)
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                am = getattr(a, attr, 0)
                if storages:
                    got = storages.get(storage_key(a))
                    if got is not None:
                        if got[0] & ~am:
                            aliased = True
                        am |= got[0]
                if not am and node_storages and (type(a) is not Tensor or a._base is not None):
                    am = adopt(self, a)  # nn.Parameter(z), z.as_subclass(C) (scg.graph.aliases)
                if am:
                    m |= am
                    tracked.append((i, a, am))
            elif isinstance(a, (list, tuple)) and a:
                for b in a:
                    if isinstance(b, Tensor):
                        bm = self.mask_of(b)
                        if bm:
                            m |= bm
                            tracked.append((i, b, bm))
                            aliased = aliased or bool(storages)  # (not told apart here)
        if kwargs:
            for a in kwargs.values():
                if isinstance(a, Tensor):
                    am = self.mask_of(a)
                    if am:
                        m |= am
                        tracked.append((-1, a, am))
                        aliased = aliased or bool(storages)
        if not m:
            if flags & F_RANDOM and not self.drawing and _draw_loses_grad(name, args, out):
                self._random(name, 0)  # Categorical(logits=theta).sample(): no score term
            if _transforms_active():
                self._check_transform(args, kwargs)
            return out
        if _transforms_active():  # a tracked value captured inside vmap/grad/jacrev
            self._escape(
                "a torch.func transform (vmap, grad, jacrev: scg does not follow values inside it)", m, library_ok=True
            )
        if type(out) is not Tensor and not is_tensor_result(out):
            if flags & F_METADATA:
                if flags & F_SHAPE and self.any_dynamic:
                    dm = 0
                    for _, a, _ in tracked:
                        dm |= getattr(a, self.dattr, 0)
                    if dm:
                        self._escape(f"Tensor.{name} of a data-dependent shape", dm)
                return out
            if func not in ESCAPES and isinstance(out, (list, tuple)) and not out:
                return out
            self._escape(f"Tensor.{name}()" if name else str(func), m)
            return out
        if flags & F_RANDOM and not self.drawing:
            self._random(name, m)
        written = kwargs.get("out") if kwargs else None
        if flags & F_MUTATES and args and isinstance(args[0], Tensor):
            written = args[0]
        if self.breaks or (
            m & self.grad_nodes
            and (flags & F_ZERO_GRAD or written is not None or type(out) is not Tensor or not out.requires_grad)
        ):  # (no break yet, and an output that autograd connects to its inputs: none to add)
            self._breaks(name, flags, args, out, written, tracked)
        if type(out) is Tensor and (flags & F_COPY or not out.requires_grad) and out is not written:
            self.pending.append((out, m))  # (see ``derived``)
        if isinstance(written, Tensor) and out is not written:
            self._propagate(func, name, rule, flags, args, kwargs, written, m, tracked, aliased)
        if args and out is args[0] and written is None and not flags & F_MUTATES and not name.startswith("__i"):
            return out  # the argument returned as it is (x.type_as(y), x.to(y)): unchanged
        if type(out) is Tensor:
            if (
                flags & F_ELEMENTWISE
                and written is None
                and not self.any_dynamic
                and not aliased
                and not self.sample_dims
            ):
                fattr = self.fattr
                oshape = out.shape
                shared = None
                for _, a, _ in tracked:
                    afr = getattr(a, fattr, None)
                    if a.shape != oshape or (afr is not None and shared is not None and afr is not shared):
                        break
                    if afr is not None:
                        shared = afr
                else:  # the common case: same shapes, at most one foreign map (shared, immutable)
                    setattr(out, attr, getattr(out, attr, 0) | m)
                    if shared is not None:
                        setattr(out, fattr, shared)
                    return out
            self._propagate(func, name, rule, flags, args, kwargs, out, m, tracked, aliased)
        elif flags & F_PAIRED:
            self._paired(func, name, rule, flags, args, kwargs, out)
        else:
            for o in flat_tensors(out):
                self._propagate(func, name, rule, flags, args, kwargs, o, m, tracked, aliased)
        if isinstance(written, Tensor):
            self._written(written, m, name)
        return out

    def derived_at(self, key: int) -> Derived | None:
        """The tracked values recorded in the storage ``key`` (see ``derived``)."""
        if self.pending:
            self._record_derived()
        return self.derived.get(key)

    def _record_derived(self) -> None:
        """Move ``pending`` into ``derived`` (before an alias is looked up, and before an in-place
        operation could move a pending value to another storage)."""
        derived = self.derived
        with torch._C.DisableTorchFunction():  # (scg's own reads: not through the tracker)
            for out, m in self.pending:
                key = storage_key(out)
                if key:
                    got = derived.get(key)
                    if got is None:  # (the first value of a storage is its whole, most often)
                        derived[key] = Derived(m, out, True)
                    elif m & ~got.mask:
                        derived[key] = Derived(got.mask | m, got.value, False)
        self.pending.clear()

    def _breaks(
        self,
        name: str,
        flags: int,
        args: tuple[Any, ...],
        out: Any,
        written: Tensor | None,
        tracked: list[tuple[int, Tensor, int]],
    ) -> None:
        """Carry the inputs' gradient breaks to the outputs, and add one where a pathwise
        node's influence enters an output that autograd does not connect to it. (A product
        with the number 0 carries nothing: ``relu(x) + (x > 0) * 0`` has no broken part.)"""
        if name in _PRODUCTS and any(type(a) in (int, float) and a == 0 for a in args):
            return
        battr = self.battr
        carried = 0
        grad_in = 0
        grad_nodes = self.grad_nodes
        for _, a, am in tracked:
            carried |= getattr(a, battr, 0)
            if am & grad_nodes and a.requires_grad:
                grad_in |= am & grad_nodes
        if not (carried or grad_in):
            return  # no break to carry, no pathwise input whose gradient could be cut
        outs = [out] if type(out) is Tensor else flat_tensors(out)
        if isinstance(written, Tensor) and written is not out:
            outs.append(written)
        for o in outs:
            nb = carried
            if grad_in and (flags & F_ZERO_GRAD or not o.requires_grad):
                nb |= grad_in
            if nb:
                setattr(o, battr, getattr(o, battr, 0) | nb)
                self.breaks = True

    def _paired(
        self,
        func: Callable[..., Any],
        name: str,
        rule: positions.Rule | None,
        flags: int,
        args: tuple[Any, ...],
        kwargs: dict[str, Any] | None,
        out: Any,
    ) -> None:
        """``broadcast_tensors(a, b)``, ``atleast_1d(a, b)``, ``meshgrid(a, b)``: output k is
        computed from tensor argument k alone (with equal shapes ``broadcast_tensors`` returns
        the arguments themselves, which must not take each other's influence)."""
        inputs = [
            a for arg in args for a in (arg if isinstance(arg, (list, tuple)) else (arg,)) if isinstance(a, Tensor)
        ]
        outputs = flat_tensors(out)
        if len(inputs) != len(outputs):
            m = 0
            tracked = []
            for k, a in enumerate(inputs):
                am = self.mask_of(a)
                if am:
                    m |= am
                    tracked.append((k, a, am))
            for o in outputs:
                self._propagate(func, name, rule, flags, args, kwargs, o, m, tracked, bool(self.storages))
            return
        for k, (a, o) in enumerate(zip(inputs, outputs)):
            if o is not a:  # (an input returned as it is keeps its own marks)
                am = self.mask_of(a)
                if am:
                    self._propagate(func, name, rule, flags, args, kwargs, o, am, [(k, a, am)], bool(self.storages))

    def _propagate(
        self,
        func: Callable[..., Any],
        name: str,
        rule: positions.Rule | None,
        flags: int,
        args: tuple[Any, ...],
        kwargs: dict[str, Any] | None,
        o: Tensor,
        m: int,
        tracked: list[tuple[int, Tensor, int]],
        aliased: bool,
    ) -> None:
        """Mark output ``o`` with ``m`` and its foreign positions (``aliased``: an input may carry
        nodes known only through its storage, which are foreign from position 0)."""
        if self.sample_dims:
            follow(self.sattr, func, name, rule, args, kwargs, o, tracked)
        attr, fattr = self.attr, self.fattr
        setattr(o, attr, getattr(o, attr, 0) | m)
        fr: dict[int, int] | None = None
        if args and o is args[0]:
            old = getattr(o, fattr, None)
            fr = dict(old) if old else None
        limit = self.max_dim
        elementwise = flags & F_ELEMENTWISE
        if fr is None and len(tracked) == 1 and not aliased:
            # one tracked input (the common case): its foreign position once, its map carried
            pos, a, am = tracked[0]
            afr = getattr(a, fattr, None)
            if elementwise and a.shape == o.shape:
                f = INF
            else:
                f = positions.foreign_from(positions.rule_prefix(func, name, rule, args, kwargs, a, o, pos), a, o)
            if f >= limit:  # positions kept: the input's map is the output's (shared, immutable)
                if afr is not None or getattr(o, fattr, None) is not None:
                    setattr(o, fattr, afr)
            else:
                fr = {f: am}
                if afr:
                    for q, qm in afr.items():
                        q = q if q < f else f
                        fr[q] = fr.get(q, 0) | qm
                    if len(fr) > 1:
                        fr = positions.normalize(fr)
                setattr(o, fattr, fr)
            if flags & (F_DYNAMIC | F_GETITEM) or self.any_dynamic:
                self._dynamic(flags, args, o, m, tracked)
            return
        oshape = o.shape
        for pos, a, am in tracked:
            afr = getattr(a, fattr, None)
            if elementwise and a.shape == oshape:
                f = INF  # same shape, positions kept: nothing new
            else:
                p = positions.rule_prefix(func, name, rule, args, kwargs, a, o, pos)
                f = positions.foreign_from(p, a, o)
                if f >= limit:
                    f = INF
            if f < INF:
                if fr is None:
                    fr = {}
                fr[f] = fr.get(f, 0) | am
            if aliased:  # (whatever the rule: the layout of what an alias wrote is not known)
                extra = am & ~getattr(a, attr, 0)  # known only through an alias of its storage
                if extra:
                    if fr is None:
                        fr = {}
                    q = positions.foreign_from(0, a, o)
                    fr[q] = fr.get(q, 0) | extra
            if afr:
                if fr is None:
                    fr = {}
                for q, qm in afr.items():
                    q = q if q < f else f
                    fr[q] = fr.get(q, 0) | qm
        if fr:
            fr = {q: qm for q, qm in positions.normalize(fr).items() if q < limit}
        if fr or getattr(o, fattr, None) is not None:
            setattr(o, fattr, fr or None)
        if flags & (F_DYNAMIC | F_GETITEM) or self.any_dynamic:
            self._dynamic(flags, args, o, m, tracked)

    def _dynamic(
        self, flags: int, args: tuple[Any, ...], o: Tensor, m: int, tracked: list[tuple[int, Tensor, int]]
    ) -> None:
        """Mark outputs whose shape depends on sampled values (and what is computed from them)."""
        if flags & F_DYNAMIC or (flags & F_GETITEM and bool_index(args)):
            self.any_dynamic = True
            setattr(o, self.dattr, m)
        elif self.any_dynamic:
            dm = 0
            for _, a, _ in tracked:
                dm |= getattr(a, self.dattr, 0)
            if dm:
                setattr(o, self.dattr, dm)

    def _written(self, target: Tensor, m: int, name: str) -> None:
        """An in-place write: the storage, and every alias of it, now carries ``m``."""
        key = storage_key(target)
        if not key:
            return
        node = self.node_storages.get(key)
        if node is not None and not self.drawing:
            frame, _ = user_frame(sys._getframe(2))
            if frame is not None:
                self._emit("write", name, node, frame)
        old = self.storages.get(key)
        self.storages[key] = ((old[0] if old else 0) | m, target)
        base = target._base
        if base is not None:
            setattr(base, self.attr, getattr(base, self.attr, 0) | m)

    def _check_transform(self, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
        """Inside ``torch.func.vmap/grad/jacrev`` tensors are wrapped in new objects, so their
        masks are not seen: report a tracked value found under the wrapper."""
        m = 0
        for a in (*args, *(kwargs or {}).values()):
            while isinstance(a, Tensor) and _functorch.is_functorch_wrapped_tensor(a):
                a = _functorch.get_unwrapped(a)
            if isinstance(a, Tensor):
                m |= self.mask_of(a)
        if m:
            self._escape(
                "a torch.func transform (vmap, grad, jacrev: scg does not follow values inside it)", m, library_ok=True
            )

    def _escape(self, what: str, m: int, library_ok: bool = False) -> None:
        if library_ok:
            frame: FrameType | None = outside_libraries(sys._getframe(2))
            library = False
        else:
            frame, library = user_frame(sys._getframe(2))
        if frame is not None and not library:
            self._emit("escape", what, m, frame)

    def _random(self, name: str, m: int) -> None:
        frame = outside_libraries(sys._getframe(2))
        if frame is not None:
            self._emit("random", name, m, frame)
