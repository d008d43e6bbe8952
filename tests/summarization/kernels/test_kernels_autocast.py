"""The kernel ops under ``torch.autocast``: they keep their own accumulation dtype (autocast off inside).

Under bf16 autocast the reference's einsums used to run in bfloat16, so the fine read filled the
padded words of a bfloat16 score tensor with float32's minimum (an overflow error), and the coarse
log-probabilities came out in bfloat16 although the fake kernel promises float32. The ops now switch
autocast off inside: their values and dtypes are those of the same call without autocast.
"""

from __future__ import annotations

import pytest
import torch

import scg

from ..kernel_support import backend, make_case, one_thread  # noqa: F401

from scg_summarize.kernels import c2f_coarse_sample, c2f_fine_attend, logsoftmax_topk  # isort: skip
from scg_summarize.models.c2f import coarse_to_fine as c2f_module  # isort: skip
from scg_summarize.models.common.attention import Memory  # isort: skip
from scg_summarize.models.c2f.coarse_to_fine import C2FAttention  # isort: skip

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def _reference_backend() -> object:
    with backend("reference"):
        yield


def _bf16() -> torch.autocast:
    return torch.autocast(device_type="cpu", dtype=torch.bfloat16)


def test_fine_attend_is_unchanged_by_autocast() -> None:
    c = make_case(1, 3, 9, 13, 45, 10, 3).cast(torch.float32)
    leaves = [t.clone().requires_grad_(True) for t in (c.words, c.query_fine, c.weights)]
    want_ctx, want_attn = c2f_fine_attend(leaves[0], c.word_mask, leaves[1], c.idx, leaves[2])
    want_grads = torch.autograd.grad(want_ctx.sum() + want_attn.square().sum(), leaves)
    mine = [t.clone().requires_grad_(True) for t in (c.words, c.query_fine, c.weights)]
    with _bf16():
        ctx, attn = c2f_fine_attend(mine[0], c.word_mask, mine[1], c.idx, mine[2])
    assert ctx.dtype == torch.float32 and attn.dtype == torch.float32
    torch.testing.assert_close(ctx, want_ctx, rtol=0, atol=0)
    torch.testing.assert_close(attn, want_attn, rtol=0, atol=0)
    grads = torch.autograd.grad(ctx.sum() + attn.square().sum(), mine)
    for got, want in zip(grads, want_grads):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_fine_attend_with_a_bf16_query_gives_the_fake_kernels_dtypes() -> None:
    # what autocast hands the op: a bfloat16 query (a Linear's output) and float32 word states
    c = make_case(2, 2, 5, 7, 19, 6, 2).cast(torch.float32)
    query = c.query_fine.to(torch.bfloat16)
    with _bf16():
        ctx, attn = c2f_fine_attend(c.words, c.word_mask, query, c.idx, c.weights)
    assert ctx.dtype == torch.bfloat16 and attn.dtype == torch.float32  # the register_fake dtypes
    want_ctx, want_attn = c2f_fine_attend(c.words, c.word_mask, query, c.idx, c.weights)
    torch.testing.assert_close(ctx, want_ctx, rtol=0, atol=0)
    torch.testing.assert_close(attn, want_attn, rtol=0, atol=0)


def test_coarse_sample_is_unchanged_by_autocast() -> None:
    c = make_case(0, 2, 5, 7, 19, 6, 1).cast(torch.float32)
    seed = torch.tensor([11])
    want_log_alpha, want_idx = c2f_coarse_sample(c.keys, c.query_coarse, c.chunk_mask, seed, 2)
    with _bf16():
        log_alpha, idx = c2f_coarse_sample(c.keys, c.query_coarse, c.chunk_mask, seed, 2)
    assert log_alpha.dtype == torch.float32
    torch.testing.assert_close(log_alpha, want_log_alpha, rtol=0, atol=0)
    assert torch.equal(idx, want_idx)


def test_logsoftmax_topk_is_unchanged_by_autocast() -> None:
    gen = torch.Generator().manual_seed(3)
    hidden, weight, bias = torch.randn(4, 16, generator=gen), torch.randn(50, 16, generator=gen), torch.randn(50)
    want_values, want_indices = logsoftmax_topk(hidden, weight, bias, 5)
    with _bf16():
        values, indices = logsoftmax_topk(hidden, weight, bias, 5)
    assert values.dtype == torch.float32
    torch.testing.assert_close(values, want_values, rtol=0, atol=0)
    assert torch.equal(indices, want_indices)


@pytest.mark.parametrize("mode", ["sample", "greedy"])
def test_c2f_step_with_float32_chunk_probabilities(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # CUDA's autocast computes softmax in float32 while the coarse logits (and so the weights of the
    # chosen chunks) stay bfloat16; the attention's α̃ scatter used to need both in one dtype. The
    # policy is emulated here on CPU: bfloat16 parameters and inputs, a float32 masked softmax.
    real = c2f_module.masked_softmax
    monkeypatch.setattr(c2f_module, "masked_softmax", lambda scores, mask: real(scores.float(), mask))
    torch.manual_seed(0)
    B, M, N, H, D = 3, 5, 4, 6, 3
    attention = C2FAttention(H, H, D, k=2, test_k=2).to(torch.bfloat16)
    word_mask = torch.rand(B, M, N) < 0.8
    word_mask[:, :, 0] = True
    memory = Memory.build(
        torch.randn(B, M, N, H, dtype=torch.bfloat16), word_mask, torch.randn(B, M, D, dtype=torch.bfloat16)
    )
    with scg.Graph():
        out = attention(memory, torch.randn(B, H, dtype=torch.bfloat16), 0, mode)
    assert out.chunk_probs.dtype == torch.float32 and out.chunk_weights.dtype == torch.float32
    # α̃ sums to one per row, up to the rounding of k bfloat16 weights (each within 2^-9 relative)
    torch.testing.assert_close(out.chunk_weights.sum(1), torch.ones(B), rtol=0, atol=2**-7)
    assert bool(((out.chunk_weights > 0) <= (out.chunk_probs > 0)).all())  # only chunks with α^s > 0 are read
