"""Positional alignment: which leading dimensions of a tensor still line up with a node's.

scg credits each element of a batched stochastic node with the matching elements of the costs it
influences (Algorithm 1 of Schulman et al. 2015 applied per example). That is unbiased only if a
cost element ``c[i, ...]`` depends on node ``v`` through ``v[i, ...]`` alone — the *plate*
assumption: the examples of a batch are independent copies of one graph. Instead of guessing it
from shapes, scg *follows* it: for every tensor computed from a node it records, per node, the
first leading position that no longer lines up with the node's dimensions (its *foreign*
position ``f``): positions ``0 .. f-1`` of the tensor are the node's positions ``0 .. f-1``.

Each torch operation maps its inputs' positions to its output's by a rule (:func:`prefix`): an
elementwise op of equal-rank inputs keeps every position; ``sum(dim=d)`` keeps ``0 .. d-1`` (and
all, when it removes the last dimension or keeps dims); ``cumsum``/``softmax``/``sort`` along
``d`` keep ``0 .. d-1``; ``transpose``/``permute`` keep the positions before the first moved one;
a reshape keeps the prefix of unchanged sizes; ``x @ W`` keeps all but the contracted dimension;
``stack``/``cat`` along ``d`` keep ``0 .. d-1``; a broadcast that adds leading dimensions or
expands a size-1 dimension keeps only the positions before it. **An operation without a rule
keeps none** (a conservative fallback: the node is then credited with whole costs).

A position ``p ≥ f`` of a tensor is harmless when its size is 1 there (nothing to confuse), so
the foreign position stored is the first position ``≥ f`` of size > 1. Whether per-element
credit holds for a pair (node, cost) is decided when the surrogate is built (:mod:`scg.plates`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["INF", "declare_rowwise", "foreign_from", "merge", "normalize", "prefix", "shift"]

Tensor = torch.Tensor

#: "every position lines up".
INF = 1 << 30

#: op name -> how it maps positions. Rules take (func_name, args, kwargs, t, out, pos_in_args).
Rule = Callable[[str, tuple[Any, ...], dict[str, Any], Tensor, Tensor, int], int]


def _dim(args: tuple[Any, ...], kwargs: dict[str, Any], i: int, ndim: int,
         default: int | None = None) -> int | None:
    d = kwargs.get("dim", args[i] if len(args) > i else default)
    if isinstance(d, (list, tuple)):
        if not d:
            return None
        return min(int(x) % max(ndim, 1) for x in d)
    if d is None or not isinstance(d, int):
        return None
    return d % max(ndim, 1)


def _elementwise(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
                 out: Tensor, pos: int) -> int:
    return INF if t.dim() == out.dim() else 0


def _reduction(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
               out: Tensor, pos: int) -> int:
    if len(args) > 1 and isinstance(args[1], Tensor):  # torch.max(a, b): elementwise
        return INF if t.dim() == out.dim() else 0
    if pos != 0:
        return 0
    d = _dim(args, kwargs, 1, t.dim())
    # positions from the reduced one on are foreign, even if none is left: a dimension added
    # later (one_hot of the result) would otherwise look aligned with the node's reduced one
    return 0 if d is None else d


def _along(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
           out: Tensor, pos: int) -> int:
    """Shape-preserving ops that mix along one dimension (cumsum, softmax, sort, flip, ...)."""
    if pos != 0:
        return 0
    if name in ("flip", "roll"):
        dims = kwargs.get("dims", args[1] if len(args) > 1 else None)
        if name == "roll" and len(args) > 2:
            dims = args[2]
        if dims is None:
            return 0
        seq = dims if isinstance(dims, (list, tuple)) else [dims]
        return min((int(x) % max(t.dim(), 1) for x in seq), default=INF)
    d = _dim(args, kwargs, 2 if name in ("topk", "kthvalue", "normalize", "diff") else 1, t.dim(),
             default=1 if name == "normalize" else -1)
    return 0 if d is None else d


def _reshape(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
             out: Tensor, pos: int) -> int:
    if pos != 0:
        return 0
    p = 0
    for a, b in zip(t.shape, out.shape):
        if a != b:
            break
        p += 1
    else:
        return INF if t.dim() <= out.dim() else p
    return p


def _unsqueeze(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
               out: Tensor, pos: int) -> int:
    d = _dim(args, kwargs, 1, out.dim())
    return 0 if d is None else d


def _squeeze(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
             out: Tensor, pos: int) -> int:
    d = _dim(args, kwargs, 1, t.dim())
    if d is None:
        d = next((i for i, s in enumerate(t.shape) if s == 1), None)
        if d is None:
            return INF
    # a size-1 dimension holds no mixed content: only the dimensions after it move
    return d if t.dim() > out.dim() and d < t.dim() - 1 else INF


def _permute(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
             out: Tensor, pos: int) -> int:
    n = t.dim()
    if name in ("transpose", "swapaxes", "swapdims"):
        a = args[1] if len(args) > 1 else kwargs.get("dim0", 0)
        b = args[2] if len(args) > 2 else kwargs.get("dim1", 1)
        return min(int(a) % max(n, 1), int(b) % max(n, 1)) if a != b else INF
    if name in ("t", "T", "mT", "numpy_T"):
        return max(n - 2, 0)
    if name == "permute":
        order = args[1:] if len(args) > 2 or not isinstance(args[1], (list, tuple)) else args[1]
        for i, d in enumerate(order):
            if int(d) % n != i:
                return i
        return INF
    if name == "movedim":
        src = args[1] if len(args) > 1 else kwargs.get("source")
        dst = args[2] if len(args) > 2 else kwargs.get("destination")
        seq = [*(src if isinstance(src, (list, tuple)) else [src]),
               *(dst if isinstance(dst, (list, tuple)) else [dst])]
        return min(int(x) % max(n, 1) for x in seq)
    return 0


def _expand(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
            out: Tensor, pos: int) -> int:
    return INF if pos == 0 and t.dim() == out.dim() else 0


def _repeat(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
            out: Tensor, pos: int) -> int:
    if t.dim() != out.dim():
        return 0
    return next((i for i, (a, b) in enumerate(zip(t.shape, out.shape)) if a != b), INF)


def _cat(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
         out: Tensor, pos: int) -> int:
    d = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    if not isinstance(d, int):
        return 0
    if name in ("stack",):
        return d % out.dim()
    if t.dim() != out.dim():
        return 0
    return d % out.dim()


def _split(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
           out: Tensor, pos: int) -> int:
    if pos != 0:
        return 0
    idx = {"narrow": 1, "select": 1, "unbind": 1}.get(name, 2)
    d = kwargs.get("dim", args[idx] if len(args) > idx else 0)
    return int(d) % max(t.dim(), 1) if isinstance(d, int) else 0


def _matmul(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
            out: Tensor, pos: int) -> int:
    if name == "linear":
        return t.dim() - 1 if pos == 0 and t.dim() >= 1 else 0
    if pos == 0 and t.dim() >= 2 and out.dim() in (t.dim(), t.dim() - 1):
        return t.dim() - 1  # rows kept, the last dimension contracted (matrix @ vector too)
    if pos == 1 and t.dim() >= 3 and out.dim() == t.dim():
        return t.dim() - 2  # batch dims kept, the second-last contracted
    return 0


def _einsum(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
            out: Tensor, pos: int) -> int:
    eq = args[0] if args and isinstance(args[0], str) else None
    if eq is None or "..." in eq or "->" not in eq:
        return 0
    ins, o = eq.replace(" ", "").split("->")
    subs = ins.split(",")
    if not 1 <= pos <= len(subs):
        return 0
    s = subs[pos - 1]
    p = 0
    for a, b in zip(s, o):
        if a != b:
            break
        p += 1
    return p if p < len(o) else INF


def _gather(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
            out: Tensor, pos: int) -> int:
    d = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    if pos == 2 or t is kwargs.get("index"):  # the index: out[i] reads index[i]
        return INF if t.dim() == out.dim() else 0
    return int(d) % max(t.dim(), 1) if isinstance(d, int) else 0


def _index_select(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
                  out: Tensor, pos: int) -> int:
    d = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    if not isinstance(d, int):
        return 0
    d %= max(out.dim(), 1)
    if pos == 0:
        return d
    return INF if d == 0 and t.dim() == 1 else 0


def _embedding(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
               out: Tensor, pos: int) -> int:
    # F.embedding(input, weight): out = input.shape + (H,)
    return INF if pos == 0 else 0


def _one_hot(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
             out: Tensor, pos: int) -> int:
    return INF


def _scatter(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
             out: Tensor, pos: int) -> int:
    if pos == 0:
        return INF  # the input's own elements stay where they are
    d = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    return int(d) % max(out.dim(), 1) if isinstance(d, int) else 0


def _layer_norm(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
                out: Tensor, pos: int) -> int:
    shape = kwargs.get("normalized_shape", args[1] if len(args) > 1 else None)
    if pos != 0 or shape is None:
        return 0
    k = len(shape) if isinstance(shape, (list, tuple, torch.Size)) else 1
    return t.dim() - k


def _rows(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
          out: Tensor, pos: int) -> int:
    """Recurrent cells (input (B, I), state (B, H) -> (B, H)): rows kept, features mixed."""
    return 1 if pos in (0, 1) and t.dim() >= 1 else 0


def _constant(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
              out: Tensor, pos: int) -> int:
    """``x.new_zeros(shape)``: the values do not depend on the input's."""
    return INF


