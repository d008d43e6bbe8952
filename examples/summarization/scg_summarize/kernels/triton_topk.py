"""Triton beam step: fused output projection, log-softmax and top-k over the vocabulary.

The ``(R, V)`` logits are never written to memory. Two launches:

1. ``_topk_blocks`` (grid ``(cdiv(R, BLOCK_R), cdiv(V, BLOCK_V))``): a ``BLOCK_R x BLOCK_V`` logit tile by
   ``tl.dot`` over hidden tiles (IEEE fp32 accumulation; bf16 inputs use the tensor cores), plus the bias;
   per row the tile's max, its sum of ``exp(logit - max)`` and its ``k`` best ``(logit, index)`` pairs.
2. ``_topk_combine`` (grid ``(R,)``): the log-normaliser from the partials and the ``k`` best of the
   ``k * cdiv(V, BLOCK_V)`` candidates; values are ``logit - lse``.

Rows are beams: the caller passes ``hidden`` of shape ``(B * beam, H)``; nothing is copied per beam.
"""

# mypy: disable-error-code="untyped-decorator,no-untyped-def"

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .triton_common import cdiv, in_dtype, kernel_float, next_best, pow2

__all__ = ["OPTIONS", "launch_meta", "logsoftmax_topk"]

#: Launch options of both kernels (the compile check uses the same).
OPTIONS: dict[str, int] = {"num_warps": 8, "num_stages": 2}


@triton.jit
def _topk_blocks(
    hidden_ptr,
    weight_ptr,
    bias_ptr,
    part_max_ptr,
    part_sum_ptr,
    cand_val_ptr,
    cand_idx_ptr,
    R,
    V,
    H,
    n_blocks,
    K: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    IEEE: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    pid_r = tl.program_id(0)
    blk = tl.program_id(1)
    offs_r = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_v = blk * BLOCK_V + tl.arange(0, BLOCK_V)
    in_r = offs_r < R
    in_v = offs_v < V
    acc = tl.zeros([BLOCK_R, BLOCK_V], dtype=tl.float32)
    for h0 in range(0, H, BLOCK_H):
        offs_h = h0 + tl.arange(0, BLOCK_H)
        in_h = offs_h < H
        a = tl.load(hidden_ptr + offs_r[:, None] * H + offs_h[None, :], mask=in_r[:, None] & in_h[None, :], other=0.0)
        w = tl.load(
            weight_ptr + offs_v[:, None].to(tl.int64) * H + offs_h[None, :],
            mask=in_v[:, None] & in_h[None, :],
            other=0.0,
        )
        if IEEE:
            acc = tl.dot(a, tl.trans(w), acc, input_precision="ieee")
        else:
            acc = tl.dot(a, tl.trans(w), acc)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_v, mask=in_v, other=0.0).to(tl.float32)[None, :]
    valid = in_r[:, None] & in_v[None, :]
    logits = tl.where(valid, acc, float("-inf"))
    top = tl.max(logits, axis=1)
    safe_top = tl.where(top == float("-inf"), 0.0, top)
    total = tl.sum(tl.where(valid, tl.exp(logits - safe_top[:, None]), 0.0), axis=1)
    part = offs_r * n_blocks + blk
    tl.store(part_max_ptr + part, top, mask=in_r)
    tl.store(part_sum_ptr + part, total, mask=in_r)

    ids = offs_v[None, :] + tl.zeros([BLOCK_R, BLOCK_V], dtype=tl.int32)
    prev_v = tl.full([BLOCK_R], float("inf"), tl.float32)
    prev_i = tl.full([BLOCK_R], -1, tl.int32)
    for d in tl.static_range(K):
        prev_v, prev_i = next_best(logits, ids, valid, prev_v, prev_i)
        tl.store(cand_val_ptr + part * K + d, prev_v, mask=in_r)
        tl.store(cand_idx_ptr + part * K + d, prev_i, mask=in_r)


