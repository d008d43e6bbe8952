"""Triton's Philox 4x32-10 counter-based generator, reimplemented with torch integer ops.

``tl.rand(seed, offset)`` with an int32 ``offset`` block runs Philox 4x32 with ten rounds on the
counter ``(offset, 0, 0, 0)`` and the key ``(seed & 0xffffffff, seed >> 32)``, keeps the first output
word and maps it to ``[0, 1)`` (``uint_to_uniform_float`` in ``triton/language/random.py``). The functions
here compute the same numbers bit for bit on any device, so the reference path draws exactly the
samples the Triton kernels draw for a given seed (the tests check it); the only caveat is a near-tie of
two perturbed scores, which float32 and float64 may break differently.

All arithmetic is on int64 tensors holding unsigned 32-bit values; the 32x32-bit products that Philox
needs are split into 16-bit halves so that no intermediate exceeds 2**49.
"""

from __future__ import annotations

import torch

__all__ = ["gumbel", "philox_uint32", "uniform"]

_MASK32 = 0xFFFFFFFF
_KEY_A = 0x9E3779B9
_KEY_B = 0xBB67AE85
_ROUND_A = 0xD2511F53
_ROUND_B = 0xCD9E8D57
_ROUNDS = 10
#: ``uint_to_uniform_float``'s scale: the largest float32 with ``(2**31 - 1) * scale < 1``.
_SCALE = 4.6566127342e-10


def _mul_hi_lo(a: int, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """High and low 32-bit words of ``a * b`` for a 32-bit constant ``a`` and 32-bit values ``b``."""
    b_hi, b_lo = b >> 16, b & 0xFFFF
    hi_part, lo_part = a * b_hi, a * b_lo  # each < 2**48
    hi = (hi_part + (lo_part >> 16)) >> 16
    lo = ((hi_part << 16) + lo_part) & _MASK32
    return hi, lo


def philox_uint32(seed: int | torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """The first Philox 4x32-10 output word for counters ``(offset, 0, 0, 0)`` and a 64-bit ``seed``.

    Args:
        seed: the key, a Python int or a one-element int64 tensor (read as unsigned 64-bit).
        offset: int32 or int64 tensor of counters in ``[0, 2**31)``.

    Returns:
        int64 tensor of the shape of ``offset`` with values in ``[0, 2**32)``.
    """
    off = offset.to(torch.int64)
    if isinstance(seed, torch.Tensor):
        s = seed.reshape(()).to(device=off.device, dtype=torch.int64)
        k0 = s & _MASK32
        k1 = (s >> 32) & _MASK32
    else:
        s_int = int(seed) & ((1 << 64) - 1)
        k0 = torch.tensor(s_int & _MASK32, dtype=torch.int64, device=off.device)
        k1 = torch.tensor(s_int >> 32, dtype=torch.int64, device=off.device)
    c0 = off & _MASK32
    c1 = torch.zeros_like(c0)
    c2 = torch.zeros_like(c0)
    c3 = torch.zeros_like(c0)
    for _ in range(_ROUNDS):
        hi_b, lo_b = _mul_hi_lo(_ROUND_B, c2)
        hi_a, lo_a = _mul_hi_lo(_ROUND_A, c0)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0 = (k0 + _KEY_A) & _MASK32
        k1 = (k1 + _KEY_B) & _MASK32
    return c0


def uniform(seed: int | torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """``tl.rand(seed, offset)``: float32 uniforms in ``[0, 1)``, bit-identical to Triton's."""
    word = philox_uint32(seed, offset)
    signed = torch.where(word >= 2**31, word - 2**32, word)  # bitcast to int32
    folded = torch.where(signed < 0, -signed - 1, signed)  # ~x for negative x
    return folded.to(torch.float32) * torch.tensor(_SCALE, dtype=torch.float32, device=word.device)


def gumbel(seed: int | torch.Tensor, offset: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Standard Gumbel noise ``-log(-log(u))`` from :func:`uniform`, computed in ``dtype``.

    ``u == 0`` (probability 2**-31 per draw) gives ``-inf``, i.e. that candidate is never chosen.
    """
    u = uniform(seed, offset).to(dtype)
    return -torch.log(-torch.log(u))
