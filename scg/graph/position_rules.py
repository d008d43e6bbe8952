"""The position rules: how each torch operation maps its inputs' leading positions to its output's.

A rule returns ``p``: the output's positions ``0 .. p-1`` are the input's positions ``0 .. p-1``
(``INF``: all of them). The table is keyed by the operation's name as torch reports it (``add``
for ``torch.add``, ``Tensor.add`` and ``Tensor.add_``). Operations without a rule keep no
position (`scg.graph.positions`). See ``docs/tracking.md`` for the table in words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["INF", "TABLE", "Rule", "elementwise"]

Tensor = torch.Tensor

#: "every position lines up".
INF = 1 << 30

#: op name -> how it maps positions. Rules take (func_name, args, kwargs, t, out, pos_in_args).
Rule = Callable[[str, tuple[Any, ...], dict[str, Any], Tensor, Tensor, int], int]


def _dim(args: tuple[Any, ...], kwargs: dict[str, Any], i: int, ndim: int, default: int | None = None) -> int | None:
    if kwargs:  # (numpy's name ``axis=`` is accepted by torch's ops too)
        d = kwargs.get("dim", kwargs.get("axis", args[i] if len(args) > i else default))
    else:
        d = args[i] if len(args) > i else default
    if type(d) is int:
        return d % ndim if ndim > 1 else 0
    if isinstance(d, (list, tuple)):
        if not d:
            return None
        return min(int(x) % max(ndim, 1) for x in d)
    if d is None or not isinstance(d, int):
        return None
    return d % max(ndim, 1)


def elementwise(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    return INF if t.dim() == out.dim() else 0


def _reduction(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    if len(args) > 1 and isinstance(args[1], Tensor):  # torch.max(a, b): elementwise
        return INF if t.dim() == out.dim() else 0
    if pos != 0:
        return 0
    d = _dim(args, kwargs, 1, t.dim())
    # positions from the reduced one on are foreign, even if none is left: a dimension added
    # later (one_hot of the result) would otherwise look aligned with the node's reduced one
    return 0 if d is None else d


def reduced_dims(args: tuple[Any, ...], kwargs: dict[str, Any], ndim: int) -> set[int] | None:
    """The dimensions a reduction ``x.sum(dim)`` (``dim=``, ``axis=``, an int or a list) reduces;
    None when it reduces them all or they cannot be read."""
    d = kwargs.get("dim", kwargs.get("axis", args[1] if len(args) > 1 else None))
    if isinstance(d, int) and not isinstance(d, bool):
        return {d % max(ndim, 1)}
    if isinstance(d, (list, tuple)) and d and all(isinstance(x, int) for x in d):
        return {int(x) % max(ndim, 1) for x in d}
    return None


def along_dims(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], ndim: int) -> set[int] | None:
    """The dimensions a shape-preserving op mixes along (cumsum, softmax, sort, flip, roll, ...);
    None when it mixes the flattened tensor (``roll`` without dims) or they cannot be read."""
    if name in ("flip", "roll"):
        if name == "flip":  # flip(dims) or flip(d0, d1, ...)
            dims = kwargs.get("dims", args[1] if len(args) == 2 else (args[1:] or None))
        else:  # roll(shifts, dims): without dims the tensor is rolled flattened, every row moving
            dims = kwargs.get("dims", args[2] if len(args) > 2 else None)
        if dims is None:
            return None
        seq = dims if isinstance(dims, (list, tuple)) else [dims]
        return {int(x) % max(ndim, 1) for x in seq}
    d = _dim(
        args,
        kwargs,
        2 if name in ("topk", "kthvalue", "normalize", "diff") else 1,
        ndim,
        default=1 if name == "normalize" else -1,
    )
    return None if d is None else {d}


def _along(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """Shape-preserving ops that mix along one dimension (cumsum, softmax, sort, flip, ...)."""
    if pos != 0:
        return 0
    dims = along_dims(name, args, kwargs, t.dim())
    return 0 if dims is None else min(dims, default=INF)


def _reshape(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
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


def _unsqueeze(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    d = _dim(args, kwargs, 1, out.dim())
    return 0 if d is None else d


def _squeeze(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    if t is out:  # squeeze_: the tensor is already squeezed, its old shape unknown here
        return 0
    d = _dim(args, kwargs, 1, t.dim())
    if d is None:
        d = next((i for i, s in enumerate(t.shape) if s == 1), None)
        if d is None:
            return INF
    # a size-1 dimension holds no mixed content: only the dimensions after it move
    return d if t.dim() > out.dim() and d < t.dim() - 1 else INF


def _permute(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    n = t.dim()
    if name in ("transpose", "swapaxes", "swapdims"):
        a = args[1] if len(args) > 1 else kwargs.get("dim0", 0)
        b = args[2] if len(args) > 2 else kwargs.get("dim1", 1)
        return min(int(a) % max(n, 1), int(b) % max(n, 1)) if a != b else INF
    if name in ("t", "T", "numpy_T"):  # every dimension reversed (t, T of a matrix: the two swapped)
        return INF if n < 2 else 0
    if name == "mT":  # the last two swapped
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
        seq = [*(src if isinstance(src, (list, tuple)) else [src]), *(dst if isinstance(dst, (list, tuple)) else [dst])]
        return min(int(x) % max(n, 1) for x in seq)
    return 0


def _expand(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    return INF if pos == 0 and t.dim() == out.dim() else 0


def _repeat(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    if t.dim() != out.dim():
        return 0
    return next((i for i, (a, b) in enumerate(zip(t.shape, out.shape)) if a != b), INF)


def _cat(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    d = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    if not isinstance(d, int):
        return 0
    if name in ("stack",):
        return d % out.dim()
    if t.dim() != out.dim():
        return 0
    return d % out.dim()


def _split(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    if pos != 0:
        return 0
    idx = {"narrow": 1, "select": 1, "unbind": 1}.get(name, 2)
    d = kwargs.get("dim", args[idx] if len(args) > idx else 0)
    return int(d) % max(t.dim(), 1) if isinstance(d, int) else 0


def _matmul(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    n = t.dim()
    if name == "__rmatmul__":  # x.__rmatmul__(m) is m @ x: the receiver is the right operand
        pos = 1 - pos if pos in (0, 1) else pos
    if name == "linear":
        return n - 1 if pos == 0 and n >= 1 else 0
    if pos == 0 and n >= 2 and out.dim() in (n, n - 1):
        return n - 1  # rows kept, the last dimension contracted (matrix @ vector too)
    if pos == 1 and n >= 3 and out.dim() == n:
        return n - 2  # batch dims kept, the second-last contracted
    return 0


def _einsum(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    eq = args[0] if args and isinstance(args[0], str) else None
    if eq is None or "..." in eq or "->" not in eq:
        return 0
    ins, o = eq.replace(" ", "").split("->")
    subs = ins.split(",")
    places = [pos]
    if len(args) == 2 and isinstance(args[1], (list, tuple)):  # einsum(eq, [a, b]): its places in the list
        places = [i + 1 for i, x in enumerate(args[1]) if x is t]  # (all of them: einsum(eq, [z, z]))
    if not places or not all(1 <= q <= len(subs) for q in places):
        return 0
    return min(_subscripts_kept(subs[q - 1], o) for q in places)


def _subscripts_kept(s: str, o: str) -> int:
    """How many leading subscripts of an operand ``s`` the output ``o`` keeps in place."""
    p = 0
    for a, b in zip(s, o):
        if a != b:
            break
        p += 1
    return p if p < len(o) else INF


def _gather(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    d = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    if pos == 2 or t is kwargs.get("index"):  # the index: out[i] reads index[i]
        return INF if t.dim() == out.dim() else 0
    return int(d) % max(t.dim(), 1) if isinstance(d, int) else 0


def _index_select(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    d = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    if not isinstance(d, int):
        return 0
    d %= max(out.dim(), 1)
    if pos == 0 or (pos < 0 and t is kwargs.get("input")):
        return d
    if pos == 2 or (pos < 0 and t is kwargs.get("index")):
        return INF if d == 0 and t.dim() == 1 else 0
    return 0


def _embedding(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """The indices keep their positions (out = indices.shape + (H,)), the table mixes: told apart by
    dtype, since ``F.embedding(input, weight)`` and ``torch.embedding(weight, indices)`` take them in
    opposite orders. A table that is not floating (``F.embedding(idx, z.long())``) cannot be told
    from the indices: neither keeps its positions then."""
    if t.is_floating_point():
        return 0
    pair = [a for a in args[:2] if isinstance(a, Tensor)]
    return INF if len(pair) == 2 and any(a.is_floating_point() for a in pair) else 0


def _one_hot(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    classes = kwargs.get("num_classes", args[1] if len(args) > 1 else -1)
    return INF if isinstance(classes, int) and classes > 0 else 0  # (else its width is the batch's max + 1)


def _scatter(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    if pos == 0:
        return INF  # the input's own elements stay where they are
    d = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    return int(d) % max(out.dim(), 1) if isinstance(d, int) else 0


def _layer_norm(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    shape = kwargs.get("normalized_shape", args[1] if len(args) > 1 else None)
    if pos != 0 or shape is None:
        return 0
    k = len(shape) if isinstance(shape, (list, tuple, torch.Size)) else 1
    return t.dim() - k


#: row-wise losses: the arguments whose rows are examples (the others, e.g. class weights, mix)
_LOSS_ROWS = {
    "cross_entropy": (0, 1),
    "nll_loss": (0, 1),
    "multi_margin_loss": (0, 1),
    "multilabel_margin_loss": (0, 1),
    "multilabel_soft_margin_loss": (0, 1),
    "cosine_embedding_loss": (0, 1, 2),
    "triplet_margin_loss": (0, 1, 2),
    "triplet_margin_with_distance_loss": (0, 1, 2),
}


def _loss(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """Row-wise losses with ``reduction="none"``: ``cross_entropy(x (B, C, ...), y (B, ...))`` is
    ``(B, ...)``, row ``i`` computed from ``x[i]`` and ``y[i]`` alone. The input keeps its first
    position (its class dimension, at 1, is mixed); a target of the output's rank keeps all.
    Reduced (``"mean"``, ``"sum"``): no position (the 0-dimensional result mixes every row)."""
    if kwargs.get("reduction", "mean") != "none" and kwargs.get("reduce") is not False:
        return 0
    if kwargs.get("distance_function") is not None:  # (the user's function runs unseen by the tracker)
        return 0
    if pos not in _LOSS_ROWS.get(name, ()) or out.dim() == 0 or t.dim() == 0:
        return 0
    if t.dim() == out.dim() and t.shape == out.shape:
        return INF  # the target (class indices), or a per-row label
    return 1 if t.shape[0] == out.shape[0] else 0


def _row_reduce(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """``cosine_similarity(x1, x2, dim)``, ``pairwise_distance(x1, x2)``: one dimension
    (``dim``; the last for ``pairwise_distance``) reduced, the ones before it kept."""
    if pos not in (0, 1) or t.dim() != max(args[0].dim(), args[1].dim()):
        return 0
    if name == "pairwise_distance":
        return t.dim() - 1
    d = kwargs.get("dim", kwargs.get("axis", args[2] if len(args) > 2 else 1))
    return int(d) % max(t.dim(), 1) if isinstance(d, int) else 0


def _rows(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """Recurrent cells (input (B, I), state (B, H) -> (B, H)): rows kept, features mixed."""
    return 1 if pos in (0, 1) and t.dim() >= 1 else 0


#: ops that compute each example of a batched input ``(N, C, *spatial)`` alone, with their number
#: of spatial dimensions (None: any)
_PER_EXAMPLE: dict[str, int | None] = {
    **{f"{kind}{n}d": n for kind in ("conv", "conv_transpose", "max_pool", "avg_pool") for n in (1, 2, 3)},
    **{f"adaptive_{kind}_pool{n}d": n for kind in ("avg", "max") for n in (1, 2, 3)},
    "group_norm": None,
    "instance_norm": None,
}


def _per_example(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """Convolutions, pooling, group and instance normalization of a batched input: example ``i``
    of the output from example ``i`` of the input alone (its channels and positions mixed). An
    unbatched input ``(C, *spatial)``, and the weights, keep no position."""
    spatial = _PER_EXAMPLE[name]
    if pos != 0 or (spatial is not None and t.dim() != spatial + 2) or out.dim() == 0:
        return 0
    return 1 if out.shape[0] == t.shape[0] else 0


def _pad(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """``F.pad(x, pad)`` pads the last ``len(pad) // 2`` dimensions: the ones before stay."""
    widths = kwargs.get("pad", args[1] if len(args) > 1 else None)
    if pos != 0 or not isinstance(widths, (list, tuple)):
        return 0
    return max(t.dim() - len(widths) // 2, 0)


def _constant(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """``x.new_zeros(shape)``: the values do not depend on the input's."""
    return INF


def _getitem(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    idx = args[1] if len(args) > 1 else None
    items = idx if isinstance(idx, tuple) else (idx,)
    if pos != 0:  # t is (in) an index
        return _advanced_index_rule(items, t, out)
    advanced = [k for k, it in enumerate(items) if isinstance(it, (Tensor, list))]
    if advanced and advanced[-1] - advanced[0] + 1 != len(advanced):  # (non-adjacent: their dims go first)
        return 0
    p = 0
    consumed = 0
    for k, it in enumerate(items):
        if it is Ellipsis:  # (a boolean mask indexes as many dimensions as it has)
            rest = sum(
                x.dim() if isinstance(x, Tensor) and x.dtype == torch.bool else 1
                for x in items[k + 1 :]
                if x is not None
            )
            span = t.dim() - consumed - rest
            p += span
            consumed += span
            continue
        if isinstance(it, slice) and it.start in (None, 0) and it.stop is None and it.step in (None, 1):
            p += 1
            consumed += 1
            continue
        return p
    return INF


def _setitem(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """``out[idx] = value``: the value lands at the indexed positions."""
    if pos == 0:
        return INF
    idx = args[1] if len(args) > 1 else None
    items = idx if isinstance(idx, tuple) else (idx,)
    if pos == 1:  # (in) the index: a boolean mask of out's leading shape is elementwise
        if t.dtype == torch.bool and len(items) == 1 and out.shape[: t.dim()] == t.shape:
            return INF
        return 0
    k = 0
    for it in items:
        if isinstance(it, slice) and it.start in (None, 0) and it.stop is None and it.step in (None, 1):
            k += 1
        elif it is Ellipsis:  # (``out[...] = value``: every dimension the other items leave)
            k += out.dim() - sum(1 for other in items if other is not None and other is not Ellipsis)
        else:
            break
    region = _region_rank(items, out.dim())
    # (the value is broadcast to the indexed region from the right: its rows are out's only when
    # it has the region's rank, e.g. not z (B, D) into o[:, idx] with a 2-D idx, a (B, n1, n2) region)
    return k if region is not None and t.dim() == region else 0


def _list_rank(x: Any) -> int:
    """The rank of a (nested) list used as an index."""
    rank = 0
    while isinstance(x, (list, tuple)):
        rank += 1
        x = x[0] if x else None
    return rank


def _region_rank(items: tuple[Any, ...], ndim: int) -> int | None:
    """The rank of ``out[items]`` for ``out`` of rank ``ndim``: None when its advanced indices are
    not adjacent (their dimensions then go first)."""
    advanced = [k for k, it in enumerate(items) if isinstance(it, (Tensor, list))]
    if advanced and advanced[-1] - advanced[0] + 1 != len(advanced):
        return None
    consumed = sum(
        it.dim() if isinstance(it, Tensor) and it.dtype == torch.bool else 1
        for it in items
        if isinstance(it, (int, Tensor, list)) and not isinstance(it, bool)
    )
    rank = max(
        (
            1 if it.dtype == torch.bool else it.dim() if isinstance(it, Tensor) else _list_rank(it)
            for it in (items[k] for k in advanced)
        ),
        default=0,
    )
    nones = sum(1 for it in items if it is None)
    return ndim - consumed + rank + nones


def _advanced_index_rule(items: tuple[Any, ...], t: Tensor, out: Tensor) -> int:
    """A tracked tensor used as an index: positional when the advanced indices come first."""
    k = 0  # the tensor indices must be the first k items
    for it in items:
        if not isinstance(it, Tensor):
            break
        k += 1
    if k == 0:
        return 0
    for it in items[k:]:
        if isinstance(it, Tensor):
            return 0
    if t.dtype == torch.bool:
        return INF if k == 1 and t.dim() <= out.dim() and out.shape[:1] == t.shape[:1] and t.dim() == 1 else 0
    rank = items[0].dim() if k == 1 else max(items[i].dim() for i in range(k))
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
kl_div poisson_nll_loss gaussian_nll_loss soft_margin_loss margin_ranking_loss
hinge_embedding_loss dropout1d dropout2d pin_memory broadcast_tensors atleast_1d view_as_real
logical_not isclose __deepcopy__ sgn conj resolve_conj resolve_neg log_sigmoid logsigmoid
__add__ __radd__ __iadd__ __sub__ __rsub__ __isub__ __mul__ __rmul__ __imul__ __truediv__
__rtruediv__ __itruediv__ __floordiv__ __rfloordiv__ __mod__ __rmod__ __pow__ __rpow__ __neg__
__abs__ __and__ __rand__ __or__ __ror__ __xor__ __rxor__ __invert__ __eq__ __ne__ __lt__ __le__
__gt__ __ge__ __lshift__ __rshift__ __iand__ __ior__ __ixor__ __div__ __rdiv__ __idiv__
"""

#: rule -> the operations it covers, by the name torch reports (after the elementwise operations
#: of ``_ELEMENTWISE``, each with its in-place ``name_``)
_RULES: tuple[tuple[Rule, str], ...] = (
    (
        _reduction,
        "sum mean prod amax amin max min argmax argmin logsumexp norm std var all any median "
        "nansum nanmean nanmedian count_nonzero std_mean var_mean mode aminmax",
    ),
    (
        _along,
        "cumsum cumprod cummax cummin logcumsumexp softmax log_softmax softmin sort argsort "
        "topk kthvalue flip roll diff normalize cumsum_ cumprod_",
    ),
    (_reshape, "view reshape view_as reshape_as flatten unflatten"),
    (_unsqueeze, "unsqueeze unsqueeze_"),
    (_squeeze, "squeeze squeeze_"),
    (_permute, "transpose swapaxes swapdims t T mT permute movedim"),
    (_expand, "expand expand_as broadcast_to"),
    (_repeat, "repeat"),
    (_cat, "cat concat concatenate stack"),
    (_split, "split chunk narrow select unbind tensor_split"),
    (_matmul, "matmul mm bmm __matmul__ __rmatmul__ linear"),
    (_einsum, "einsum"),
    (_gather, "gather take_along_dim"),
    (_index_select, "index_select"),
    (_embedding, "embedding"),
    (_one_hot, "one_hot"),
    (_scatter, "scatter scatter_ scatter_add scatter_add_ scatter_reduce scatter_reduce_"),
    (_layer_norm, "layer_norm"),
    (_getitem, "__getitem__"),
    (_setitem, "__setitem__"),
    (_loss, " ".join(_LOSS_ROWS)),
    (_row_reduce, "cosine_similarity pairwise_distance"),
    (_rows, "lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell"),
    (_per_example, " ".join(_PER_EXAMPLE)),
    (_pad, "pad"),
    (_constant, "new_zeros new_ones new_full new_empty new_tensor"),
    (elementwise, "masked_fill_ copy_"),
)

#: op name -> how it maps positions (`scg.graph.positions.declare_rowwise` adds to it)
TABLE: dict[str, Rule] = {n: elementwise for base in _ELEMENTWISE.split() for n in (base, base + "_")}
TABLE.update((n, rule) for rule, names in _RULES for n in names.split())
