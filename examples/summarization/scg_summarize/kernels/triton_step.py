"""Triton C2F step in one launch: the coarse blocks, the chunk choice and the fine read.

``_c2f_step`` runs on a 1-D grid of ``R * (n_blocks + n_split)`` programs. Each program first takes a
ticket ``t`` from a counter (``tl.atomic_add``); ticket ``t`` is row ``r = t // (n_blocks + n_split)``,
slot ``t % (n_blocks + n_split)``:

* slot ``< n_blocks``: block ``slot`` of the row's coarse pass (:func:`.triton_coarse.coarse_block`: its
  chunk scores and partials), then a release increment of the row's counter ``done[r]``;
* otherwise hidden slice ``j = slot - n_blocks`` of the row's read: it waits (acquire) until ``done[r]``
  reaches ``n_blocks``, makes the choice from the partials (:func:`.triton_coarse.row_choice`; slice 0
  writes ``idx``, the weights and ``log_alpha = s - lse`` in place) and reads its slice
  (:func:`.triton_fine.read_slice`).

**Why the wait cannot deadlock.** A program waits only for programs holding smaller tickets, and a
program holds a ticket only once it runs, so everything waited on is already resident and waits on
nothing itself (the tickets, not ``tl.program_id``, give the order: CUDA does not promise to start the
programs of a grid in index order; CUB's decoupled look-back takes its tile numbers the same way). The
interpreter runs the programs one after another in ticket order, so there the wait never spins.

**Memory order.** A block program's stores reach the row's read through a CTA barrier
(``tl.debug_barrier``) and the release increment; the reader's acquire load, another barrier, and
loads of the partials that bypass L1 (``.cg`` in ``row_choice`` / ``normalize_row``).

So the rows' reads overlap the later rows' coarse blocks, and only the last row's read is left after the
coarse pass (with two launches every read waited for the whole coarse pass to end). The ``R + 1``
counters (``done`` and the ticket) are zeroed by ``torch.zeros`` before the launch: a memset and the
kernel, two launches a step.
"""

# mypy: disable-error-code="untyped-decorator,no-untyped-def"

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .triton_coarse import coarse_block, coarse_launch, normalize_row, row_choice
from .triton_common import cdiv, encoder_row, in_dtype, kernel_float, pow2
from .triton_fine import read_slice, words_arg

__all__ = ["STEP_READ", "c2f_forward", "step_meta"]

#: ``(num_warps, BLOCK_H, TILE_H)`` of the step for k <= 2 draws and for k >= 3: one ``num_warps`` and one
#: register count serve the coarse blocks and the read, so the read's tiles are smaller than
#: ``_fine_read``'s (at its ``128 / 64`` slice and tile the step takes 251 registers on sm_90, two programs
#: per SM, and the coarse blocks would stream at a third of their occupancy). On sm_90 (``N = 40``,
#: ``H = 512``, :mod:`.compile_check`): k = 1 76 registers, k = 2 120, k = 3 122, no spills.
STEP_READ: dict[bool, tuple[int, int, int]] = {True: (8, 128, 64), False: (8, 32, 32)}


@triton.jit
def _c2f_step(
    keys_ptr,
    query_c_ptr,
    cmask_ptr,
    rows_ptr,
    seed_ptr,
    scores_ptr,
    stats_ptr,
    cand_idx_ptr,
    count_ptr,
    words_ptr,
    wmask_ptr,
    query_f_ptr,
    idx_ptr,
    weights_ptr,
    context_ptr,
    attn_ptr,
    R,
    M,
    D,
    N,
    H,
    stride_kb,
    stride_km,
    stride_wb,
    stride_wm,
    stride_wn,
    n_blocks,
    n_split,
    K: tl.constexpr,
    K_PAD: tl.constexpr,
    MODE: tl.constexpr,
    HAS_ROWS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_C: tl.constexpr,
    BLOCK_ROW: tl.constexpr,
    N_PAD: tl.constexpr,
    BLOCK_H: tl.constexpr,
    TILE_H: tl.constexpr,
):
    ticket = tl.atomic_add(count_ptr + R, 1)  # count[R]: the ticket counter; count[:R]: blocks done per row
    per_row = n_blocks + n_split
    r = ticket // per_row
    slot = ticket - r * per_row
    b = encoder_row(rows_ptr, r, HAS_ROWS)
    if slot < n_blocks:
        coarse_block(
            keys_ptr,
            query_c_ptr,
            cmask_ptr,
            seed_ptr,
            scores_ptr,
            stats_ptr,
            cand_idx_ptr,
            r,
            b,
            slot,
            M,
            D,
            stride_kb,
            stride_km,
            n_blocks,
            K,
            K_PAD,
            MODE,
            BLOCK_M,
            BLOCK_D,
        )
        tl.debug_barrier()  # every thread's stores before the release
        tl.atomic_add(count_ptr + r, 1, sem="release", scope="gpu")
    else:
        j = slot - n_blocks
        done = tl.atomic_add(count_ptr + r, 0, sem="acquire", scope="gpu")
        while done < n_blocks:
            done = tl.atomic_add(count_ptr + r, 0, sem="acquire", scope="gpu")
        tl.debug_barrier()  # every thread's loads after the acquire
        lse, picks, values = row_choice(stats_ptr, cand_idx_ptr, r, n_blocks, K, K_PAD, MODE, BLOCK_P, BLOCK_C)
        offs_d = tl.arange(0, K_PAD)
        in_d = offs_d < K
        if MODE == 2:  # greedy: alpha renormalised over the chosen chunks
            top = tl.max(tl.where(in_d, values, float("-inf")), axis=0)
            ex = tl.where(in_d, tl.exp(values - top), 0.0)
            wts = ex / tl.sum(ex, axis=0)
        else:  # each draw weighs 1/k (a chunk drawn twice: mu_i / k)
            wts = tl.where(in_d, 1.0 / K, 0.0)
        if j == 0:
            tl.store(idx_ptr + r * K + offs_d, picks.to(tl.int64), mask=in_d)
            tl.store(weights_ptr + r * K + offs_d, wts.to(weights_ptr.dtype.element_ty), mask=in_d)
            normalize_row(scores_ptr, r, M, lse, BLOCK_ROW)
        read_slice(
            words_ptr,
            wmask_ptr,
            query_f_ptr,
            context_ptr,
            attn_ptr,
            r,
            b,
            j,
            picks.to(tl.int64),
            wts,
            M,
            N,
            H,
            stride_wb,
            stride_wm,
            stride_wn,
            K,
            K_PAD,
            N_PAD,
            BLOCK_H,
            TILE_H,
        )


