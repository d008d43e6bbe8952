"""The summarizer's C2F step through the kernels: plain torch's numbers on the reference backend, the
Triton kernels (interpreter on CPU) under ``SCG_KERNELS=triton``, and the kernel draws as scg nodes."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from scg_summarize.data import Batch

import scg

from ..kernel_support import DEVICE, backend, builtins_scanned_once, chi_square_pvalue, one_thread  # noqa: F401  (one_thread: a fixture)
from ..models_helpers import make_batch, make_model

from scg_summarize.kernels import KernelDraws, ops, reference, topk_op  # isort: skip
from scg_summarize.models.c2f import coarse_to_fine as c2f_module  # isort: skip
from scg_summarize.models.common.attention import Memory  # isort: skip
from scg_summarize.models.c2f.coarse_to_fine import C2FAttention, c2f_kernel_step, c2f_read  # isort: skip

pytestmark = pytest.mark.usefixtures("one_thread", "builtins_scanned_once")
needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="no triton")
MODES = ["sample", "greedy"]


@pytest.fixture
def plain_torch(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The model's C2F step with the fine read in plain torch (``c2f_read``), as before the kernels.
    Returns a list that counts the plain reads (so a test can check the patch took effect)."""
    used: list[int] = []

    def read(
        words: torch.Tensor,
        word_mask: torch.Tensor,
        idx: torch.Tensor,
        weights: torch.Tensor,
        q: torch.Tensor,
        rows: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        assert rows is None
        used.append(1)
        return c2f_read(words, word_mask, idx, weights, q)

    monkeypatch.setattr(c2f_module, "fine_read", read)
    return used


@pytest.fixture
def kernels_used(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The Triton modules the kernel ops asked for (``coarse``, ``fine``, ``topk``)."""
    used: list[str] = []
    real = ops.triton_module

    def spy(name: Any) -> Any:
        used.append(name)
        return real(name)

    monkeypatch.setattr(ops, "triton_module", spy)
    monkeypatch.setattr(topk_op, "triton_module", spy)
    yield used


def replaying(draws: dict[tuple[str, int | None], torch.Tensor]) -> Any:
    """An scg intervention that draws each node once and replays the value on later runs."""

    def intervene(name: str, step: int | None, dist: Any, shape: torch.Size) -> torch.Tensor:
        if (name, step) not in draws:
            draws[(name, step)] = dist.sample(shape)
        return draws[(name, step)]

    return intervene


def run(
    model: Any, batch: Batch, mode: str, draws: dict[tuple[str, int | None], torch.Tensor]
) -> tuple[torch.Tensor, list[torch.Tensor], scg.Graph]:
    """Teacher-forced NLL per step and the gradients of the scg surrogate (score-function term included)."""
    model.zero_grad()
    with scg.Graph(intervene=replaying(draws)) as graph:
        out = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode=mode)
        for t, nll in enumerate(out.step_nll):
            scg.cost(nll, name="nll", step=t)
    graph.surrogate_loss().backward()
    grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
    return torch.stack(out.step_nll, 1).detach(), grads, graph


def model_and_batch(device: torch.device | str = "cpu", steps: int = 3) -> tuple[Any, Batch]:
    """A C2F model and a batch of two documents whose targets decode ``steps`` and fewer words."""
    model = make_model("c2f", multi=2, test_k=2, dropout=0.0, init_range=0.5).to(device)
    return model, make_batch(B=2, M=4, N=5, T=steps + 1).to(device)


@pytest.mark.parametrize("mode", MODES)
def test_reference_backend_is_the_plain_torch_step(mode: str, request: pytest.FixtureRequest) -> None:
    model, batch = model_and_batch()
    draws: dict[tuple[str, int | None], torch.Tensor] = {}
    with backend("reference"):
        got, got_grads, _ = run(model, batch, mode, draws)
    plain_reads = request.getfixturevalue("plain_torch")
    want, want_grads, _ = run(model, batch, mode, draws)
    assert plain_reads  # the comparison really ran the plain-torch read
    assert torch.equal(got, want)  # the forward pass bit for bit
    for a, b in zip(got_grads, want_grads):  # the op's analytic backward vs autograd through the gather
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", MODES)
def test_rows_index_gives_the_gathered_memory_result(mode: str) -> None:
    torch.manual_seed(0)
    B, M, N, H, D, R = 2, 5, 4, 6, 3, 5
    attention = C2FAttention(H, H, D, k=2, test_k=2)
    word_mask = torch.rand(B, M, N) < 0.8
    word_mask[:, :, 0] = True
    base = Memory.build(torch.randn(B, M, N, H), word_mask, torch.randn(B, M, D))
    rows = torch.tensor([1, 0, 1, 1, 0])
    h = torch.randn(R, H)
    with backend("reference"):
        with scg.Graph():
            torch.manual_seed(1)
            got = attention(base.read_through(rows), h, 0, mode)
        with scg.Graph():
            torch.manual_seed(1)
            want = attention(base.index_select(rows), h, 0, mode)
    for name in ("context", "chunk_probs", "chunk_weights", "words_read", "selected", "read_weights"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name
    with pytest.raises(ValueError, match="rows"):
        attention(base.read_through(rows), h, 0, "soft")


def test_the_switch_reaches_the_model_step(kernels_used: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = reference.fine_attend

    def spy(*args: Any) -> Any:
        calls.append("fine")
        return real(*args)

    monkeypatch.setattr(reference, "fine_attend", spy)
    model, batch = model_and_batch()
    for name in ("auto", "reference"):  # CPU tensors: the reference either way
        with backend(name):
            run(model, batch, "greedy", {})
    assert calls and not kernels_used
    with backend("bogus"), pytest.raises(ValueError, match="SCG_KERNELS"):
        run(model, batch, "greedy", {})


@needs_triton
@pytest.mark.parametrize("mode", MODES)
def test_triton_model_step_matches_the_reference(mode: str, kernels_used: list[str]) -> None:
    # CUDA where present, else Triton's interpreter (five launches a step: coarse, fine and fine backward).
    # Sampling: two decoding steps, so that the second step's loss reaches the first step's kernels through
    # the decoder state; greedy differs from it only in the coarse mode (no draws, no scg node): one step.
    model, batch = model_and_batch(DEVICE, steps=2 if mode == "sample" else 1)
    draws: dict[tuple[str, int | None], torch.Tensor] = {}
    with backend("reference"):
        want, want_grads, _ = run(model, batch, mode, draws)
    with backend("triton"):
        got, got_grads, graph = run(model, batch, mode, draws)  # the same draws, replayed
    assert {"coarse", "fine"} <= set(kernels_used)
    torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-5)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=2e-5)
    coarse = [n for n in graph.stochastic_nodes if n.name == "coarse"]
    assert len(coarse) == (batch.tgt.shape[1] - 1 if mode == "sample" else 0)
    assert all(isinstance(n.estimator, KernelDraws) for n in coarse)
    if mode == "sample":  # the score-function term trains the chunk scorer through the kernel's log-softmax
        w_chunk = dict(model.named_parameters())["decoder.attention.w_chunk.weight"]
        assert bool(w_chunk.grad.abs().sum() > 0)


@needs_triton
def test_triton_draws_follow_the_coarse_softmax() -> None:
    """Many query rows sharing one encoder row (``rows``): the kernel's draws equal, bit for bit, the
    reference sampler's for the seed the step took from torch's generator, and those draws follow α^s
    by a chi-square test, each cell's frequency within 4 standard errors. (The Triton interpreter
    costs ~20 ms a draw, so the kernel draws the first ``r_kernel`` rows; the noise of row r is the
    same Philox counters for any number of rows, so the reference's first rows are the kernel's.)"""
    gen = torch.Generator().manual_seed(5)
    R, M, N, H, D, k = 600, 6, 3, 4, 5, 2
    r_kernel = 2
    chunks = torch.randn(1, M, D, generator=gen).to(DEVICE)
    chunk_mask = torch.tensor([[True, True, False, True, True, True]], device=DEVICE)
    words = torch.randn(1, M, N, H, generator=gen).to(DEVICE)
    word_mask = torch.ones(1, M, N, dtype=torch.bool, device=DEVICE)
    q_chunk = torch.randn(D, generator=gen).expand(R, D).contiguous().to(DEVICE)
    q_word = torch.randn(R, H, generator=gen).to(DEVICE)
    rows = torch.zeros(R, dtype=torch.int64, device=DEVICE)
    torch.manual_seed(11)
    with backend("triton"), scg.Graph() as graph:
        out = c2f_kernel_step(
            chunks,
            chunk_mask,
            words,
            word_mask,
            q_chunk[:r_kernel],
            q_word[:r_kernel],
            k=k,
            mode="sample",
            step=0,
            rows=rows[:r_kernel],
        )
    torch.manual_seed(11)
    seed = torch.randint(0, 2**62, (1,), device=DEVICE)  # the seed the step drew
    _, want_idx = reference.coarse_sample(chunks, q_chunk, chunk_mask, seed, k, "multinomial", rows)
    assert torch.equal(out.idx, want_idx[:r_kernel])
    assert [n.name for n in graph.stochastic_nodes] == ["coarse"]
    probs = torch.softmax(torch.mv(chunks[0], q_chunk[0]).masked_fill(~chunk_mask[0], -torch.inf), 0).cpu()
    counts = torch.bincount(want_idx.flatten().cpu(), minlength=M).double()
    n = counts.sum()
    assert n == R * k
    assert chi_square_pvalue(counts, probs) > 1e-3
    stderr = (probs * (1 - probs) / n).sqrt()
    assert bool(((counts / n - probs).abs() <= 4 * stderr + 1e-12).all())
    assert counts[2] == 0  # the padded chunk is never drawn