def _getitem(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
             out: Tensor, pos: int) -> int:
    idx = args[1] if len(args) > 1 else None
    items = idx if isinstance(idx, tuple) else (idx,)
    if pos != 0:  # t is (in) an index
        return _advanced_index_rule(items, t, out)
    p = 0
    consumed = 0
    for k, it in enumerate(items):
        if it is Ellipsis:
            rest = sum(1 for x in items[k + 1:] if x is not None)
            span = t.dim() - consumed - rest
            p += span
            consumed += span
            continue
        if isinstance(it, slice) and it.start in (None, 0) and it.stop is None \
                and it.step in (None, 1):
            p += 1
            consumed += 1
            continue
        return p
    return INF


def _setitem(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
             out: Tensor, pos: int) -> int:
    """``out[idx] = value``: the value lands at the indexed positions."""
    if pos == 0:
        return INF
    idx = args[1] if len(args) > 1 else None
    items = idx if isinstance(idx, tuple) else (idx,)
    if pos == 1:  # (in) the index: a boolean mask of out's leading shape is elementwise
        if t.dtype == torch.bool and len(items) == 1 and out.shape[:t.dim()] == t.shape:
            return INF
        return 0
    k = 0
    for it in items:
        if isinstance(it, slice) and it.start in (None, 0) and it.stop is None \
                and it.step in (None, 1):
            k += 1
        else:
            break
    ints = sum(1 for it in items if isinstance(it, int))
    return k if t.dim() == out.dim() - ints else 0