@triton.jit
def _topk_combine(
    part_max_ptr,
    part_sum_ptr,
    cand_val_ptr,
    cand_idx_ptr,
    values_ptr,
    indices_ptr,
    n_blocks,
    K: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    r = tl.program_id(0)
    offs_p = tl.arange(0, BLOCK_P)
    in_p = offs_p < n_blocks
    pmax = tl.load(part_max_ptr + r * n_blocks + offs_p, mask=in_p, other=float("-inf"))
    psum = tl.load(part_sum_ptr + r * n_blocks + offs_p, mask=in_p, other=0.0)
    top = tl.max(pmax, axis=0)
    lse = top + tl.log(tl.sum(tl.where(in_p, psum * tl.exp(pmax - top), 0.0), axis=0))

    offs_c = tl.arange(0, BLOCK_C)
    in_c = offs_c < n_blocks * K
    vals = tl.load(cand_val_ptr + r * n_blocks * K + offs_c, mask=in_c, other=float("-inf"))[None, :]
    ids = tl.load(cand_idx_ptr + r * n_blocks * K + offs_c, mask=in_c, other=2147483647)[None, :]
    prev_v = tl.full([1], float("inf"), tl.float32)
    prev_i = tl.full([1], -1, tl.int32)
    for d in tl.static_range(K):
        prev_v, prev_i = next_best(vals, ids, in_c[None, :], prev_v, prev_i)
        tl.store(values_ptr + r * K + d + tl.arange(0, 1), prev_v - lse)
        tl.store(indices_ptr + r * K + d + tl.arange(0, 1), prev_i.to(tl.int64))


def launch_meta(n_rows: int, vocab: int, hidden: int, k: int, ieee: bool) -> tuple[dict[str, int], dict[str, int]]:
    """The constexpr arguments of ``_topk_blocks`` (less ``HAS_BIAS``) and of ``_topk_combine``."""
    block_v = pow2(vocab, lo=16, hi=64)  # 32 x 64 logits at 8 warps: ~130 registers, no spills on sm_90
    n_blocks = cdiv(vocab, block_v)
    blocks = {
        "K": k,
        "IEEE": int(ieee),
        "BLOCK_R": pow2(n_rows, lo=16, hi=32),
        "BLOCK_V": block_v,
        "BLOCK_H": pow2(hidden, lo=16, hi=64),
    }
    return blocks, {"K": k, "BLOCK_P": pow2(n_blocks), "BLOCK_C": pow2(n_blocks * k)}


def logsoftmax_topk(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton version of :func:`.reference.logsoftmax_topk`."""
    out_dtype = torch.float64 if hidden.dtype == torch.float64 else torch.float32
    h_arg = kernel_float(hidden).contiguous()
    w_arg = kernel_float(weight).to(h_arg.dtype).contiguous()
    n_rows, n_hidden = h_arg.shape
    vocab = w_arg.shape[0]
    blocks_meta, combine_meta = launch_meta(n_rows, vocab, n_hidden, k, h_arg.dtype == torch.float32)
    n_blocks = cdiv(vocab, blocks_meta["BLOCK_V"])
    dev = h_arg.device
    part_max = torch.empty(n_rows, n_blocks, device=dev, dtype=torch.float32)
    part_sum = torch.empty_like(part_max)
    cand_val = torch.empty(n_rows, n_blocks, k, device=dev, dtype=torch.float32)
    cand_idx = torch.empty(n_rows, n_blocks, k, device=dev, dtype=torch.int32)
    values = torch.empty(n_rows, k, device=dev, dtype=torch.float32)
    indices = torch.empty(n_rows, k, device=dev, dtype=torch.int64)
    bias_arg = kernel_float(bias).contiguous() if bias is not None else part_max
    _topk_blocks[(cdiv(n_rows, blocks_meta["BLOCK_R"]), n_blocks)](
        h_arg,
        w_arg,
        bias_arg,
        part_max,
        part_sum,
        cand_val,
        cand_idx,
        n_rows,
        vocab,
        n_hidden,
        n_blocks,
        HAS_BIAS=bias is not None,
        **blocks_meta,
        **OPTIONS,
    )
    _topk_combine[(n_rows,)](
        part_max,
        part_sum,
        cand_val,
        cand_idx,
        values,
        indices,
        n_blocks,
        **combine_meta,
        **OPTIONS,
    )
    return in_dtype(values, out_dtype), indices
