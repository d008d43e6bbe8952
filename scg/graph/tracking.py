"""Influence tracking: which stochastic nodes a tensor was computed from.

Algorithm 1 of Schulman et al. (2015) credits each stochastic node only with the costs it
*influences*. scg finds influence from data flow: while a :class:`~scg.Graph` is open, a
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
the transitive closure of these direct edges (:func:`closure`), computed once per surrogate. Masks
therefore stay a few bits wide however long the program runs, and the per-operation cost is one
attribute read per tensor argument.

Values that leave tensor land (``.item()``, ``bool(t)``, ``int(t)``, ``t.tolist()``, ``t.numpy()``,
``t.__index__``) are reported to the graph, which warns with
:class:`~scg.errors.InfluenceLostWarning`; escapes inside torch's own code (argument validation in
``torch.distributions``, for example) are not reported.
"""

from __future__ import annotations

import inspect
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["ESCAPES", "InfluenceTracker", "bits", "closure", "get_mask", "set_mask"]

Tensor = torch.Tensor

#: Tensor methods whose result is a Python value: data flow that scg cannot follow.
ESCAPES: frozenset[Callable[..., Any]] = frozenset(
    {
        Tensor.item,
        Tensor.tolist,
        Tensor.numpy,
        Tensor.__bool__,
        Tensor.__int__,
        Tensor.__float__,
        Tensor.__index__,
        Tensor.__complex__,
    }
)

#: Escapes inside these packages are their own business (e.g. argument validation), not user data flow.
_LIBRARY_MODULES = frozenset({"torch", "scg"})

_MUTATING_CACHE: dict[Callable[..., Any], bool] = {}


def _mutates_first_arg(func: Callable[..., Any]) -> bool:
    """True for in-place methods (``add_``) and ``__setitem__``: they change their first argument."""
    known = _MUTATING_CACHE.get(func)
    if known is None:
        name = getattr(func, "__name__", "")
        known = name == "__setitem__" or (name.endswith("_") and not name.endswith("__"))
        _MUTATING_CACHE[func] = known
    return known


def get_mask(value: object, attr: str) -> int:
    """The influence mask stored on ``value`` (0 when none, or when ``value`` is not a tensor)."""
    return getattr(value, attr, 0) if isinstance(value, Tensor) else 0


def set_mask(value: Tensor, attr: str, mask: int) -> None:
    """Store ``mask`` on ``value`` (and on the tensor it is a view of, for in-place writes)."""
    setattr(value, attr, mask)


def _mask_of_seq(seq: list[Any] | tuple[Any, ...], attr: str) -> int:
    m = 0
    for a in seq:
        if isinstance(a, Tensor):
            m |= getattr(a, attr, 0)
        elif isinstance(a, (list, tuple)):
            m |= _mask_of_seq(a, attr)
    return m


def _tag_outputs(out: Any, attr: str, mask: int) -> None:
    if isinstance(out, Tensor):
        setattr(out, attr, getattr(out, attr, 0) | mask)
    elif isinstance(out, (list, tuple)):
        for o in out:
            _tag_outputs(o, attr, mask)


def bits(mask: int) -> Iterator[int]:
    """Indices of the set bits of ``mask``, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def closure(direct: list[int]) -> list[int]:
    """Transitive closure of direct-influence masks.

    ``direct[i]`` is the mask of nodes that node ``i`` was computed from directly; nodes are in
    creation order, so every parent index is smaller than its child's. Returns ``full`` with
    ``full[i]`` the mask of every node that influences node ``i``. Parents are visited from the
    newest down, skipping those already covered by a later parent's closure, so a long chain
    (where every value depends on all earlier ones) costs one step per node, not one per bit.
    """
    full: list[int] = []
    for d in direct:
        acc = d
        pending = d
        while pending:
            j = pending.bit_length() - 1
            reach = full[j]
            acc |= reach
            pending &= ~(reach | (1 << j))
        full.append(acc)
    return full


class InfluenceTracker(TorchFunctionMode):
    """Propagates influence masks through every torch operation while a graph is open.

    Args:
        attr: attribute name under which masks are stored (unique per graph).
        on_escape: called as ``on_escape(func, mask, frame)`` when a tracked value leaves tensor
            land from user code. A bound method is held weakly (the graph owns its tracker, so a
            strong reference back would make every graph a reference cycle that only the cyclic
            garbage collector frees, keeping its nodes' tensors alive until it runs).
    """

    def __init__(self, attr: str, on_escape: Callable[[Callable[..., Any], int, Any], None]):
        super().__init__()
        self.attr = attr
        self._on_escape: Callable[[], Callable[[Callable[..., Any], int, Any], None] | None]
        if inspect.ismethod(on_escape):
            self._on_escape = weakref.WeakMethod(on_escape)
        else:
            self._on_escape = lambda: on_escape

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        out = func(*args, **kwargs) if kwargs else func(*args)
        attr = self.attr
        m = 0
        for a in args:
            if isinstance(a, Tensor):
                m |= getattr(a, attr, 0)
            elif isinstance(a, (list, tuple)):
                m |= _mask_of_seq(a, attr)
        if kwargs:
            m |= _mask_of_seq(tuple(kwargs.values()), attr)
        if not m:
            return out
        if func in ESCAPES:
            frame = sys._getframe(1)
            module = str(frame.f_globals.get("__name__", "")).split(".", 1)[0]
            if module not in _LIBRARY_MODULES:
                handler = self._on_escape()
                if handler is not None:
                    handler(func, m, frame)
        elif type(out) is Tensor:
            setattr(out, attr, getattr(out, attr, 0) | m)
        elif out is not None:
            _tag_outputs(out, attr, m)
        if _mutates_first_arg(func) and args and isinstance(args[0], Tensor):
            target = args[0]
            setattr(target, attr, getattr(target, attr, 0) | m)
            base = target._base
            if base is not None:
                setattr(base, attr, getattr(base, attr, 0) | m)
        return out
