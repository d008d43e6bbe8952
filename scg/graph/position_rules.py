"""The position rules of tensor operations: how each maps its inputs' leading positions to its output's.

A rule returns ``p``: the output's positions ``0 .. p-1`` are the input's positions ``0 .. p-1``
(``INF``: all of them). This module holds the rules of elementwise operations, reductions, shape
changes and contractions; those of indexing are `scg.graph.index_rules`, those of
``torch.nn.functional`` `scg.graph.nn_rules`. Each module's ``RULES`` names the operations its rules
cover, by the name torch reports (``add`` for ``torch.add``, ``Tensor.add`` and ``Tensor.add_``);
`scg.graph.positions.TABLE` joins them. Operations without a rule keep no position
(`scg.graph.positions`). See ``docs/tracking.md`` for the table in words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "ELEMENTWISE",
    "INF",
    "RULES",
    "Rule",
    "along_dims",
    "along_rule",
    "elementwise",
    "reduced_dims",
    "reduction_rule",
]

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


def reduction_rule(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
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


def along_rule(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
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


def _constant(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """``x.new_zeros(shape)``: the values do not depend on the input's."""
    return INF


#: the elementwise operations (each with its in-place ``name_`` too): `elementwise` is their rule
ELEMENTWISE = """
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

#: rule -> the operations it covers, by the name torch reports (after those of ``ELEMENTWISE``)
RULES: tuple[tuple[Rule, str], ...] = (
    (
        reduction_rule,
        "sum mean prod amax amin max min argmax argmin logsumexp norm std var all any median "
        "nansum nanmean nanmedian count_nonzero std_mean var_mean mode aminmax",
    ),
    (
        along_rule,
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
    (_constant, "new_zeros new_ones new_full new_empty new_tensor"),
    (elementwise, "masked_fill_ copy_"),
)
