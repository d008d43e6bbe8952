"""Helpers shared by the Triton kernels: block sizes, input preparation and the k-best selection step.

Imported only by the ``triton_*`` modules, i.e. only once a Triton backend is chosen. The selection
order everywhere is "larger value first, smaller index first among equal values", the order of a
stable descending sort; :func:`next_best` finds the best element strictly after ``(prev_v, prev_i)`` in
that order, so ``k`` calls give the ``k`` best elements without marking anything.
"""

# mypy: disable-error-code="untyped-decorator,no-untyped-def"

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["BIG_INDEX", "cdiv", "encoder_row", "in_dtype", "kernel_float", "next_best", "pow2"]

#: The index given to "no candidate left"; larger than any real index.
BIG_INDEX = 2**31 - 1


def pow2(n: int, lo: int = 1, hi: int | None = None) -> int:
    """The least power of two ``>= n`` clamped to ``[lo, hi]`` (plain integers: ``triton.next_power_of_2``
    is a constexpr function whose call costs ~3 µs, and the launchers ask several times per step)."""
    p = max(lo, 1 << (max(int(n), 1) - 1).bit_length())
    return p if hi is None else min(p, hi)


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for positive integers (``triton.cdiv`` without its constexpr-function call)."""
    return -(-a // b)


def in_dtype(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` as ``dtype``: ``t`` itself when it is one already (``Tensor.to`` costs ~2.5 µs of host time even
    then, and a launcher converts several tensors a step)."""
    return t if t.dtype == dtype else t.to(dtype)


def kernel_float(t: torch.Tensor) -> torch.Tensor:
    """The kernels compute in float32: float64 inputs are converted, half types are loaded as they are."""
    return t.to(torch.float32) if t.dtype == torch.float64 else t


@triton.jit
def encoder_row(rows_ptr, r, HAS_ROWS: tl.constexpr):
    """The encoder row that query row ``r`` reads: ``rows[r]`` (beam rows share encoder rows) or ``r``."""
    if HAS_ROWS:
        b = tl.load(rows_ptr + r).to(tl.int64)
    else:
        b = r.to(tl.int64)
    return b


@triton.jit
def next_best(vals, ids, valid, prev_v, prev_i):
    """Per row of the 2-D block ``vals``: the best ``(value, id)`` after ``(prev_v, prev_i)``.

    ``ids`` are distinct per row; ``valid`` marks real candidates. A row with no candidate left gets
    ``(-inf, BIG_INDEX)``.
    """
    pv = prev_v[:, None]
    pi = prev_i[:, None]
    after = (vals < pv) | ((vals == pv) & (ids > pi))
    eligible = valid & after
    best = tl.max(tl.where(eligible, vals, float("-inf")), axis=1)
    hit = eligible & (vals == best[:, None])
    chosen = tl.min(tl.where(hit, ids, 2147483647), axis=1)
    return best, chosen
