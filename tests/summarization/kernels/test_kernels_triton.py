"""The Triton kernels (float32; Triton's interpreter without a GPU) against the float64 reference."""

from __future__ import annotations

import pytest
import torch

from ..kernel_support import DEVICE, Case, backend, builtins_scanned_once, make_case, one_thread  # noqa: F401

triton = pytest.importorskip("triton")

import triton.language as tl  # noqa: E402  # isort: skip
from scg_summarize.kernels import (  # noqa: E402  # isort: skip
    c2f_attend,
    c2f_attention,
    c2f_coarse_sample,
    c2f_fine_attend,
    logsoftmax_topk,
)
from scg_summarize.kernels.philox import uniform  # noqa: E402  # isort: skip

pytestmark = pytest.mark.usefixtures("one_thread", "builtins_scanned_once")

#: (seed, B, M, N, H, D, k, R). The interpreter runs one program per query row (and hidden slice), and each
#: launch costs ~30 ms of CPU before its first program (it patches triton.language), so B and R stay at 1-2
#: and each shape covers several paths (all: padded words, an empty chunk, non-power-of-two sizes):
#: 0: k = 1, N = 1 (one-word chunks), one tile everywhere; 1: M = 37 spans three coarse blocks of 16 in
#: each of two rows, k = 3 (a masked draw lane of K_PAD = 4, a repeated draw), H = 45 two backward tiles of
#: 32; 2: H = 70 two forward slices of 64 (the partial-score sum) and three backward tiles, D = 133 two
#: coarse hidden tiles of 128, R = 2 beam rows reading B = 2 encoder rows swapped (rows = [1, 0]).
SHAPES = [
    (3, 2, 6, 1, 19, 5, 1, None),
    (1, 2, 37, 13, 45, 10, 3, None),
    (5, 2, 4, 3, 70, 133, 2, 2),
]
#: The fine kernels run a program per query row and hidden slice: shape 1 on one row (B = 1; the coarse test
#: keeps two rows of three blocks each) still has the masked draw lane, the repeated draw and the empty chunk.
FINE_SHAPES = [SHAPES[0], (1, 1, 37, 13, 45, 10, 3, None), SHAPES[2]]
TOL = {"rtol": 2e-5, "atol": 2e-5}


@triton.jit
def _rand_kernel(seeds_ptr, offs_ptr, out_ptr, BLOCK: tl.constexpr):
    """Program ``s``: ``tl.rand`` at the offsets under seed ``s``, into row ``s`` of ``out``."""
    s = tl.program_id(0)
    offs = tl.load(offs_ptr + tl.arange(0, BLOCK))
    tl.store(out_ptr + s * BLOCK + tl.arange(0, BLOCK), tl.rand(tl.load(seeds_ptr + s), offs))


def test_philox_matches_triton_rand() -> None:
    # The reference's Philox (seeded from a device tensor) gives tl.rand's numbers bit for bit (one launch:
    # a program per seed)
    offsets = torch.cat([torch.arange(48), torch.tensor([2**31 - 1, 2**30 + 12345, 987654321])])
    offsets = torch.cat([offsets, torch.randint(0, 2**31 - 1, (64 - offsets.numel(),))]).to(torch.int32)
    seeds = torch.tensor([0, 1, -3, 2**40 + 7, 2**63 - 1])
    out = torch.empty(len(seeds), 64, device=DEVICE)
    _rand_kernel[(len(seeds),)](seeds.to(DEVICE), offsets.to(DEVICE), out, BLOCK=64)
    for seed, row in zip(seeds, out.cpu()):
        assert torch.equal(row, uniform(seed.view(1), offsets)), int(seed)


def run_both(fn, case: Case):  # type: ignore[no-untyped-def]
    """``fn(case)`` on the float64 reference and on the float32 Triton kernels."""
    with backend("reference"):
        want = fn(case)
    with backend("triton"):
        got = fn(case.cast(torch.float32))
    return want, got


def close(got: torch.Tensor, want: torch.Tensor) -> None:
    torch.testing.assert_close(got.double(), want.double(), **TOL)


