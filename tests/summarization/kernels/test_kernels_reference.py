"""The kernel ops on the PyTorch reference: the model's math, gradients, opcheck, torch.compile, scg."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch
from torch.distributions import Categorical

import scg

from ..kernel_support import DEVICE, Case, backend, make_case, one_thread  # noqa: F401

from scg_summarize.kernels import (  # isort: skip
    KernelDraws,
    c2f_attend,
    c2f_attention,
    c2f_coarse_sample,
    c2f_fine_attend,
    choose,
    draw_log_prob,
    fused_c2f_read,
    logsoftmax_topk,
)
from scg_summarize.kernels import reference  # isort: skip
from scg_summarize.kernels.backend import forced, requested  # isort: skip

pytestmark = pytest.mark.usefixtures("one_thread")

#: (seed, B, M, N, H, D, k, R): non-power-of-two sizes, k > 1, and beam rows (R != B).
SHAPES = [(0, 2, 5, 7, 19, 6, 1, None), (1, 3, 9, 13, 45, 10, 3, None), (2, 2, 4, 3, 11, 5, 2, 5)]


@pytest.fixture(autouse=True)
def _reference_backend() -> object:
    with backend("reference"):
        yield


def seed_tensor(value: int = 7) -> torch.Tensor:
    return torch.tensor([value], device=DEVICE)


@pytest.mark.parametrize("shape", SHAPES[:2])
def test_fine_matches_the_model(shape: tuple[int, ...]) -> None:
    # The op computes models.attention.c2f_read (per-chunk word softmax, weights per choice), values and gradients.
    from scg_summarize.models.c2f.coarse_to_fine import c2f_read

    c = make_case(*shape)
    leaves = [t.clone().requires_grad_(True) for t in (c.words, c.weights, c.query_fine)]
    want_ctx, want_attn = c2f_read(leaves[0], c.word_mask, c.idx, leaves[1], leaves[2])
    got_ctx, got_attn = fused_c2f_read(c.words, c.word_mask, c.idx, c.weights, c.query_fine)
    torch.testing.assert_close(got_ctx, want_ctx)
    torch.testing.assert_close(got_attn, want_attn)
    assert bool((got_attn[0, -1] == 0).all())  # the chosen chunk without real words contributes nothing
    g_ctx, g_attn = torch.randn_like(want_ctx), torch.randn_like(want_attn)
    want = torch.autograd.grad((want_ctx * g_ctx).sum() + (want_attn * g_attn).sum(), leaves)
    mine = [t.clone().requires_grad_(True) for t in (c.words, c.weights, c.query_fine)]
    ctx, attn = c2f_fine_attend(mine[0], c.word_mask, mine[2], c.idx, mine[1])
    got = torch.autograd.grad((ctx * g_ctx).sum() + (attn * g_attn).sum(), mine)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("shape", SHAPES)
def test_gradcheck(shape: tuple[int, ...]) -> None:
    c = make_case(*shape)
    words, weights, qf = (t.clone().requires_grad_(True) for t in (c.words, c.weights, c.query_fine))
    keys, qc = (t.clone().requires_grad_(True) for t in (c.keys, c.query_coarse))
    fine = lambda w, q, a: c2f_fine_attend(w, c.word_mask, q, c.idx, a, c.rows)  # noqa: E731
    assert torch.autograd.gradcheck(fine, (words, qf, weights), fast_mode=True)
    real = c.chunk_mask if c.rows is None else c.chunk_mask[c.rows]
    coarse = lambda k, q: c2f_coarse_sample(  # noqa: E731
        k, q, c.chunk_mask, seed_tensor(), 2, "multinomial", c.rows
    )[0].masked_fill(~real, 0.0)  # -inf there
    assert torch.autograd.gradcheck(coarse, (keys, qc), fast_mode=True)


def test_coarse_is_the_masked_log_softmax() -> None:
    c = make_case(3, 3, 8, 2, 4, 6, 2)
    log_alpha, idx = c2f_coarse_sample(c.keys, c.query_coarse, c.chunk_mask, seed_tensor(), 2)
    scores = torch.einsum("bmd,bd->bm", c.keys, c.query_coarse)
    want = torch.log_softmax(scores.masked_fill(~c.chunk_mask, float("-inf")), -1)
    torch.testing.assert_close(log_alpha, want)
    assert bool(c.chunk_mask.gather(1, idx).all())  # padded chunks are never drawn


def test_logsoftmax_topk() -> None:
    # small enough for the full (not fast-mode) gradcheck: 3 * 5 + 11 * 5 + 11 inputs, two forwards each
    gen = torch.Generator().manual_seed(4)
    hidden = torch.randn(3, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(11, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(11, generator=gen, dtype=torch.float64, requires_grad=True)
    values, indices = logsoftmax_topk(hidden, weight, bias, 4)
    full = torch.log_softmax(hidden @ weight.T + bias, -1)
    top = full.topk(4, -1)
    torch.testing.assert_close(values, top.values)
    assert torch.equal(indices, top.indices)
    assert torch.autograd.gradcheck(lambda h, w, b: logsoftmax_topk(h, w, b, 4)[0], (hidden, weight, bias))
    for wrong in (bias[:1], torch.cat([bias, bias[:3]])):  # (the kernel read V entries of it whatever its size)
        with pytest.raises(ValueError, match=r"bias must have shape \(V,\) = \(11,\), got"):
            logsoftmax_topk(hidden, weight, wrong, 4)


#: opcheck's cheap checks; ``test_aot_dispatch_dynamic`` (tracing the op and its backward with symbolic
#: shapes, ~0.6-0.9 s CPU a call) runs once per op, on the ``rows`` layout where the op has one: the fake
#: kernels do not read ``rows`` or ``mode``, and the backward formulas without ``rows`` are those with it
#: less the row map (``c2f_coarse_sample``: ``d_keys`` is the per-row product itself, not its
#: ``index_add_``; ``c2f_fine_attend``: the gradient rows are ``arange(R)``, not ``rows``), traced with
#: static shapes, values and gradients compared, by test_compiles_with_the_reference.
CHEAP_OPCHECK = ("test_schema", "test_autograd_registration", "test_faketensor")
TRACED = (*CHEAP_OPCHECK, "test_aot_dispatch_dynamic")


@pytest.mark.parametrize("rows", [False, True])
def test_opcheck(rows: bool) -> None:
    c = make_case(6, 2, 5, 3, 7, 4, 2, r=3 if rows else None)
    req = lambda t: t.clone().requires_grad_(True)  # noqa: E731
    for mode in ("multinomial", "distinct", "greedy"):
        torch.library.opcheck(
            c2f_coarse_sample,
            (req(c.keys), req(c.query_coarse), c.chunk_mask, seed_tensor(), 2, mode, c.rows),
            test_utils=TRACED if rows and mode == "distinct" else CHEAP_OPCHECK,
        )
    torch.library.opcheck(
        c2f_fine_attend,
        (req(c.words), c.word_mask, req(c.query_fine), c.idx, req(c.weights), c.rows),
        test_utils=TRACED if rows else CHEAP_OPCHECK,
    )
    torch.library.opcheck(
        c2f_attend,
        (req(c.keys), req(c.query_coarse), c.chunk_mask, req(c.words), c.word_mask, req(c.query_fine))
        + (seed_tensor(), 2, "greedy" if rows else "multinomial", c.rows),
        test_utils=TRACED if rows else CHEAP_OPCHECK,
    )
    if not rows:  # logsoftmax_topk has no rows argument: checked once
        torch.library.opcheck(logsoftmax_topk, (req(c.query_fine), req(c.words[0, 0]), None, 2))


def test_compiles_with_the_reference() -> None:
    c = make_case(7, 2, 6, 5, 8, 4, 2)
    seed = seed_tensor(11)

    def step(qc: torch.Tensor, qf: torch.Tensor, keys: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        out = c2f_attention(qc, qf, keys, c.chunk_mask, words, c.word_mask, seed, k=2)
        return (out.context**2).sum() + out.log_prob.sum()

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    # every differentiable input (the backward formulas without ``rows``: see CHEAP_OPCHECK)
    leaves = [t.clone().requires_grad_(True) for t in (c.query_coarse, c.query_fine, c.keys, c.words)]
    got, want = compiled(*leaves), step(*leaves)
    torch.testing.assert_close(got, want)
    for a, b in zip(torch.autograd.grad(got, leaves), torch.autograd.grad(want, leaves)):
        torch.testing.assert_close(a, b)


@pytest.mark.slow
def test_compiles_with_inductor() -> None:  # ~1 minute of C++ compilation on two cores
    c = make_case(8, 2, 6, 5, 8, 4, 1)

    def step(qc: torch.Tensor, qf: torch.Tensor) -> torch.Tensor:
        out = c2f_attention(qc, qf, c.keys, c.chunk_mask, c.words, c.word_mask, seed_tensor(), k=1)
        return out.context.sum()

    torch.testing.assert_close(
        torch.compile(step, fullgraph=True)(c.query_coarse, c.query_fine), step(c.query_coarse, c.query_fine)
    )


def test_kernel_draws_make_an_scg_node() -> None:
    c = make_case(9, 3, 6, 4, 5, 4, 2)
    keys = c.keys.clone().requires_grad_(True)
    with scg.Graph() as g:
        log_alpha, idx = c2f_coarse_sample(keys, c.query_coarse, c.chunk_mask, seed_tensor(3), 2)
        dist = Categorical(logits=log_alpha.unsqueeze(1).expand(3, 2, 6), validate_args=False)
        value = scg.sample(dist, name="coarse", estimator=KernelDraws(idx))
        ctx, _ = c2f_fine_attend(c.words, c.word_mask, c.query_fine, value, torch.full((3, 2), 0.5, device=DEVICE))
        cost = (ctx**2).sum(-1)
        scg.cost(cost, name="c")
    assert torch.equal(value, idx)
    (got,) = torch.autograd.grad(g.surrogate_loss(), keys, retain_graph=True)
    by_hand = (draw_log_prob(log_alpha, idx) * cost.detach()).sum()  # the cost does not depend on keys
    (want,) = torch.autograd.grad(by_hand, keys)
    torch.testing.assert_close(got, want)
    with pytest.raises(scg.SCGError, match="KernelDraws"), scg.Graph():
        scg.sample(dist, estimator=KernelDraws(idx[:, :1]))


def test_a_step_output_left_unused_costs_no_backward() -> None:
    # scg_summarize::c2f_attend does not materialise the gradients of unused outputs: backpropagating the context
    # alone runs no coarse backward (keys and the chunk query get no gradient), the score term does
    c = make_case(6, 2, 5, 3, 7, 4, 2)
    leaves = [t.clone().requires_grad_(True) for t in (c.keys, c.query_coarse, c.words, c.query_fine)]
    out = c2f_attention(leaves[1], leaves[3], leaves[0], c.chunk_mask, leaves[2], c.word_mask, seed_tensor(), k=2)
    out.context.sum().backward(retain_graph=True)
    assert leaves[0].grad is None and leaves[1].grad is None
    assert leaves[2].grad is not None and leaves[3].grad is not None
    out.log_prob.sum().backward()
    assert leaves[0].grad is not None and bool(leaves[1].grad.abs().sum() > 0)


def test_greedy_step_weights_are_renormalised_alpha() -> None:
    c = make_case(10, 2, 7, 3, 6, 4, 3)
    out = c2f_attention(
        c.query_coarse, c.query_fine, c.keys, c.chunk_mask, c.words, c.word_mask, seed_tensor(), k=2, mode="greedy"
    )
    top = out.log_alpha.topk(2, -1)
    assert torch.equal(out.idx, top.indices)
    torch.testing.assert_close(out.weights, torch.softmax(top.values, -1))
    assert torch.equal(out.log_prob, torch.zeros(2, dtype=out.log_prob.dtype, device=DEVICE))
    want, _ = reference.fine_attend(c.words, c.word_mask, c.query_fine, out.idx, out.weights, None)
    torch.testing.assert_close(out.context, want)


def test_forced_sets_and_restores_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCG_KERNELS", "auto")
    with forced("reference"):
        assert requested() == "reference"
        with forced(None):
            assert requested() == "reference"
    assert os.environ["SCG_KERNELS"] == "auto"
    monkeypatch.delenv("SCG_KERNELS")
    with pytest.raises(RuntimeError), forced("reference"):
        raise RuntimeError("the body fails")
    assert "SCG_KERNELS" not in os.environ


def test_backend_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    monkeypatch.setenv("SCG_KERNELS", "auto")
    assert choose(cpu) == "reference"
    if importlib.util.find_spec("triton") is not None:
        assert choose(torch.device("cuda")) == "triton"
    monkeypatch.setenv("SCG_KERNELS", "reference")
    assert choose(torch.device("cuda")) == "reference"
    monkeypatch.setenv("SCG_KERNELS", "fast")
    with pytest.raises(ValueError, match="SCG_KERNELS"):
        choose(cpu)
    monkeypatch.setenv("SCG_KERNELS", "triton")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET|not installed"):
        choose(cpu)
    assert os.environ["TRITON_INTERPRET"] == "0"  # monkeypatch restores it afterwards


def test_bad_arguments_are_rejected() -> None:
    c: Case = make_case(11, 2, 5, 3, 6, 4, 2)
    with pytest.raises(ValueError, match="mode"):
        c2f_coarse_sample(c.keys, c.query_coarse, c.chunk_mask, seed_tensor(), 2, "sometimes")
    with pytest.raises(ValueError, match="k=6"):
        c2f_coarse_sample(c.keys, c.query_coarse, c.chunk_mask, seed_tensor(), 6, "distinct")
    with pytest.raises(ValueError, match="word_mask"):
        c2f_fine_attend(c.words, c.word_mask[:, :, :2], c.query_fine, c.idx, c.weights)
    step = (c.keys, c.query_coarse, c.chunk_mask, c.words, c.word_mask, c.query_fine, seed_tensor())
    with pytest.raises(ValueError, match=r"agree on \(B, M\), got \(2, 5, 4\) and \(2, 4, 3, 6\)"):
        c2f_attend(*step[:3], c.words[:, :4], c.word_mask[:, :4], *step[5:], 1)
    with pytest.raises(ValueError, match=r"query has 1 rows for 2 examples: pass rows="):
        c2f_attend(*step[:5], c.query_fine[:1], step[6], 1)
    # (metadata the kernels index memory with: they read out of bounds where the reference raised)
    with pytest.raises(ValueError, match=r"query has 3 rows for 2 examples"):
        c2f_coarse_sample(c.keys, torch.cat([c.query_coarse, c.query_coarse[:1]]), c.chunk_mask, seed_tensor(), 1)
    with pytest.raises(ValueError, match=r"rows must be an int32/int64 tensor of shape \(2,\)"):
        c2f_fine_attend(c.words, c.word_mask, c.query_fine, c.idx, c.weights, rows=torch.zeros(1, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"chunk_mask must be bool, got torch.int64"):
        c2f_coarse_sample(c.keys, c.query_coarse, c.chunk_mask.long(), seed_tensor(), 1)
    with pytest.raises(ValueError, match=r"word_mask must be bool, got torch.float32"):
        c2f_fine_attend(c.words, c.word_mask.float(), c.query_fine, c.idx, c.weights)
    with pytest.raises(ValueError, match=r"idx must be integer, got torch.float32"):
        c2f_fine_attend(c.words, c.word_mask, c.query_fine, c.idx.float(), c.weights)
    with pytest.raises(ValueError, match="mode='sometimes'"):
        c2f_attend(*step, 1, "sometimes")
