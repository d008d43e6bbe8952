"""Triton's Philox 4x32-10 counter-based generator, reimplemented with torch integer ops.

``tl.rand(seed, offset)`` with an int32 ``offset`` block runs Philox 4x32 with ten rounds on the
counter ``(offset, 0, 0, 0)`` and the key ``(seed & 0xffffffff, seed >> 32)``, keeps the first output
word and maps it to ``[0, 1)`` (``uint_to_uniform_float`` in ``triton/language/random.py``). The functions
here compute the same numbers bit for bit on any device, so the reference path draws exactly the
samples the Triton kernels draw for a given seed (the tests check it); the only caveat is a near-tie of
two perturbed scores, which float32 and float64 may break differently.

All arithmetic is on int64 tensors holding unsigned 32-bit values; the two multiplications of a round
run as one op on a stacked ``(2, n)`` tensor, so a draw costs about 60 small tensor ops.
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


def philox_uint32(seed: int | torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """The first Philox 4x32-10 output word for counters ``(offset, 0, 0, 0)`` and a 64-bit ``seed``.

    Args:
        seed: the key, a Python int or a one-element int64 tensor (read as unsigned 64-bit).
        offset: int32 or int64 tensor of counters in ``[0, 2**31)``.

    Returns:
        int64 tensor of the shape of ``offset`` with values in ``[0, 2**32)``.
    """
    off = offset.to(torch.int64).reshape(-1)
    dev = off.device
    if isinstance(seed, torch.Tensor):
        s = seed.reshape(1).to(device=dev, dtype=torch.int64)
    else:
        s = torch.tensor([int(seed) & ((1 << 64) - 1)], dtype=torch.uint64).view(torch.int64).to(dev)
    steps = torch.arange(_ROUNDS, device=dev, dtype=torch.int64)
    k0 = (s & _MASK32) + steps * _KEY_A
    k1 = ((s >> 32) & _MASK32) + steps * _KEY_B
    schedule = torch.stack([k0, k1], dim=1) & _MASK32  # (rounds, 2): the key of each round
    mult = torch.full((2, 1), _ROUND_B, device=dev, dtype=torch.int64)
    mult[1] = _ROUND_A
    # No tensor is built from host data, so this also runs under CUDA graph capture. Rows (c2, c0) are
    # multiplied, rows (c1, c3) xored in. A product of two 32-bit values needs 64 bits: int64
    # multiplication wraps around, which keeps all 64 bits, and a shift and a mask give the high word.
    # The counter is (offset, 0, 0, 0).
    mixed = torch.stack([torch.zeros_like(off), off & _MASK32])  # (c2, c0)
    other = torch.zeros_like(mixed)  # (c1, c3)
    for r in range(_ROUNDS):
        prod = mixed * mult  # (B * c2, A * c0)
        new_even = ((prod >> 32) & _MASK32) ^ other ^ schedule[r].unsqueeze(1)  # (c0', c2')
        other = prod & _MASK32  # (c1', c3')
        mixed = new_even.flip(0)  # (c2', c0')
    return mixed[1].reshape(offset.shape)


def uniform(seed: int | torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """``tl.rand(seed, offset)``: float32 uniforms in ``[0, 1)``, bit-identical to Triton's."""
    word = philox_uint32(seed, offset)
    signed = torch.where(word >= 2**31, word - 2**32, word)  # bitcast to int32
    folded = torch.where(signed < 0, -signed - 1, signed)  # ~x for negative x
    return folded.to(torch.float32) * _SCALE  # float32 times the float32-rounded scale, as in Triton


def gumbel(seed: int | torch.Tensor, offset: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Standard Gumbel noise ``-log(-log(u))`` from :func:`uniform`, computed in ``dtype``.

    ``u == 0`` (probability 2**-31 per draw) gives ``-inf``, i.e. that candidate is never chosen.
    """
    u = uniform(seed, offset).to(dtype)
    return -torch.log(-torch.log(u))