def _advanced_index_rule(items: tuple[Any, ...], t: Tensor, out: Tensor) -> int:
    """A tracked tensor used as an index: positional when the advanced indices come first."""
    tensors = [i for i, it in enumerate(items) if isinstance(it, Tensor)]
    if not tensors or tensors[0] != 0 or tensors != list(range(len(tensors))):
        return 0
    if t.dtype == torch.bool:
        return INF if len(tensors) == 1 and t.dim() <= out.dim() and out.shape[:1] == t.shape[:1] \
            and t.dim() == 1 else 0
    rank = max(items[i].dim() for i in tensors)
    return INF if t.dim() == rank else 0


_ELEMENTWISE = """
abs absolute acos arccos acosh add addcdiv addcmul angle asin asinh atan atan2 atanh bitwise_and
bitwise_not bitwise_or bitwise_xor ceil clamp clamp_max clamp_min clip clone contiguous copysign cos
cosh deg2rad detach digamma div divide dropout alpha_dropout feature_alpha_dropout elu eq erf erfc
erfinv exp exp2 expm1 float double half bfloat16 long int short bool byte char to type type_as
cpu cuda floor floor_divide fmod frac ge gelu greater greater_equal gt hardtanh hardsigmoid
hardswish heaviside hypot i0 isfinite isinf isnan isneginf isposinf le leaky_relu lerp less
less_equal lgamma log log10 log1p log2 logaddexp logical_and logical_not logical_or logical_xor
logit lt masked_fill maximum minimum mish mul multiply nan_to_num ne neg negative not_equal
positive pow rad2deg reciprocal relu relu6 remainder round rsqrt selu sigmoid sign signbit silu sin
sinc sinh softplus softsign sqrt square sub subtract tan tanh true_divide trunc where xlogy
requires_grad_ float_power fill_ zero_ copy_ fill zeros_like ones_like full_like empty_like
rand_like randn_like randint_like softshrink hardshrink tanhshrink threshold celu rrelu glu
binary_cross_entropy binary_cross_entropy_with_logits mse_loss l1_loss smooth_l1_loss huber_loss
kl_div poisson_nll_loss dropout1d dropout2d pin_memory broadcast_tensors atleast_1d view_as_real
logical_not isclose __deepcopy__ sgn conj resolve_conj resolve_neg log_sigmoid logsigmoid
__add__ __radd__ __iadd__ __sub__ __rsub__ __isub__ __mul__ __rmul__ __imul__ __truediv__
__rtruediv__ __itruediv__ __floordiv__ __rfloordiv__ __mod__ __rmod__ __pow__ __rpow__ __neg__
__abs__ __and__ __rand__ __or__ __ror__ __xor__ __rxor__ __invert__ __eq__ __ne__ __lt__ __le__
__gt__ __ge__ __lshift__ __rshift__ __iand__ __ior__ __ixor__ __div__ __rdiv__ __idiv__
"""

