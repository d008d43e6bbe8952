"""Triton coarse step: chunk scores, masked log-softmax over M chunks and k Gumbel-max draws.

Split over M in two launches:

1. ``_coarse_blocks`` (grid ``(R, cdiv(M, BLOCK_M))``): scores ``s_m = K_m . q`` for a block of chunks
   (the hidden size is tiled), written to the ``(R, M)`` output; the block's max and sum of
   ``exp(s - max)``; and the block's candidates: ``multinomial``, for each draw ``d`` the block's argmax
   of ``s_m + g[d, m]``; ``distinct``, the block's ``k`` best ``s_m + g[0, m]``; ``greedy``, its ``k`` best
   ``s_m``.
2. ``_coarse_combine`` (grid ``(R,)``): the choice (:func:`row_choice`: the log-normaliser from the block
   partials, the draws from the block candidates) and ``log_alpha = s - lse`` in place
   (:func:`normalize_row`). The fused step (``triton_fine.c2f_forward``) makes the same choice inside its
   fine read instead: the blocks and the read, two launches.

Gumbel-max needs no normaliser (``argmax_m s_m + g_m`` is ``argmax_m log alpha_m + g_m``), so sampling
splits over blocks exactly. The noise is ``tl.rand(seed, (r * k + d) * M + m)`` with the seed read from
device memory, the same numbers as :func:`.philox.gumbel`: a CUDA graph replay with a new seed value
resamples, and the reference draws the same chunks for the same seed.
"""

# mypy: disable-error-code="untyped-decorator,no-untyped-def"

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from .triton_common import cdiv, encoder_row, in_dtype, kernel_float, next_best, pow2

__all__ = [
    "BLOCK_H",
    "BLOCK_M",
    "MODES",
    "OPTIONS",
    "CoarsePartials",
    "coarse_blocks",
    "coarse_sample",
    "launch_meta",
    "normalize_row",
    "row_choice",
]

#: Launch options of both kernels (the compile check uses the same).
OPTIONS: dict[str, int] = {"num_warps": 4, "num_stages": 2}
#: Chunks per block of ``_coarse_blocks`` and the hidden tile of its scores: a 16 x 128 tile, 16 values per
#: thread at 4 warps (larger tiles take > 200 registers). ``benchmarks/c2f_launch_sweep.py`` varies these
#: and ``OPTIONS`` on a GPU.
BLOCK_M = 16
BLOCK_H = 128

#: The ``MODE`` constexpr is the index of the mode here (the same names as ``reference.COARSE_MODES``).
MODES = ("multinomial", "distinct", "greedy")


