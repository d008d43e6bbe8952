"""The Triton kernels on a real GPU: bfloat16 and float32 at paper-like sizes, against the reference.

Skipped without CUDA (the interpreter tests in ``test_kernels_triton.py`` cover the CPU). Run on a GPU
with ``python -m pytest -q tests/summarization -k kernels`` (``scripts/gpu_check.sh`` does).

Tolerances (derived, not tuned). The inputs are first rounded to the kernel's dtype; the reference runs
in float64 on those *rounded* inputs, so input quantisation is not part of the comparison. The kernel
loads its inputs and computes in float32, then stores each output in its dtype. By the standard error
analysis of floating-point sums (Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3), an
output that is a chain of length-``n`` dot products and a softmax differs from the exact result by at
most ``rounds * u_out * |y| + CHAIN * n * u_32 * S``: ``u_out`` is the unit roundoff of the stored dtype
(2^-8 for bfloat16, 2^-24 for float32); ``rounds`` is the number of times the value is rounded to that
dtype on its way out (1, or ``2r - 1`` for a word gradient summed in its dtype over ``r`` draws of one
chunk); ``u_32 = 2^-24``; ``S`` is the sum of the magnitudes of the terms, bounded here by
``max |y_ref|``; and ``CHAIN = 8`` counts the stages (scores, softmax, weighted sum, and the same again
in the backward pass). That gives :func:`tol`. The chosen chunks (integer outputs) must be equal.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

from ..kernel_support import Case, backend, chi_square_pvalue, make_case, one_thread  # noqa: F401

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton"),
    pytest.mark.usefixtures("one_thread"),
]

from scg_summarize.kernels import (  # noqa: E402  # isort: skip
    c2f_attention,
    c2f_coarse_sample,
    c2f_fine_attend,
    logsoftmax_topk,
)

U32 = 2.0**-24
UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: U32}
CHAIN = 8

#: (seed, B, M, N, H, D, k, R): a small case, paper-like sizes (H = 500 is not a power of two) and
#: beam rows sharing encoder rows.
SHAPES = [
    (10, 4, 6, 7, 19, 6, 2, None),
    (11, 8, 50, 40, 500, 600, 2, None),
    (12, 4, 100, 40, 512, 512, 1, 12),
]
DTYPES = [torch.float32, torch.bfloat16]


def tol(ref: torch.Tensor, out_dtype: torch.dtype, n: int, rounds: int = 1) -> dict[str, float]:
    """``rtol``/``atol`` of the module docstring for an output stored in ``out_dtype`` from length-``n`` sums."""
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    u = UNIT_ROUNDOFF[out_dtype]
    return {"rtol": rounds * u + n * U32, "atol": ((rounds - 1) * u + CHAIN * n * U32) * scale + 1e-30}


def check(got: torch.Tensor, want: torch.Tensor, n: int, rounds: int = 1) -> None:
    torch.testing.assert_close(got.double(), want.double(), **tol(want, got.dtype, n, rounds))


def rounded(case: Case, dtype: torch.dtype) -> tuple[Case, Case]:
    """``(inputs in dtype, the same values in float64)``."""
    low = case.cast(dtype)
    return low, low.cast(torch.float64)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[1:6])))
def test_coarse_on_cuda(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    k = shape[6]
    low, exact = rounded(make_case(*shape), dtype)

    def run(c: Case) -> tuple[torch.Tensor, ...]:
        keys, query = c.keys.clone().requires_grad_(True), c.query_coarse.clone().requires_grad_(True)
        seed = torch.tensor([shape[0]], device="cuda")
        log_alpha, idx = c2f_coarse_sample(keys, query, c.chunk_mask, seed, k, "multinomial", c.rows)
        return (log_alpha.detach(), idx, *torch.autograd.grad(log_alpha.gather(1, idx).sum(), (keys, query)))

    with backend("reference"):
        la, idx, dk, dq = run(exact)
    with backend("triton"):
        la_t, idx_t, dk_t, dq_t = run(low)
    assert la_t.dtype == torch.float32 and dk_t.dtype == dtype
    assert torch.equal(idx_t, idx)
    finite = torch.isfinite(la)
    assert torch.equal(finite, torch.isfinite(la_t))
    d = shape[5]
    check(la_t[finite], la[finite], d)
    check(dk_t, dk, d)
    check(dq_t, dq, d)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[1:6])))
def test_fine_on_cuda(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    low, exact = rounded(make_case(*shape), dtype)
    gen = torch.Generator().manual_seed(shape[0])
    g_ctx = torch.randn(low.query_fine.shape, generator=gen).to("cuda", dtype)  # cotangents, already rounded
    g_attn = torch.randn(*low.idx.shape, low.words.shape[2], generator=gen).to("cuda")

    def run(c: Case) -> tuple[torch.Tensor, ...]:
        leaves = [t.clone().requires_grad_(True) for t in (c.words, c.query_fine, c.weights)]
        ctx, attn = c2f_fine_attend(leaves[0], c.word_mask, leaves[1], c.idx, leaves[2], c.rows)
        loss = (ctx * g_ctx.to(ctx.dtype)).sum() + (attn * g_attn.to(attn.dtype)).sum()
        return (ctx.detach(), attn.detach(), *torch.autograd.grad(loss, leaves))

    with backend("reference"):
        want = run(exact)
    with backend("triton"):
        got = run(low)
    ctx, attn, d_words, d_query, d_weights = got
    assert ctx.dtype == dtype and attn.dtype == torch.float32 and d_words.dtype == dtype
    h, n = shape[4], shape[3]
    enc_rows = torch.arange(low.idx.shape[0]) if low.rows is None else low.rows.cpu()
    keys = enc_rows[:, None] * shape[2] + low.idx.cpu()  # (R, k): the (encoder row, chunk) each draw writes
    repeats = int(torch.bincount(keys.flatten()).max())  # gradients summed into one chunk, in its dtype
    check(ctx, want[0], h + n)
    check(attn, want[1], h)
    check(d_words, want[2], h + n, rounds=2 * repeats - 1)
    check(d_query, want[3], h + n)
    check(d_weights, want[4], h + n)


@pytest.mark.parametrize("mode", ["multinomial", "greedy"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[1:6])))
def test_step_on_cuda(shape: tuple[int, ...], dtype: torch.dtype, mode: str) -> None:
    # scg_summarize::c2f_attend: the coarse blocks, then the fine read choosing the chunks from their partials
    k = shape[6]
    low, exact = rounded(make_case(*shape), dtype)
    gen = torch.Generator().manual_seed(shape[0])
    g_ctx = torch.randn(low.query_fine.shape, generator=gen).to("cuda", dtype)  # cotangents, already rounded
    g_attn = torch.randn(low.query_fine.shape[0], k, low.words.shape[2], generator=gen).to("cuda")

    def run(c: Case) -> tuple[torch.Tensor, ...]:
        leaves = [t.clone().requires_grad_(True) for t in (c.keys, c.query_coarse, c.words, c.query_fine)]
        keys, q_coarse, words, q_fine = leaves
        seed = torch.tensor([shape[0]], device="cuda")
        out = c2f_attention(q_coarse, q_fine, keys, c.chunk_mask, words, c.word_mask, seed, k, mode, c.rows)
        loss = (out.context * g_ctx.to(out.context.dtype)).sum() + (out.word_attn * g_attn).sum()
        loss = loss + out.log_alpha.gather(1, out.idx).sum()
        grads = torch.autograd.grad(loss, leaves)
        return out.idx, out.log_alpha.detach(), out.weights, out.context.detach(), out.word_attn.detach(), *grads

    with backend("reference"):
        want = run(exact)
    with backend("triton"):
        got = run(low)
    idx, log_alpha, weights, ctx, attn, d_keys, d_qc, d_words, d_qf = got
    assert ctx.dtype == dtype and weights.dtype == torch.float32 and attn.dtype == torch.float32
    assert torch.equal(idx, want[0])
    finite = torch.isfinite(want[1])
    assert torch.equal(finite, torch.isfinite(log_alpha))
    h, n, d = shape[4], shape[3], shape[5]
    enc_rows = torch.arange(idx.shape[0]) if low.rows is None else low.rows.cpu()
    repeats = int(torch.bincount((enc_rows[:, None] * shape[2] + idx.cpu()).flatten()).max())
    check(log_alpha[finite], want[1][finite], d)
    check(weights, want[2], d)
    check(ctx, want[3], h + n + d)
    check(attn, want[4], h)
    check(d_keys, want[5], d)
    check(d_qc, want[6], d)
    check(d_words, want[7], h + n, rounds=2 * repeats - 1)
    check(d_qf, want[8], h + n)


@pytest.mark.parametrize("mode", ["multinomial", "distinct", "greedy"])
def test_step_under_load_agrees_with_the_two_ops(mode: str) -> None:
    """``c2f_attention`` (its read chooses the chunks from the coarse blocks' partials) at paper load: 320
    beam rows over 64 documents of 1000 chunks, bf16, 12 seeds. Each step must equal the model's two ops
    (``c2f_coarse_sample``, then ``c2f_fine_attend`` on its draws): a choice made from partials that were
    not all written (stale memory of the allocator) would give other draws. (Session 21's one-launch step,
    whose reads waited on counters, passed this test on an H100 too.)"""
    b, m, n, h, d, k, r = 64, 1000, 40, 512, 512, 2, 320
    gen = torch.Generator(device="cuda").manual_seed(21)
    keys = torch.randn(b, m, d, generator=gen, device="cuda").to(torch.bfloat16)
    words = (torch.randn(b, m, n, h, generator=gen, device="cuda") / h**0.5).to(torch.bfloat16)
    query_coarse = torch.randn(r, d, generator=gen, device="cuda").to(torch.bfloat16)
    query_fine = torch.randn(r, h, generator=gen, device="cuda").to(torch.bfloat16)
    chunk_mask = torch.rand(b, m, generator=gen, device="cuda") < 0.9
    word_mask = torch.rand(b, m, n, generator=gen, device="cuda") < 0.8
    chunk_mask[:, 0] = word_mask[:, :, 0] = True
    rows = torch.randint(0, b, (r,), generator=gen, device="cuda")
    with backend("triton"), torch.no_grad():
        for s in range(12):
            seed = torch.tensor([9000 + s], device="cuda")
            step = c2f_attention(query_coarse, query_fine, keys, chunk_mask, words, word_mask, seed, k, mode, rows)
            log_alpha, idx = c2f_coarse_sample(keys, query_coarse, chunk_mask, seed, k, mode, rows)
            ctx, attn = c2f_fine_attend(words, word_mask, query_fine, idx, step.weights, rows)
            assert torch.equal(step.idx, idx), f"seed {s}: the step's draws differ from the two ops'"
            finite = torch.isfinite(log_alpha)
            assert torch.equal(torch.isfinite(step.log_alpha), finite)
            # the same sums, possibly in another order: twice the bound of one against exact
            check(step.log_alpha[finite], log_alpha[finite], 2 * d)
            check(step.context, ctx, 2 * (h + n), rounds=2)
            check(step.word_attn, attn, 2 * h)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_logsoftmax_topk_on_cuda(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(3)
    rows, vocab, hidden, k = 64, 5003, 500, 5
    h = torch.randn(rows, hidden, generator=gen).to("cuda", dtype)
    w = (torch.randn(vocab, hidden, generator=gen) / hidden**0.5).to("cuda", dtype)
    b = torch.randn(vocab, generator=gen).to("cuda", dtype)
    with backend("reference"):
        values, indices = logsoftmax_topk(h.double(), w.double(), b.double(), k)
    with backend("triton"):
        values_t, indices_t = logsoftmax_topk(h, w, b, k)
    assert torch.equal(indices_t, indices)
    check(values_t, values, hidden + vocab)


def test_coarse_draws_on_cuda_follow_the_softmax() -> None:
    """A high-power chi-square test of the GPU sampler: 20000 rows x 8 draws of one document."""
    logits = torch.tensor([0.3, -0.5, 0.8, 0.0, 5.0, -0.2, 1.1, -2.0])
    mask = torch.tensor([True, True, True, True, False, True, True, True])
    m, n_rows, k = logits.numel(), 20_000, 8
    keys = torch.eye(m, device="cuda").unsqueeze(0)
    query = logits.to("cuda").expand(n_rows, m).contiguous()
    rows = torch.zeros(n_rows, dtype=torch.int64, device="cuda")
    with backend("triton"):
        _, idx = c2f_coarse_sample(
            keys, query, mask.unsqueeze(0).cuda(), torch.tensor([4242], device="cuda"), k, "multinomial", rows
        )
    probs = torch.softmax(logits.double().masked_fill(~mask, float("-inf")), 0)
    counts = torch.bincount(idx.flatten().cpu(), minlength=m)
    assert counts[4] == 0
    assert chi_square_pvalue(counts, probs) > 1e-3
    # the test rejects a law tempered by 0.95 at this size (noncentrality 150, df 6: it has power)
    tempered = torch.softmax(0.95 * logits.double().masked_fill(~mask, float("-inf")), 0)
    assert chi_square_pvalue(counts, tempered) < 1e-6
    # consecutive draws of a row are independent: pairs follow alpha x alpha
    pairs = torch.bincount((idx[:, 0::2] * m + idx[:, 1::2]).flatten().cpu(), minlength=m * m)
    assert chi_square_pvalue(pairs, torch.outer(probs, probs)) > 1e-3


def test_arguments_on_two_devices_are_named() -> None:
    c = make_case(13, 2, 5, 4, 8, 4, 2)
    with pytest.raises(ValueError, match=r"c2f_fine_attend: .*weights on cpu"):
        c2f_fine_attend(c.words, c.word_mask, c.query_fine, c.idx, c.weights.cpu(), None)
    with pytest.raises(ValueError, match=r"c2f_coarse_sample: .*seed on cpu"):
        c2f_coarse_sample(c.keys, c.query_coarse, c.chunk_mask, torch.tensor([1]), 2)