_TABLE: dict[str, Rule] = {}
#: called after declare_rowwise changes the rules (the tracker clears its per-function cache)
ON_CHANGE: list[Callable[[], None]] = []
for _n in _ELEMENTWISE.split():
    _TABLE[_n] = _elementwise
    _TABLE[_n + "_"] = _elementwise
for _n in ("sum mean prod amax amin max min argmax argmin logsumexp norm std var all any median "
           "nansum nanmean nanmedian count_nonzero std_mean var_mean mode aminmax").split():
    _TABLE[_n] = _reduction
for _n in ("cumsum cumprod cummax cummin logcumsumexp softmax log_softmax softmin sort argsort "
           "topk kthvalue flip roll diff normalize cumsum_ cumprod_").split():
    _TABLE[_n] = _along
for _n in "view reshape view_as reshape_as flatten unflatten".split():
    _TABLE[_n] = _reshape
_TABLE["unsqueeze"] = _unsqueeze
_TABLE["unsqueeze_"] = _unsqueeze
_TABLE["squeeze"] = _squeeze
_TABLE["squeeze_"] = _squeeze
for _n in "transpose swapaxes swapdims t T mT permute movedim".split():
    _TABLE[_n] = _permute
for _n in "expand expand_as broadcast_to".split():
    _TABLE[_n] = _expand
_TABLE["repeat"] = _repeat
for _n in "cat concat concatenate stack".split():
    _TABLE[_n] = _cat
for _n in "split chunk narrow select unbind tensor_split".split():
    _TABLE[_n] = _split
for _n in "matmul mm bmm __matmul__ __rmatmul__ linear".split():
    _TABLE[_n] = _matmul
_TABLE["einsum"] = _einsum
_TABLE["gather"] = _gather
_TABLE["take_along_dim"] = _gather
_TABLE["index_select"] = _index_select
_TABLE["embedding"] = _embedding
_TABLE["one_hot"] = _one_hot
for _n in "scatter scatter_ scatter_add scatter_add_ scatter_reduce scatter_reduce_".split():
    _TABLE[_n] = _scatter
_TABLE["layer_norm"] = _layer_norm
_TABLE["__getitem__"] = _getitem
_TABLE["__setitem__"] = _setitem
for _n in "lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell".split():
    _TABLE[_n] = _rows
for _n in "new_zeros new_ones new_full new_empty new_tensor".split():
    _TABLE[_n] = _constant