@triton.jit
def _coarse_blocks(
    keys_ptr,
    query_ptr,
    mask_ptr,
    rows_ptr,
    seed_ptr,
    scores_ptr,
    stats_ptr,
    cand_idx_ptr,
    M,
    H,
    stride_kb,
    stride_km,
    n_blocks,
    K: tl.constexpr,
    K_PAD: tl.constexpr,
    MODE: tl.constexpr,
    HAS_ROWS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    r = tl.program_id(0)
    blk = tl.program_id(1)
    b = encoder_row(rows_ptr, r, HAS_ROWS)
    offs_m = blk * BLOCK_M + tl.arange(0, BLOCK_M)
    in_m = offs_m < M
    acc = tl.zeros([BLOCK_M], dtype=tl.float32)
    for h0 in range(0, H, BLOCK_H):
        offs_h = h0 + tl.arange(0, BLOCK_H)
        in_h = offs_h < H
        tile = tl.load(
            keys_ptr + b * stride_kb + offs_m[:, None] * stride_km + offs_h[None, :],
            mask=in_m[:, None] & in_h[None, :],
            other=0.0,
        ).to(tl.float32)
        q = tl.load(query_ptr + r * H + offs_h, mask=in_h, other=0.0).to(tl.float32)
        acc += tl.sum(tile * q[None, :], axis=1)
    valid = in_m & (tl.load(mask_ptr + b * M + offs_m, mask=in_m, other=0) != 0)
    s = tl.where(valid, acc, float("-inf"))
    tl.store(scores_ptr + r * M + offs_m, s, mask=in_m)

    top = tl.max(s, axis=0)
    total = tl.sum(tl.where(valid, tl.exp(s - top), 0.0), axis=0)
    part = r * n_blocks + blk
    stats = stats_ptr + part * (K + 2)  # [max, sum, K candidate values]
    tl.store(stats, top)
    tl.store(stats + 1, total)

    if MODE == 0:  # multinomial: all k draws at once on a K_PAD x BLOCK_M tile
        offs_d = tl.arange(0, K_PAD)
        in_d = offs_d < K
        u = tl.rand(tl.load(seed_ptr), (r * K + offs_d[:, None]) * M + offs_m[None, :])
        v = tl.where(valid[None, :] & in_d[:, None], s[None, :] - tl.log(-tl.log(u)), float("-inf"))
        best = tl.max(v, axis=1)
        pick = tl.min(tl.where(v == best[:, None], offs_m[None, :], 2147483647), axis=1)
        tl.store(stats + 2 + offs_d, best, mask=in_d)
        tl.store(cand_idx_ptr + part * K + offs_d, pick, mask=in_d)
    else:
        if MODE == 1:  # distinct: Gumbel-top-k
            u = tl.rand(tl.load(seed_ptr), (r * K) * M + offs_m)
            v = tl.where(valid, s - tl.log(-tl.log(u)), float("-inf"))[None, :]
        else:  # greedy
            v = s[None, :]
        ids = offs_m[None, :]
        prev_v = tl.full([1], float("inf"), tl.float32)
        prev_i = tl.full([1], -1, tl.int32)
        for d in tl.static_range(K):
            prev_v, prev_i = next_best(v, ids, in_m[None, :], prev_v, prev_i)
            tl.store(stats + 2 + d + tl.arange(0, 1), prev_v)
            tl.store(cand_idx_ptr + part * K + d + tl.arange(0, 1), prev_i)


@triton.jit
def row_choice(
    stats_ptr,
    cand_idx_ptr,
    r,
    n_blocks,
    K: tl.constexpr,
    K_PAD: tl.constexpr,
    MODE: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """Row ``r``'s choice from the ``n_blocks`` block partials of :func:`_coarse_blocks`:
    ``(lse, picks, values)`` with ``lse = log sum_m exp(s_m)``, ``picks (K_PAD,)`` the chosen chunks (lanes
    ``d >= K`` unused) and ``values`` their candidate values (``s_m`` in greedy mode)."""
    offs_p = tl.arange(0, BLOCK_P)
    in_p = offs_p < n_blocks
    stats = stats_ptr + (r * n_blocks + offs_p) * (K + 2)
    pmax = tl.load(stats, mask=in_p, other=float("-inf"))
    psum = tl.load(stats + 1, mask=in_p, other=0.0)
    top = tl.max(pmax, axis=0)
    lse = top + tl.log(tl.sum(tl.where(in_p, psum * tl.exp(pmax - top), 0.0), axis=0))

    offs_d = tl.arange(0, K_PAD)
    if MODE == 0:  # per draw, the best block candidate (the first block among equal values)
        in_pd = in_p[:, None] & (offs_d < K)[None, :]
        vals = tl.load(stats[:, None] + 2 + offs_d[None, :], mask=in_pd, other=float("-inf"))
        ids = tl.load(
            cand_idx_ptr + (r * n_blocks + offs_p[:, None]) * K + offs_d[None, :], mask=in_pd, other=2147483647
        )
        values = tl.max(vals, axis=0)
        picks = tl.min(tl.where(in_pd & (vals == values[None, :]), ids, 2147483647), axis=0)
    else:  # the k best of the n_blocks * k candidates, one after another
        offs_c = tl.arange(0, BLOCK_C)
        in_c = offs_c < n_blocks * K
        at = (r * n_blocks + offs_c // K) * (K + 2) + 2 + offs_c % K
        vals = tl.load(stats_ptr + at, mask=in_c, other=float("-inf"))[None, :]
        ids = tl.load(cand_idx_ptr + r * n_blocks * K + offs_c, mask=in_c, other=2147483647)[None, :]
        prev_v = tl.full([1], float("inf"), tl.float32)
        prev_i = tl.full([1], -1, tl.int32)
        values = tl.full([K_PAD], float("-inf"), tl.float32)
        picks = tl.full([K_PAD], 2147483647, tl.int32)
        for d in tl.static_range(K):
            prev_v, prev_i = next_best(vals, ids, in_c[None, :], prev_v, prev_i)
            values = tl.where(offs_d == d, tl.sum(prev_v, axis=0), values)
            picks = tl.where(offs_d == d, tl.sum(prev_i, axis=0), picks)
    return lse, picks, values


@triton.jit
def normalize_row(scores_ptr, r, M, lse, BLOCK_M: tl.constexpr):
    """``log_alpha = s - lse`` over row ``r`` of the ``(R, M)`` scores, in place."""
    for m0 in range(0, M, BLOCK_M):
        offs_m = m0 + tl.arange(0, BLOCK_M)
        in_m = offs_m < M
        s = tl.load(scores_ptr + r * M + offs_m, mask=in_m, other=0.0)
        tl.store(scores_ptr + r * M + offs_m, s - lse, mask=in_m)


@triton.jit
def _coarse_combine(
    scores_ptr,
    stats_ptr,
    cand_idx_ptr,
    idx_ptr,
    M,
    n_blocks,
    K: tl.constexpr,
    K_PAD: tl.constexpr,
    MODE: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_C: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    r = tl.program_id(0)
    lse, picks, _ = row_choice(stats_ptr, cand_idx_ptr, r, n_blocks, K, K_PAD, MODE, BLOCK_P, BLOCK_C)
    offs_d = tl.arange(0, K_PAD)
    tl.store(idx_ptr + r * K + offs_d, picks.to(tl.int64), mask=offs_d < K)
    normalize_row(scores_ptr, r, M, lse, BLOCK_M)


def launch_meta(m: int, hidden: int, k: int, mode: str) -> tuple[dict[str, int], dict[str, int]]:
    """The constexpr arguments of ``_coarse_blocks`` (less ``HAS_ROWS``) and of ``_coarse_combine`` (the
    choice's constexprs, which the fused fine read takes too)."""
    n_blocks = cdiv(m, BLOCK_M)
    code = MODES.index(mode)
    blocks = {"K": k, "K_PAD": pow2(k), "MODE": code, "BLOCK_M": BLOCK_M, "BLOCK_H": pow2(hidden, lo=16, hi=BLOCK_H)}
    combine = {
        "K": k,
        "K_PAD": pow2(k),
        "MODE": code,
        "BLOCK_P": pow2(n_blocks),
        "BLOCK_C": pow2(n_blocks * k),
        "BLOCK_M": pow2(m, lo=16, hi=1024),
    }
    return blocks, combine


@dataclass(kw_only=True, slots=True)
class CoarsePartials:
    """What :func:`coarse_blocks` leaves for a choice (``_coarse_combine`` or the fused fine read)."""

    scores: torch.Tensor
    """``(R, M)`` fp32: the masked scores ``s`` (``-inf`` at padded chunks); the choice makes them
    ``log_alpha`` in place."""
    stats: torch.Tensor
    """``(R, n_blocks, k + 2)`` fp32: per block its max, its sum of ``exp(s - max)`` and ``k`` candidate values."""
    cand_idx: torch.Tensor
    """``(R, n_blocks, k)`` int32: the candidates' chunks."""
    choice_meta: dict[str, int]
    """The constexprs of the choice (``launch_meta``'s second dict)."""

    @property
    def n_blocks(self) -> int:
        """The number of chunk blocks (partials per row)."""
        return int(self.stats.shape[1])


def coarse_blocks(
    keys: torch.Tensor,
    query: torch.Tensor,
    chunk_mask: torch.Tensor,
    seed: torch.Tensor,
    k: int,
    mode: str,
    rows: torch.Tensor | None,
) -> CoarsePartials:
    """Launch ``_coarse_blocks`` (the first half of :func:`coarse_sample`)."""
    keys, query = kernel_float(keys), kernel_float(query).contiguous()
    if keys.stride(-1) != 1:
        keys = keys.contiguous()
    n_rows, hidden = query.shape
    m = keys.shape[1]
    blocks_meta, choice_meta = launch_meta(m, hidden, k, mode)
    n_blocks = cdiv(m, blocks_meta["BLOCK_M"])
    dev = query.device
    scores = torch.empty(n_rows, m, device=dev, dtype=torch.float32)
    stats = torch.empty(n_rows, n_blocks, k + 2, device=dev, dtype=torch.float32)
    cand_idx = torch.empty(n_rows, n_blocks, k, device=dev, dtype=torch.int32)
    mask = in_dtype(chunk_mask, torch.bool).contiguous().view(torch.uint8)
    rows_arg = rows.contiguous() if rows is not None else cand_idx  # any pointer when HAS_ROWS is False
    seed_arg = in_dtype(seed.reshape(1), torch.int64)  # (on the device: the op checked)
    _coarse_blocks[(n_rows, n_blocks)](
        keys,
        query,
        mask,
        rows_arg,
        seed_arg,
        scores,
        stats,
        cand_idx,
        m,
        hidden,
        keys.stride(0),
        keys.stride(1),
        n_blocks,
        HAS_ROWS=rows is not None,
        **blocks_meta,
        **OPTIONS,
    )
    return CoarsePartials(scores=scores, stats=stats, cand_idx=cand_idx, choice_meta=choice_meta)


def coarse_sample(
    keys: torch.Tensor,
    query: torch.Tensor,
    chunk_mask: torch.Tensor,
    seed: torch.Tensor,
    k: int,
    mode: str,
    rows: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton version of :func:`.reference.coarse_sample` (same arguments, same results)."""
    out_dtype = torch.float64 if query.dtype == torch.float64 else torch.float32
    part = coarse_blocks(keys, query, chunk_mask, seed, k, mode, rows)
    n_rows, m = part.scores.shape
    idx = torch.empty(n_rows, k, device=part.scores.device, dtype=torch.int64)
    _coarse_combine[(n_rows,)](
        part.scores,
        part.stats,
        part.cand_idx,
        idx,
        m,
        part.n_blocks,
        **part.choice_meta,
        **OPTIONS,
    )
    return in_dtype(part.scores, out_dtype), idx