def step_meta(k: int, n: int, hidden: int) -> tuple[dict[str, int], int, dict[str, int]]:
    """``(the read's constexprs of _c2f_step, number of hidden slices, launch options)`` (:data:`STEP_READ`)."""
    warps, block_h, tile_h = STEP_READ[k <= 2]
    block_h = pow2(hidden, lo=16, hi=block_h)
    meta = {"N_PAD": pow2(n, lo=16), "BLOCK_H": block_h, "TILE_H": pow2(hidden, lo=16, hi=tile_h)}
    return meta, cdiv(hidden, block_h), {"num_warps": warps, "num_stages": 2}


def c2f_forward(
    keys: torch.Tensor,
    query_coarse: torch.Tensor,
    chunk_mask: torch.Tensor,
    words: torch.Tensor,
    word_mask: torch.Tensor,
    query_fine: torch.Tensor,
    seed: torch.Tensor,
    k: int,
    mode: str,
    rows: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Triton version of :func:`.reference.c2f_attend`: a memset of the counters and ``_c2f_step``."""
    out_dtype = torch.float64 if query_coarse.dtype == torch.float64 else torch.float32
    c = coarse_launch(keys, query_coarse, chunk_mask, seed, k, mode)
    w_arg, q_arg = words_arg(words), kernel_float(query_fine).contiguous()
    n_rows, m = c.scores.shape
    _, _, n, hidden = words.shape
    dev = q_arg.device
    read, n_split, options = step_meta(k, n, hidden)
    count = torch.zeros(n_rows + 1, device=dev, dtype=torch.int32)
    idx = torch.empty(n_rows, k, device=dev, dtype=torch.int64)
    weights = torch.empty(n_rows, k, device=dev, dtype=out_dtype)
    context = torch.empty(n_rows, hidden, device=dev, dtype=q_arg.dtype)
    attn = torch.empty(n_rows, k, n, device=dev, dtype=torch.float32)
    choice = c.choice_meta
    _c2f_step[(n_rows * (c.n_blocks + n_split),)](
        c.keys,
        c.query,
        c.mask,
        rows.contiguous() if rows is not None else idx,  # any pointer when HAS_ROWS is False
        c.seed,
        c.scores,
        c.stats,
        c.cand_idx,
        count,
        w_arg,
        in_dtype(word_mask, torch.bool).contiguous().view(torch.uint8),
        q_arg,
        idx,
        weights,
        context,
        attn,
        n_rows,
        m,
        c.query.shape[1],
        n,
        hidden,
        c.keys.stride(0),
        c.keys.stride(1),
        w_arg.stride(0),
        w_arg.stride(1),
        w_arg.stride(2),
        c.n_blocks,
        n_split,
        K=k,
        K_PAD=choice["K_PAD"],
        MODE=choice["MODE"],
        HAS_ROWS=rows is not None,
        BLOCK_M=c.blocks_meta["BLOCK_M"],
        BLOCK_D=c.blocks_meta["BLOCK_H"],
        BLOCK_P=choice["BLOCK_P"],
        BLOCK_C=choice["BLOCK_C"],
        BLOCK_ROW=choice["BLOCK_M"],
        **read,
        **options,
    )
    acc = torch.float64 if query_fine.dtype == torch.float64 else torch.float32
    return in_dtype(c.scores, out_dtype), idx, weights, in_dtype(context, query_fine.dtype), in_dtype(attn, acc)