@pytest.mark.parametrize("shape", SHAPES)
def test_coarse_forward_and_backward(shape: tuple[int, ...]) -> None:
    k = shape[6]

    def fn(c: Case) -> tuple[torch.Tensor, ...]:
        keys, query = c.keys.clone().requires_grad_(True), c.query_coarse.clone().requires_grad_(True)
        seed = torch.tensor([shape[0] + 100], device=DEVICE)
        log_alpha, idx = c2f_coarse_sample(keys, query, c.chunk_mask, seed, k, "multinomial", c.rows)
        picked = log_alpha.gather(1, idx).sum()  # the score-function term's log-probability
        return (log_alpha.detach(), idx, *torch.autograd.grad(picked, (keys, query)))

    (la, idx, dk, dq), (la32, idx32, dk32, dq32) = run_both(fn, make_case(*shape))
    assert la32.dtype == torch.float32
    assert torch.equal(idx, idx32)
    assert torch.equal(torch.isinf(la), torch.isinf(la32))
    finite = torch.isfinite(la)
    close(la32[finite], la[finite])
    close(dk32, dk)
    close(dq32, dq)


@pytest.mark.parametrize("shape", FINE_SHAPES)
def test_fine_forward_and_backward(shape: tuple[int, ...]) -> None:
    case = make_case(*shape)
    gen = torch.Generator().manual_seed(shape[0])
    g_ctx = torch.randn(case.query_fine.shape, generator=gen, dtype=torch.float64)  # cotangents
    g_attn = torch.randn(*case.idx.shape, case.words.shape[2], generator=gen, dtype=torch.float64)

    def fn(c: Case) -> tuple[torch.Tensor, ...]:
        leaves = [t.clone().requires_grad_(True) for t in (c.words, c.query_fine, c.weights)]
        ctx, attn = c2f_fine_attend(leaves[0], c.word_mask, leaves[1], c.idx, leaves[2], c.rows)
        grads = torch.autograd.grad((ctx * g_ctx.to(ctx)).sum() + (attn * g_attn.to(attn)).sum(), leaves)
        return (ctx.detach(), attn.detach(), *grads)

    want, got = run_both(fn, case)
    assert got[0].dtype == torch.float32
    for a, b in zip(got, want):
        close(a, b)
    assert bool((got[1][0, -1] == 0).all())  # the chunk without real words got no attention
    # the Triton backward writes the words' gradient only at the chosen (encoder row, chunk) pairs, and there
    # only at real words: nothing for a chosen chunk without real words
    d_words = got[2]
    enc_rows = torch.arange(case.idx.shape[0], device=DEVICE) if case.rows is None else case.rows
    chosen = torch.zeros(case.word_mask.shape[:2], dtype=torch.bool, device=DEVICE)
    chosen[enc_rows.unsqueeze(1), case.idx] = True
    has_words = case.word_mask.any(-1)
    assert bool((d_words[~chosen] == 0).all()) and bool((d_words[~case.word_mask] == 0).all())
    assert bool((d_words[chosen & ~has_words] == 0).all()) and bool((chosen & ~has_words).any())
    assert bool((d_words[chosen & has_words].abs().sum((-1, -2)) > 0).all())


@pytest.mark.parametrize(("rows", "vocab", "hidden", "k", "bias"), [(2, 150, 19, 4, True), (33, 77, 70, 1, False)])
def test_logsoftmax_topk(rows: int, vocab: int, hidden: int, k: int, bias: bool) -> None:
    # vocab 150 spans three 64-wide vocabulary blocks (the last one partial; the combine's 4 partial and
    # 16 candidate lanes are masked); 33 rows span two 32-row blocks (the second one row: the combine runs a
    # program per row); vocab 77 two blocks; hidden 70 two 64-wide tiles.
    gen = torch.Generator().manual_seed(rows)
    h = torch.randn(rows, hidden, generator=gen, dtype=torch.float64).to(DEVICE)
    w = (torch.randn(vocab, hidden, generator=gen, dtype=torch.float64) / hidden**0.5).to(DEVICE)
    b = torch.randn(vocab, generator=gen, dtype=torch.float64).to(DEVICE) if bias else None
    with backend("reference"):
        values, indices = logsoftmax_topk(h, w, b, k)
    with backend("triton"):
        values32, indices32 = logsoftmax_topk(h.float(), w.float(), None if b is None else b.float(), k)
    assert torch.equal(indices32, indices)
    close(values32, values)


