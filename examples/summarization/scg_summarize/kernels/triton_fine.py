"""Triton fine step: gather the selected chunks' words, per-chunk softmax, weighted context; and backward.

The kernels read only the ``k`` selected chunks of each query row's encoder row, straight from ``words``
(no gathered copy), tiling the hidden size so that an ``N_PAD x BLOCK_H`` tile stays in registers:

* forward, one launch of ``_fine_read`` on a ``(R, H / 64)`` grid (one program per query row and hidden
  slice): per draw, the scores over the whole hidden size (the slices' programs of one row read the same
  chunk, the repeats mostly from L2), the masked softmax over the chunk's real words, and the program's
  hidden slice of ``sum_d w_d sum_n p_dn h_dn``. One program per row (the first design) kept only 64
  programs busy at B = 64 and ran at 5% of the copy bandwidth on an H100; the split gives ``R * H / 64``
  programs. With ``CHOOSE`` the same launch also makes the coarse choice from ``_coarse_blocks``' partials
  (:func:`c2f_forward`: the whole C2F step in two launches).
* backward, one program per row: pass 1 per draw gives ``u_dj = dc . h_dj`` and from it ``ds`` and
  ``dw``; pass 2 per hidden tile gives ``dq`` and the per-draw word gradients ``w_d p_dj dc + ds_dj q``,
  written to an ``(R, k, N, H)`` buffer (``k N H`` per row, independent of M).
  :func:`.reference.scatter_word_grad` then places them in the gradient of ``words`` (grouped by
  ``(row, chunk)``).

No program writes what another program of the same launch reads: no atomics, deterministic results.
"""

# mypy: disable-error-code="untyped-decorator,no-untyped-def"

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .triton_coarse import CoarsePartials, coarse_blocks, normalize_row, row_choice
from .triton_common import cdiv, encoder_row, in_dtype, kernel_float, pow2

__all__ = [
    "BACKWARD_OPTIONS",
    "FORWARD_BLOCK_H",
    "FORWARD_OPTIONS",
    "FORWARD_TILE_H",
    "c2f_forward",
    "fine_backward",
    "fine_forward",
    "forward_meta",
    "launch_meta",
    "read_choice",
]

#: Launch options (the compile check uses the same).
FORWARD_OPTIONS: dict[str, int] = {"num_warps": 8, "num_stages": 2}
#: Hidden slice of one forward program for k <= 2 draws (half of it from k = 3 on; :func:`forward_meta`).
FORWARD_BLOCK_H = 128
#: Hidden tile of the forward's score loop (each program reads its chunk's whole hidden size in these tiles).
FORWARD_TILE_H = 64
BACKWARD_OPTIONS: dict[str, int] = {"num_warps": 8, "num_stages": 2}