def declare_rowwise(op: Callable[..., Any] | str, dims: int = 1,
                    args: Sequence[int] | None = None) -> None:
    """Declare that ``op`` keeps rows: output row ``i`` is computed from row ``i`` of its
    row-aligned tensor arguments only (their leading ``dims`` dimensions line up with the
    outputs').

    Args:
        op: a function, a ``torch.library`` custom op, or its name as torch reports it
            (``"my_attend.default"``).
        dims: how many leading dimensions are rows.
        args: positions of the row-aligned arguments (default: all tensor arguments); a
            tracked value in any other argument is treated as mixing.

    Operations scg has no rule for are treated as mixing their inputs' rows (whole-batch credit
    for the nodes they carry, :mod:`scg.plates`); this restores per-example credit through them.
    """
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 0:
        raise ValueError(f"declare_rowwise(dims=...): expected an int >= 0, got {dims!r}")
    aligned = None if args is None else frozenset(int(a) for a in args)
    names = [op] if isinstance(op, str) else [getattr(op, "__name__", "")]
    default = getattr(op, "default", None)  # a custom op's OpOverload
    if default is not None:
        names.append(getattr(default, "__name__", ""))
    qualified = getattr(op, "_qualname", None)  # torch.library.custom_op objects
    if isinstance(qualified, str):
        names.append(qualified.split("::")[-1] + ".default")

    def rule(name: str, call_args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor,
             out: Tensor, pos: int) -> int:
        if aligned is not None and pos not in aligned:
            return 0
        return min(dims, t.dim(), out.dim()) if t.dim() >= dims else 0

    for n in names:
        if n:
            _TABLE[n] = rule
    for callback in ON_CHANGE:
        callback()
for _n in "masked_fill_ copy_".split():
    _TABLE[_n] = _elementwise


_NAMES: dict[Callable[..., Any], str] = {}

#: When a dict, counts the operations without a rule that tracked values went through (set it to
#: ``{}`` to see which operations a program sends to the conservative fallback).
UNKNOWN: dict[str, int] | None = None


def name_of(func: Callable[..., Any]) -> str:
    """``add`` for ``torch.add``; ``T`` for the ``Tensor.T`` getter."""
    name = _NAMES.get(func)
    if name is None:
        name = getattr(func, "__name__", "") or ""
        if name == "__get__":
            name = getattr(getattr(func, "__self__", None), "__name__", "") or ""
        _NAMES[func] = name
    return name


def rule_for(name: str) -> Rule | None:
    """The position rule of the operation called ``name`` (None: no rule, i.e. mixing)."""
    return _TABLE.get(name)


def is_elementwise(name: str) -> bool:
    return _TABLE.get(name) is _elementwise


def record_unknown(func: Callable[..., Any]) -> None:
    if UNKNOWN is not None:
        n = name_of(func)
        UNKNOWN[n] = UNKNOWN.get(n, 0) + 1


def prefix(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any] | None,
           t: Tensor, out: Tensor, pos: int) -> int:
    """How many leading positions of ``out`` line up with those of the input ``t`` (argument
    ``pos`` of ``func``), before expansions are considered; 0 for an op without a rule."""
    name = name_of(func)
    rule = _TABLE.get(name)
    if rule is None:
        record_unknown(func)
        return 0
    try:
        return rule(name, args, kwargs or {}, t, out, pos)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError):
        return 0


def foreign_from(p: int, t: Tensor, out: Tensor) -> int:
    """The first position ``≥`` the aligned prefix ``p`` where ``out`` has size > 1 (or ``p``
    itself when there is none: a dimension added later there is foreign too; INF when ``p`` is),
    where the aligned prefix also ends at the first size-1 dimension of ``t`` expanded in
    ``out``."""
    oshape = out.shape
    n = len(oshape)
    tshape = t.shape
    m = min(p, len(tshape), n)
    for i in range(m):
        if tshape[i] == 1 and oshape[i] != 1:
            p = i
            break
    if p >= INF:
        return INF
    for i in range(p, n):
        if oshape[i] != 1:
            return i
    return min(p, n)  # nothing foreign of size > 1 yet; kept for dimensions added later


def merge(into: dict[int, int], pos: int, mask: int) -> None:
    """Record that the nodes in ``mask`` are foreign from position ``pos`` (keeping the minimum)."""
    if mask:
        into[pos] = into.get(pos, 0) | mask


def normalize(fr: dict[int, int]) -> dict[int, int]:
    """Each node at its smallest foreign position only."""
    seen = 0
    out: dict[int, int] = {}
    for p in sorted(fr):
        m = fr[p] & ~seen
        if m:
            out[p] = m
            seen |= m
    return out


def shift(fr: dict[int, int], by: int) -> dict[int, int]:
    """Foreign positions moved ``by`` places to the right (leading dims added in front)."""
    return {p + by if p < INF else p: m for p, m in fr.items()}