@pytest.mark.parametrize(("mode", "k", "rows"), [("multinomial", 2, None), ("distinct", 3, None), ("greedy", 2, 2)])
def test_one_step_through_both_backends(mode: str, k: int, rows: int | None) -> None:
    # c2f_attention (scg_summarize::c2f_attend: on Triton the coarse blocks, then the fine read choosing the chunks
    # itself) against the reference, values and gradients. 20 chunks in two coarse blocks, 70 hidden units
    # in two forward slices; the greedy case has two beam rows reading the two encoder rows swapped.
    c = make_case(6, 1 if rows is None else 2, 20, 9, 70, 8, k, r=rows)
    seed = torch.tensor([77], device=DEVICE)
    gen = torch.Generator().manual_seed(k)
    g_ctx = torch.randn(c.query_fine.shape, generator=gen, dtype=torch.float64)  # cotangents
    g_attn = torch.randn(c.query_fine.shape[0], k, c.words.shape[2], generator=gen, dtype=torch.float64)

    def fn(case: Case) -> tuple[torch.Tensor, ...]:
        leaves = [t.clone().requires_grad_(True) for t in (case.keys, case.query_coarse, case.words, case.query_fine)]
        keys, q_coarse, words, q_fine = leaves
        out = c2f_attention(
            q_coarse, q_fine, keys, case.chunk_mask, words, case.word_mask, seed, k=k, mode=mode, rows=case.rows
        )
        assert not out.weights.requires_grad
        loss = (out.context * g_ctx.to(out.context)).sum() + (out.word_attn * g_attn.to(out.word_attn)).sum()
        loss = loss + out.log_prob.sum() + out.log_alpha.exp().mul(g_ctx[:, :1].to(out.log_alpha)).sum()
        grads = torch.autograd.grad(loss, leaves)
        return out.idx, out.context, out.weights, out.log_alpha.detach(), out.log_prob.detach(), out.word_attn, *grads

    want, got = run_both(fn, c)
    assert torch.equal(got[0], want[0])
    assert torch.equal(torch.isinf(got[3]), torch.isinf(want[3]))
    for i, (a, b) in enumerate(zip(got[1:], want[1:]), start=1):
        if i == 3:
            a, b = a[torch.isfinite(b)], b[torch.isfinite(b)]
        close(a, b)


def test_opcheck_on_the_triton_backend() -> None:
    """The fake kernels (shapes, dtypes) and the autograd registration against the Triton outputs. The
    tracing check (``test_aot_dispatch_dynamic``) is the reference backend's (test_kernels_reference.py):
    what it traces, the fake kernels and the backward formulas, is the same for both backends. One query row
    reading encoder row 1 of 2 (R != B: the fake kernels size the outputs by the query rows); each check
    runs the op once (two launches, a program per row)."""
    c = make_case(7, 2, 5, 3, 7, 4, 2, r=1).cast(torch.float32)
    req = lambda t: t.clone().requires_grad_(True)  # noqa: E731
    checks = ("test_schema", "test_autograd_registration", "test_faketensor")
    with backend("triton"):
        torch.library.opcheck(
            c2f_coarse_sample,
            (
                req(c.keys),
                req(c.query_coarse),
                c.chunk_mask,
                torch.tensor([1], device=DEVICE),
                2,
                "multinomial",
                c.rows,
            ),
            test_utils=checks,
        )
        torch.library.opcheck(
            c2f_fine_attend,
            (req(c.words), c.word_mask, req(c.query_fine), c.idx, req(c.weights), c.rows),
            test_utils=checks,
        )
        torch.library.opcheck(logsoftmax_topk, (req(c.query_fine), req(c.words[0, 0]), None, 2), test_utils=checks)
        torch.library.opcheck(
            c2f_attend,
            (req(c.keys), req(c.query_coarse), c.chunk_mask, req(c.words), c.word_mask, req(c.query_fine))
            + (torch.tensor([1], device=DEVICE), 2, "multinomial", c.rows),
            test_utils=checks,
        )