@triton.jit
def _fine_read(
    words_ptr,
    wmask_ptr,
    query_ptr,
    rows_ptr,
    idx_ptr,
    weights_ptr,
    scores_ptr,
    stats_ptr,
    cand_idx_ptr,
    context_ptr,
    attn_ptr,
    M,
    N,
    H,
    stride_wb,
    stride_wm,
    stride_wn,
    n_blocks,
    K: tl.constexpr,
    K_PAD: tl.constexpr,
    N_PAD: tl.constexpr,
    BLOCK_H: tl.constexpr,
    TILE_H: tl.constexpr,
    HAS_ROWS: tl.constexpr,
    CHOOSE: tl.constexpr,
    MODE: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_C: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    """Program ``(r, j)``: per draw ``d`` of row ``r``, the scores over the whole hidden size (in tiles of
    ``TILE_H``; the other slices' programs read the same chunk, mostly from L2), the masked softmax over the
    chunk's real words (written to ``attn`` by the slice-0 program), and the ``j``-th hidden slice of
    ``sum_d w_d sum_n p_dn h_dn``.

    ``CHOOSE``: the chunks and weights are not given but chosen here from the coarse block partials
    (:func:`.triton_coarse.row_choice`, redone by every slice's program); the slice-0 program writes them to
    ``idx`` and ``weights`` and turns the row's scores into ``log_alpha`` in place. Otherwise ``idx`` and
    ``weights`` are read, and ``scores``, ``stats``, ``cand_idx`` are not used.
    """
    r = tl.program_id(0)
    j = tl.program_id(1)
    b = encoder_row(rows_ptr, r, HAS_ROWS)
    offs_d = tl.arange(0, K_PAD)
    in_d = offs_d < K
    if CHOOSE:
        lse, picks, values = row_choice(stats_ptr, cand_idx_ptr, r, n_blocks, K, K_PAD, MODE, BLOCK_P, BLOCK_C)
        if MODE == 2:  # greedy: alpha renormalised over the chosen chunks
            top = tl.max(tl.where(in_d, values, float("-inf")), axis=0)
            ex = tl.where(in_d, tl.exp(values - top), 0.0)
            wts = ex / tl.sum(ex, axis=0)
        else:  # each draw weighs 1/k (a chunk drawn twice: mu_i / k)
            wts = tl.where(in_d, 1.0 / K, 0.0)
        if j == 0:
            tl.store(idx_ptr + r * K + offs_d, picks.to(tl.int64), mask=in_d)
            tl.store(weights_ptr + r * K + offs_d, wts.to(weights_ptr.dtype.element_ty), mask=in_d)
            normalize_row(scores_ptr, r, M, lse, BLOCK_M)
        chunks = picks.to(tl.int64)
    else:
        chunks = tl.load(idx_ptr + r * K + offs_d, mask=in_d, other=0).to(tl.int64)
        wts = tl.load(weights_ptr + r * K + offs_d, mask=in_d, other=0.0).to(tl.float32)

    offs_n = tl.arange(0, N_PAD)
    in_n = offs_n < N
    offs_h = j * BLOCK_H + tl.arange(0, BLOCK_H)
    in_h = offs_h < H
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for d in tl.static_range(K):
        c = tl.sum(tl.where(offs_d == d, chunks, 0), axis=0)
        w = tl.sum(tl.where(offs_d == d, wts, 0.0), axis=0)
        base = words_ptr + b * stride_wb + c * stride_wm + offs_n[:, None] * stride_wn
        s = tl.zeros([N_PAD], dtype=tl.float32)
        for h0 in range(0, H, TILE_H):
            offs_t = h0 + tl.arange(0, TILE_H)
            in_t = offs_t < H
            tile = tl.load(base + offs_t[None, :], mask=in_n[:, None] & in_t[None, :], other=0.0).to(tl.float32)
            q = tl.load(query_ptr + r * H + offs_t, mask=in_t, other=0.0).to(tl.float32)
            s += tl.sum(tile * q[None, :], axis=1)
        real = in_n & (tl.load(wmask_ptr + (b * M + c) * N + offs_n, mask=in_n, other=0) != 0)
        s = tl.where(real, s, float("-inf"))
        top = tl.max(s, axis=0)
        top = tl.where(top == float("-inf"), 0.0, top)
        ex = tl.where(real, tl.exp(s - top), 0.0)
        total = tl.sum(ex, axis=0)
        p = ex / tl.where(total > 0, total, 1.0)
        if j == 0:
            tl.store(attn_ptr + (r * K + d) * N + offs_n, p, mask=in_n)
        e = tl.load(base + offs_h[None, :], mask=in_n[:, None] & in_h[None, :], other=0.0).to(tl.float32)
        acc += w * tl.sum(p[:, None] * e, axis=0)
    tl.store(context_ptr + r * H + offs_h, acc.to(context_ptr.dtype.element_ty), mask=in_h)


@triton.jit
def _fine_backward(
    dctx_ptr,
    dattn_ptr,
    words_ptr,
    query_ptr,
    idx_ptr,
    weights_ptr,
    attn_ptr,
    rows_ptr,
    dsel_ptr,
    dquery_ptr,
    dweights_ptr,
    N,
    H,
    stride_wb,
    stride_wm,
    stride_wn,
    K: tl.constexpr,
    K_PAD: tl.constexpr,
    N_PAD: tl.constexpr,
    BLOCK_H: tl.constexpr,
    HAS_ROWS: tl.constexpr,
    HAS_DATTN: tl.constexpr,
):
    r = tl.program_id(0)
    b = encoder_row(rows_ptr, r, HAS_ROWS)
    offs_n = tl.arange(0, N_PAD)
    in_n = offs_n < N
    offs_k = tl.arange(0, K_PAD)
    coef_dc = tl.zeros([K_PAD, N_PAD], dtype=tl.float32)  # w_d p_dj
    coef_q = tl.zeros([K_PAD, N_PAD], dtype=tl.float32)  # ds_dj
    for d in tl.static_range(K):
        c = tl.load(idx_ptr + r * K + d)
        w = tl.load(weights_ptr + r * K + d).to(tl.float32)
        p = tl.load(attn_ptr + (r * K + d) * N + offs_n, mask=in_n, other=0.0)
        base = words_ptr + b * stride_wb + c * stride_wm
        u = tl.zeros([N_PAD], dtype=tl.float32)
        for h0 in range(0, H, BLOCK_H):
            offs_h = h0 + tl.arange(0, BLOCK_H)
            in_h = offs_h < H
            e = tl.load(
                base + offs_n[:, None] * stride_wn + offs_h[None, :], mask=in_n[:, None] & in_h[None, :], other=0.0
            ).to(tl.float32)
            g = tl.load(dctx_ptr + r * H + offs_h, mask=in_h, other=0.0).to(tl.float32)
            u += tl.sum(e * g[None, :], axis=1)
        dp = w * u
        if HAS_DATTN:
            dp += tl.load(dattn_ptr + (r * K + d) * N + offs_n, mask=in_n, other=0.0).to(tl.float32)
        ds = p * (dp - tl.sum(p * dp, axis=0))
        tl.store(dweights_ptr + r * K + d, tl.sum(p * u, axis=0))
        coef_dc = tl.where(offs_k[:, None] == d, (w * p)[None, :], coef_dc)
        coef_q = tl.where(offs_k[:, None] == d, ds[None, :], coef_q)

    for h0 in range(0, H, BLOCK_H):
        offs_h = h0 + tl.arange(0, BLOCK_H)
        in_h = offs_h < H
        g = tl.load(dctx_ptr + r * H + offs_h, mask=in_h, other=0.0).to(tl.float32)
        q = tl.load(query_ptr + r * H + offs_h, mask=in_h, other=0.0).to(tl.float32)
        dq = tl.zeros([BLOCK_H], dtype=tl.float32)
        for d in tl.static_range(K):
            c = tl.load(idx_ptr + r * K + d)
            e = tl.load(
                words_ptr + b * stride_wb + c * stride_wm + offs_n[:, None] * stride_wn + offs_h[None, :],
                mask=in_n[:, None] & in_h[None, :],
                other=0.0,
            ).to(tl.float32)
            a = tl.sum(tl.where(offs_k[:, None] == d, coef_dc, 0.0), axis=0)
            ds = tl.sum(tl.where(offs_k[:, None] == d, coef_q, 0.0), axis=0)
            dq += tl.sum(ds[:, None] * e, axis=0)
            de = a[:, None] * g[None, :] + ds[:, None] * q[None, :]
            tl.store(
                dsel_ptr + ((r * K + d) * N + offs_n[:, None]).to(tl.int64) * H + offs_h[None, :],
                de.to(dsel_ptr.dtype.element_ty),
                mask=in_n[:, None] & in_h[None, :],
            )
        tl.store(dquery_ptr + r * H + offs_h, dq, mask=in_h)


def _words_arg(words: torch.Tensor) -> torch.Tensor:
    words = kernel_float(words)
    return words if words.stride(-1) == 1 else words.contiguous()


def launch_meta(k: int, n: int, hidden: int) -> dict[str, int]:
    """The constexpr arguments of ``_fine_backward`` (less the ``HAS_*`` flags).

    Sized with :mod:`.compile_check` for N=40 (padded to 64), k <= 3 and 8 warps: a 64 x 32 tile (the
    backward keeps several tiles live), no spills on sm_90.
    """
    return {"K": k, "K_PAD": pow2(k), "N_PAD": pow2(n, lo=16), "BLOCK_H": pow2(hidden, lo=16, hi=32)}


def forward_meta(k: int, n: int, hidden: int) -> tuple[dict[str, int], int]:
    """``(constexprs of _fine_read less HAS_ROWS and the choice's, number of hidden slices)``.

    One program per (query row, hidden slice of ``FORWARD_BLOCK_H``): at B = 64 rows and H = 512 that is 256
    programs, so the whole GPU keeps loads in flight (one program per row was latency-bound: 5% of the copy
    bandwidth). Each program reads its chunk's whole ``N_PAD x H`` for the scores in tiles of ``TILE_H``.
    Chosen on an H100 among eight (slice, tile, warps) settings by the summed time of the graphed step at
    M = 10 and 1000, k = 1 and 2 (closing note of issue 29); registers on sm_90 (:mod:`.compile_check`,
    N = 40): the draws' loops are unrolled, so from k = 3 on the slice is halved, the 128 slice taking all
    255 registers and spilling there (a 64 x 128 score tile, or 4 warps, spill too).
    """
    block_h = pow2(hidden, lo=16, hi=FORWARD_BLOCK_H if k <= 2 else FORWARD_BLOCK_H // 2)
    meta = {
        "K": k,
        "K_PAD": pow2(k),
        "N_PAD": pow2(n, lo=16),
        "BLOCK_H": block_h,
        "TILE_H": pow2(hidden, lo=16, hi=FORWARD_TILE_H),
    }
    return meta, cdiv(hidden, block_h)


def read_choice(choice_meta: dict[str, int] | None) -> dict[str, int]:
    """The choice's constexprs of ``_fine_read``: from the coarse ``launch_meta``'s second dict
    (``CHOOSE``), or, for given chunks (``None``), placeholders the kernel does not read."""
    if choice_meta is None:
        return {"CHOOSE": False, "MODE": 0, "BLOCK_P": 1, "BLOCK_C": 1, "BLOCK_M": 16}
    return {"CHOOSE": True, **{key: choice_meta[key] for key in ("MODE", "BLOCK_P", "BLOCK_C", "BLOCK_M")}}


def _read(
    words: torch.Tensor,
    word_mask: torch.Tensor,
    query: torch.Tensor,
    idx: torch.Tensor,
    weights: torch.Tensor,
    rows: torch.Tensor | None,
    part: CoarsePartials | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch ``_fine_read``: with ``part``, it chooses the chunks and fills ``idx`` and ``weights``."""
    acc = torch.float64 if query.dtype == torch.float64 else torch.float32
    w_arg, q_arg = _words_arg(words), kernel_float(query).contiguous()
    n_rows, k = idx.shape
    _, m, n, hidden = words.shape
    dev = query.device
    meta, n_split = forward_meta(k, n, hidden)
    context = torch.empty(n_rows, hidden, device=dev, dtype=q_arg.dtype)
    attn = torch.empty(n_rows, k, n, device=dev, dtype=torch.float32)
    if part is None:
        choice, scores, stats, cand_idx, n_blocks = read_choice(None), attn, attn, idx, 0  # (unused pointers: any)
    else:
        choice = read_choice(part.choice_meta)
        scores, stats, cand_idx, n_blocks = part.scores, part.stats, part.cand_idx, part.n_blocks
    _fine_read[(n_rows, n_split)](
        w_arg,
        in_dtype(word_mask, torch.bool).contiguous().view(torch.uint8),
        q_arg,
        rows.contiguous() if rows is not None else idx,
        idx,
        weights,
        scores,
        stats,
        cand_idx,
        context,
        attn,
        m,
        n,
        hidden,
        w_arg.stride(0),
        w_arg.stride(1),
        w_arg.stride(2),
        n_blocks,
        HAS_ROWS=rows is not None,
        **meta,
        **choice,
        **FORWARD_OPTIONS,
    )
    return in_dtype(context, query.dtype), in_dtype(attn, acc)


def fine_forward(
    words: torch.Tensor,
    word_mask: torch.Tensor,
    query: torch.Tensor,
    idx: torch.Tensor,
    weights: torch.Tensor,
    rows: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton version of :func:`.reference.fine_attend` (one launch)."""
    return _read(words, word_mask, query, idx.contiguous(), kernel_float(weights).contiguous(), rows, None)


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
    """Triton version of :func:`.reference.c2f_attend` in two launches: ``_coarse_blocks``, then
    ``_fine_read`` choosing the chunks from the block partials."""
    out_dtype = torch.float64 if query_coarse.dtype == torch.float64 else torch.float32
    part = coarse_blocks(keys, query_coarse, chunk_mask, seed, k, mode, rows)
    n_rows = part.scores.shape[0]
    idx = torch.empty(n_rows, k, device=part.scores.device, dtype=torch.int64)
    weights = torch.empty(n_rows, k, device=part.scores.device, dtype=out_dtype)
    context, attn = _read(words, word_mask, query_fine, idx, weights, rows, part)
    return in_dtype(part.scores, out_dtype), idx, weights, context, attn


def fine_backward(
    grad_context: torch.Tensor,
    grad_attn: torch.Tensor | None,
    words: torch.Tensor,
    query: torch.Tensor,
    idx: torch.Tensor,
    weights: torch.Tensor,
    attn: torch.Tensor,
    rows: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Triton version of :func:`.reference.fine_backward`."""
    w_arg = _words_arg(words)
    n_rows, k = idx.shape
    _, _, n, hidden = words.shape
    dev = query.device
    d_sel = torch.empty(n_rows, k, n, hidden, device=dev, dtype=torch.float32)
    d_query = torch.empty(n_rows, hidden, device=dev, dtype=torch.float32)
    d_weights = torch.empty(n_rows, k, device=dev, dtype=torch.float32)
    dattn = grad_attn.to(torch.float32).contiguous() if grad_attn is not None else attn
    rows_arg = rows.contiguous() if rows is not None else idx
    _fine_backward[(n_rows,)](
        kernel_float(grad_context).contiguous(),
        dattn,
        w_arg,
        kernel_float(query).contiguous(),
        idx.contiguous(),
        kernel_float(weights).contiguous(),
        attn.to(torch.float32).contiguous(),
        rows_arg,
        d_sel,
        d_query,
        d_weights,
        n,
        hidden,
        w_arg.stride(0),
        w_arg.stride(1),
        w_arg.stride(2),
        HAS_ROWS=rows is not None,
        HAS_DATTN=grad_attn is not None,
        **launch_meta(k, n, hidden),
        **BACKWARD_OPTIONS,
    )
    acc = attn.dtype
    return in_dtype(d_sel, acc), in_dtype(d_query, query.dtype), in_dtype(d_weights, weights.dtype)
