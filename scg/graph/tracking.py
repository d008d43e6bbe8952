"""Influence tracking: which stochastic nodes a tensor was computed from, and how it lines up.

Algorithm 1 of Schulman et al. (2015) credits each stochastic node only with the costs it
*influences*. scg finds influence from data flow: while a [`Graph`][scg.Graph] is open, a
``TorchFunctionMode`` sees every torch operation and gives its outputs the union of the *direct
influence masks* of its inputs. A mask is a Python ``int`` used as a bit set; bit ``i`` stands for
node ``i`` of the graph. Masks are stored as an attribute on the tensor objects themselves, under a
name private to the graph, so there is no global table and a tensor from another graph is ignored.
The marks a tensor carries, the tables the tracker keeps per storage and the reading of both are
`scg.graph.marks` (the tracker's base class); this module is the mode that sets them.

Why this is exact where autograd is not: a discrete sample has no ``grad_fn`` and influences its
consumers through indexing, ``gather``, ``one_hot`` and comparisons; a comparison of a continuous
sample (``x > 0``) has no ``grad_fn`` either. The mode sees all of these, and also ``detach()`` and
operations under ``torch.no_grad()``: influence is data flow, not differentiability.

Each stochastic (or named deterministic) node *resets* the mask of its value to its own bit and
records the mask its value was computed from as its direct parents. The full influence relation is
the transitive closure of these direct edges (`scg.graph.masks.closure`), computed once per surrogate.

What else the mode records (each documented in ``docs/tracking.md``), and where:

* **Positions** (`scg.graph.propagate`, by the rules of `scg.graph.positions`): per tensor, the
  first leading position that no longer lines up with each node's dimensions, so that
  per-example credit is verified, not guessed from shapes; and the data-dependent shapes.
* **Writes through aliases** (`scg.graph.writes`): an in-place write also records its mask on the written
  *storage*, so every alias of it (a view taken before the write, a sibling view, ``.data``,
  ``.detach()``, ``out=`` into a slice) carries the influence when it is read; aliases torch makes
  without a torch call are `scg.graph.aliases`.
* **Escapes**, **hidden randomness** and **writes into a node's value** (`scg.graph.escapes`):
  reported to the graph, which warns with `InfluenceLostWarning` (raises in strict mode) or
  refuses the write.
* **Gradient breaks** (`scg.graph.breaks`): per tensor, the pathwise nodes whose influence reached
  it through an operation autograd does not differentiate (checked against the costs by
  `scg.credit.soundness.check_pathwise`).
* **One output per argument** (``broadcast_tensors``, ``atleast_*d``, ``meshgrid``,
  `scg.graph.propagate.paired_inputs`): output k takes argument k's influence only.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import is_
from typing import Any

import torch
from torch._C import _are_functorch_transforms_active as _transforms_active
from torch._C import _get_function_stack_at, _len_torch_function_stack, _pop_torch_function_stack
from torch._C import _push_on_torch_function_stack as _push_function_mode
from torch.compiler import is_dynamo_compiling as _dynamo_compiling
from torch.overrides import TorchFunctionMode

from scg.errors import SCGError
from scg.graph.aliases import adopt
from scg.graph.breaks import carry_breaks
from scg.graph.escapes import (
    TRANSFORM,
    check_transform,
    draw_loses_grad,
    hidden_sample,
    report_escape,
    report_random,
)
from scg.graph.marks import Marks
from scg.graph.ops import (
    ESCAPES,
    F_COPY,
    F_ELEMENTWISE,
    F_GRADIENTS,
    F_METADATA,
    F_MUTATES,
    F_NESTED_READ,
    F_OTHERS_META,
    F_PAIRED,
    F_RANDOM,
    F_RUNNING_STATS,
    F_SELF_META,
    F_SET,
    F_SHAPE,
    F_ZERO_GRAD,
    INFO,
    flat_tensors,
    is_tensor_result,
    running_statistics,
    slice_tensors,
)
from scg.graph.ops import info as op_info
from scg.graph.propagate import mark_opaque, nested_involved, paired_inputs, propagate
from scg.graph.writes import assign_data, mark_running, record_write, storage_key

__all__ = ["InfluenceTracker", "Paused", "mask_attribute"]

Tensor = torch.Tensor
Size = torch.Size


def mask_attribute(graph: int) -> str:
    """The tensor attribute under which the tracker of graph ``graph`` (its id) stores a value's
    mask: the stochastic nodes of that graph the value was computed from, one bit per node index."""
    return f"_scg_mask_{graph}"


_COMPILED = (
    "torch.compile traced a function called inside a tracked scg.Graph (or torch.cond, "
    "torch.while_loop, a higher-order op that compiles its branches): tracking watches every "
    "torch call through a torch function mode, which dynamo cannot trace. To compile it, run "
    "the graph with "
    "scg.Graph(structure=scg.Declared(...)) (no mode is pushed; check the declaration with "
    "scg.testing.check_structure), or call the compiled function outside the graph's block"
)


def _returned_as_given(args: tuple[Any, ...], out: Any) -> bool:
    """Whether a one-output-per-argument call (``broadcast_tensors``, ``atleast_1d``) returned
    its tensor arguments themselves, in order (inside ``torch.distributions``' constructors, the
    common case): nothing to mark."""
    inputs = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
    if not isinstance(out, (list, tuple)) or len(out) != len(inputs):
        return False
    return all(map(is_, inputs, out))


class InfluenceTracker(Marks, TorchFunctionMode):
    """Propagates influence masks (and positions) through every torch operation of a graph: sets
    the marks and tables of `scg.graph.marks.Marks` (made as it is:
    ``InfluenceTracker(attr, on_event)``) for each torch call.
    """

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if _dynamo_compiling():  # dynamo traces this mode (a graph break, so that the error
            torch._dynamo.graph_break(msg=_COMPILED)  # below is raised, not traced; torch.cond, which
            # allows no graph break, fails in torch naming the message)
            raise SCGError(_COMPILED)
        known = INFO.get(func)
        if known is None:
            known = op_info(func)
        name, rule, flags = known
        if flags & _MOVES:  # (an in-place op, a descriptor's __set__: one test on the common path)
            if self.pending:
                self._record_derived()  # (before the operation can move a value to another storage)
            out = func(*args, **kwargs) if kwargs else func(*args)
            if flags & F_SET and getattr(getattr(func, "__self__", None), "__name__", "") == "data":
                assign_data(self, args[0], args[1])  # ``t.data = v``: t is now v's data, with its marks
                return out
        else:
            out = func(*args, **kwargs) if kwargs else func(*args)
        if flags & F_METADATA and not (flags & F_SHAPE and self.any_dynamic):
            if flags & F_GRADIENTS:
                self._gradients(func, name, args, kwargs, out)
            return out  # t.shape, t.dim(), t.dtype, ...: not data flow
        if flags & F_PAIRED and _returned_as_given(args, out) and not _transforms_active():
            return out  # broadcast_tensors(x) of tensors of one shape: each keeps its own marks
        attr = self.attr
        storages = self.storages
        node_storages = self.node_storages
        m = 0
        tracked: list[tuple[int, Tensor, int]] = []
        aliased = False  # an input carries nodes known only through its storage (an alias was written)
        read, start, read_kwargs = args, 0, True  # the arguments whose values the operation reads
        if flags & _META_ARGS and not self.any_dynamic:
            # (``ops._SELF_META`` and ``_OTHERS_META``: the first argument, or every one after it,
            # is read for its metadata only; all are read once a shape depends on sampled values,
            # which such an argument's shape can carry to the output: ``x.view_as(y)``)
            if flags & F_SELF_META:
                read, start = args[1:], 1
            else:
                read, read_kwargs = args[:1], False
        for i, a in enumerate(read, start):
            if isinstance(a, Tensor):
                am = getattr(a, attr, 0)
                if storages:
                    key = storage_key(a)
                    got = storages.get(key)
                    if got is not None:
                        if got[0] & ~am or self.stale_mixed(a, key):
                            aliased = True
                        am |= got[0]
                if not am and node_storages and (type(a) is not Tensor or a._base is not None):
                    am = adopt(self, a)  # nn.Parameter(z), z.as_subclass(C) (scg.graph.aliases)
                if am:
                    m |= am
                    tracked.append((i, a, am))
            elif isinstance(a, (list, tuple, slice)) and a and type(a) is not Size:  # (a Size holds ints only)
                # (a slice's tensor bounds, x[: n + 1], decide which elements and how many: read)
                for b in a if isinstance(a, (list, tuple)) and name not in _INDEXING else _index_items(a):
                    if isinstance(b, Tensor):
                        bm = self.mask_of(b)
                        if bm:
                            m |= bm
                            tracked.append((i, b, bm))
                            aliased = aliased or bool(storages)  # (not told apart here)
                    elif isinstance(b, (list, tuple)) and b:  # torch.tensor([[z[0]], [z[1]]])
                        m, aliased = self._nested(b, i, m, tracked, aliased)
        if kwargs and read_kwargs:
            for a in kwargs.values():
                if not isinstance(a, _HOLDERS):
                    continue  # (None, a number, a string, a dtype: one check for the common keywords)
                if isinstance(a, Tensor):
                    am = self.mask_of(a)
                    if am:
                        m |= am
                        tracked.append((-1, a, am))
                        aliased = aliased or bool(storages)
                elif a:  # torch.cat(tensors=[...]), indices=(i,)
                    m, aliased = self._nested(a, -1, m, tracked, aliased)
        if not m:
            if flags & F_NESTED_READ and node_storages and args and isinstance(args[0], Tensor) and args[0].is_nested:
                # (torch.nested.nested_tensor copies its tensors without a torch call: what it
                # holds is not known, so every node drawn so far is taken to influence it)
                mark_opaque(self, out, self._drawn(), [])
                return out
            if flags & F_RANDOM and not self.drawing:
                if draw_loses_grad(name, args, out):
                    report_random(self, name, 0)  # Categorical(logits=theta).sample(): no score term
                else:
                    hidden = hidden_sample(self)  # Exponential(rate=theta).sample(): noise, then theta
                    if hidden is not None:
                        report_random(self, hidden[0], hidden[1])
            if _transforms_active():
                check_transform(self, args, kwargs)
            return out
        if _transforms_active():  # a tracked value captured inside vmap/grad/jacrev
            report_escape(self, TRANSFORM, m, library_ok=True)
        plain = type(out) is Tensor  # (a plain tensor result: the common case, tested once)
        if not plain and not is_tensor_result(out):
            if flags & F_METADATA:
                if flags & F_SHAPE and self.any_dynamic:
                    dm = 0
                    for _, a, _ in tracked:
                        dm |= getattr(a, self.dattr, 0)
                    if dm:
                        report_escape(self, f"Tensor.{name} of a data-dependent shape", dm)
                return out
            if func not in ESCAPES and isinstance(out, (list, tuple)) and not out:
                return out
            report_escape(self, f"Tensor.{name}()" if name else str(func), m)
            return out
        if flags & _RANDOM_OR_STATS:
            if flags & F_RANDOM and not self.drawing:
                report_random(self, name, m)
            if flags & F_RUNNING_STATS:  # (running statistics updated inside torch's kernel: no write is seen)
                for buffer in running_statistics(func, args, kwargs):
                    mark_running(self, buffer, m)
        written = kwargs.get("out") if kwargs else None
        if flags & F_MUTATES and args and isinstance(args[0], (Tensor, list, tuple)):
            written = args[0]  # (a list: torch._foreach_add_([a, b], ...) writes each of them)
        try:
            if self.breaks or (
                m & self.grad_nodes
                and (flags & F_ZERO_GRAD or written is not None or not plain or not out.requires_grad)
            ):  # (no break yet, and an output that autograd connects to its inputs: none to add)
                carry_breaks(self, name, flags, args, out, written, tracked)
            if written is None:  # (the common case: nothing written in place)
                if plain and (flags & F_COPY or not out.requires_grad):
                    self.pending.append((out, m))  # (see ``derived``)
                if args and out is args[0] and not flags & F_MUTATES and not name.startswith("__i"):
                    return out  # the argument returned as it is (x.type_as(y), x.to(y)): unchanged
            else:
                if plain and (flags & F_COPY or not out.requires_grad) and out is not written:
                    self.pending.append((out, m))  # (see ``derived``)
                if isinstance(written, Tensor) and out is not written:
                    propagate(self, func, name, rule, flags, args, kwargs, written, m, tracked, aliased)
            if plain:
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
                propagate(self, func, name, rule, flags, args, kwargs, out, m, tracked, aliased)
            elif flags & F_PAIRED:
                for o, om, otracked in paired_inputs(self, args, out):  # (output k from argument k)
                    propagate(self, func, name, rule, flags, args, kwargs, o, om, otracked, bool(self.storages))
            else:
                for o in flat_tensors(out):
                    propagate(self, func, name, rule, flags, args, kwargs, o, m, tracked, aliased)
            if written is not None:
                if isinstance(written, Tensor):
                    record_write(self, written, m, name)
                elif isinstance(written, (tuple, list)):  # out=(values, indices), _foreach_*_: each one written
                    for w in written:
                        if isinstance(w, Tensor):
                            record_write(self, w, m, name)
        except RuntimeError:
            if not nested_involved(out, tracked):
                raise
            if any(isinstance(a, Tensor) and a.is_nested and not self.mask_of(a) for a in args):
                m |= self._drawn()  # (a nested tensor torch.nested.nested_tensor made: see below)
            mark_opaque(self, out, m, tracked)  # (a strided nested tensor has no sizes to place)
        return out

    def _nested(
        self, items: list[Any] | tuple[Any, ...], i: int, m: int, tracked: list[tuple[int, Tensor, int]], aliased: bool
    ) -> tuple[int, bool]:
        """The tracked tensors of a list or tuple argument at any depth (a keyword's, or one inside
        a positional list: ``torch.tensor([[z[0]], [z[1]]])``, ``D[:, [i, j]]``), added to
        ``tracked`` as argument ``i``: the mask with theirs and the ``aliased`` flag."""
        for b in items:
            if isinstance(b, Tensor):
                bm = self.mask_of(b)
                if bm:
                    m |= bm
                    tracked.append((i, b, bm))
                    aliased = aliased or bool(self.storages)  # (not told apart here)
            elif isinstance(b, (list, tuple)) and b:
                m, aliased = self._nested(b, i, m, tracked, aliased)
            elif isinstance(b, slice):  # (an index's slice bounds)
                m, aliased = self._nested(slice_tensors(b), i, m, tracked, aliased)
        return m, aliased

    def _gradients(
        self, func: Callable[..., Any], name: str, args: tuple[Any, ...], kwargs: dict[str, Any] | None, out: Any
    ) -> None:
        """Gradients computed inside the graph (autograd's engine runs no torch call the tracker
        sees): ``torch.autograd.grad(outputs, inputs, grad_outputs)`` gives its results the
        influence of every tensor it is given, and ``backward`` records that of its tensors in
        ``grads``, which a ``.grad`` read afterwards takes (a leaf's gradient accumulates from
        every backward: which leaves one reaches is not looked up). Whole-plate (foreign from 0)."""
        if name == "grad" and func is not torch.autograd.grad:  # the ``.grad`` getter
            if self.grads and isinstance(out, Tensor):
                mark_opaque(self, out, self.grads, [])
            return
        tracked: list[tuple[int, Tensor, int]] = []
        m, _ = self._nested((*args, *(kwargs or {}).values()), 0, 0, tracked, False)
        if not m:
            return
        if name == "backward":
            self.grads |= m
        else:
            mark_opaque(self, out, m, tracked)


class Paused:
    """Pops ``tracker`` off torch's function-mode stack for a block, if it is on top.

    (A class, not a ``contextlib.contextmanager``: it runs for every ``scg.sample`` and ``scg.cost``,
    where a generator-based context manager costs more than the sampling itself.)
    """

    __slots__ = ("popped", "tracker")

    def __init__(self, tracker: InfluenceTracker | None) -> None:
        self.tracker = tracker
        self.popped = False

    def __enter__(self) -> None:
        n = _len_torch_function_stack()
        if n and self.tracker is not None and _get_function_stack_at(n - 1) is self.tracker:
            _pop_torch_function_stack()  # (torch.overrides._pop_mode without its Python frame)
            self.popped = True

    def __exit__(self, *exc: object) -> None:
        if self.popped:
            _push_function_mode(self.tracker)
            self.popped = False


#: flag unions tested on every call (a module constant: ``F_A | F_B`` in the test is computed per call)
_MOVES = F_MUTATES | F_SET  # an op that may move a value to another storage
_META_ARGS = F_SELF_META | F_OTHERS_META
_RANDOM_OR_STATS = F_RANDOM | F_RUNNING_STATS

#: the argument types that can hold a tracked tensor read by the op (a tensor, a list or tuple of them)
_HOLDERS = (Tensor, list, tuple)

#: the ops whose list or tuple argument is an index (its slices' tensor bounds are read)
_INDEXING = frozenset(("__getitem__", "__setitem__"))


def _index_items(index: list[Any] | tuple[Any, ...] | slice) -> list[Any]:
    """What an index reads: its items, a slice's tensor bounds in place of the slice
    (``x[: n + 1]``, ``x[i, : n + 1]``)."""
    out: list[Any] = []
    for b in index if not isinstance(index, slice) else (index,):
        out.extend(slice_tensors(b) if isinstance(b, slice) else (b,))
    return out
