"""`scg_summarize.kernels.word_grads`: the fine reads' gradients of the word states collected in one
buffer. The gradients equal those of reads that each return a gradient of the whole memory (bit for
bit, repeated draws of a chunk included); a backward pass makes one tensor of the memory's size, not
two per read; a retained graph gives the same gradients twice; a pass that does not reach the words
leaves the buffer alone; a differentiable backward falls back to whole-shape gradients."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch
from scg_summarize.kernels import collect_word_grads, forced, ops, triton_available
from torch.utils._python_dispatch import TorchDispatchMode

from ..kernel_support import DEVICE, builtins_scanned_once, one_thread  # noqa: F401  (fixtures)

B, M, N, H, K, STEPS = 3, 5, 4, 6, 3, 4


pytestmark = pytest.mark.usefixtures("one_thread", "builtins_scanned_once")


@pytest.fixture(params=["reference", "triton"], autouse=True)
def kernels(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test on both backends of the fine read (Triton: on the GPU, or in its CPU interpreter)."""
    if request.param == "triton" and not triton_available():
        pytest.skip("triton is not installed")
    with forced(request.param):
        yield request.param


def _problem(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """Word states (a leaf), their mask, per-step queries and chunk draws ``(B, K)`` with repeats."""
    g = torch.Generator().manual_seed(seed)
    leaf = torch.randn(B, M, N, H, generator=g).to(DEVICE).requires_grad_()
    mask = torch.rand(B, M, N, generator=g) < 0.8
    mask[:, :, 0] = True
    queries = [torch.randn(B, H, generator=g).to(DEVICE).requires_grad_() for _ in range(STEPS)]
    draws = [torch.randint(0, M, (B, K), generator=g) for _ in range(STEPS)]
    draws[0][0] = torch.tensor([2, 2, 2])  # (a row drawing one chunk K times, and one drawing it twice)
    draws[1][1] = torch.tensor([1, 3, 1])
    return leaf, mask.to(DEVICE), queries, [d.to(DEVICE) for d in draws]


def _loss(
    words: torch.Tensor, mask: torch.Tensor, queries: list[torch.Tensor], draws: list[torch.Tensor]
) -> torch.Tensor:
    total = words.new_zeros(())
    for t, (q, idx) in enumerate(zip(queries, draws)):
        weights = torch.full((B, K), 1.0 / K, dtype=words.dtype, device=words.device)
        context, attn = ops.c2f_fine_attend(words, mask, q, idx, weights)
        total = total + (t + 1.0) * context.pow(2).sum() + attn.sum()
    return total


def _grads(
    collect: bool, backward: Callable[[torch.Tensor, list[torch.Tensor]], list[torch.Tensor]]
) -> list[torch.Tensor]:
    leaf, mask, queries, draws = _problem()
    words = leaf * 1.0  # (not a leaf: as the encoder's output)
    return backward(_loss(collect_word_grads(words) if collect else words, mask, queries, draws), [leaf, *queries])


def _grad(loss: torch.Tensor, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return list(torch.autograd.grad(loss, inputs))


def test_collected_gradients_equal_whole_shape_ones_to_the_bit() -> None:
    plain, collected = _grads(False, _grad), _grads(True, _grad)
    assert all(torch.equal(a, b) for a, b in zip(plain, collected))
    assert bool(plain[0].abs().sum() > 0)


class _MemorySized(TorchDispatchMode):
    """Counts the aten ops that write a tensor of the word states' shape (B, M, N, H)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and tuple(out.shape) == (B, M, N, H):
            self.seen.append(func.overloadpacket.__name__)
        return out


@pytest.mark.parametrize("collect", [False, True])
def test_a_backward_pass_makes_one_memory_sized_tensor_not_two_per_read(collect: bool) -> None:
    leaf, mask, queries, draws = _problem()
    words = leaf * 1.0
    loss = _loss(collect_word_grads(words) if collect else words, mask, queries, draws)
    with _MemorySized() as mode:
        loss.backward()
    writes = [name for name in mode.seen if name in ("zeros_like", "fill_", "zero_", "add", "add_", "index_put_")]
    if collect:  # the buffer (zeros, then each read's index_put_), handed to the leaf's MulBackward
        assert writes.count("add") == 0 and writes.count("fill_") + writes.count("zeros_like") == 1
    else:  # a zero tensor per read, summed by the engine (what the buffer saves)
        assert writes.count("add") + writes.count("add_") >= STEPS - 1
        assert writes.count("fill_") + writes.count("zeros_like") == STEPS


def test_a_retained_graph_gives_the_same_gradients_twice() -> None:
    leaf, mask, queries, draws = _problem()
    loss = _loss(collect_word_grads(leaf * 1.0), mask, queries, draws)
    first = _grad_retained(loss, leaf)
    assert torch.equal(first, _grad_retained(loss, leaf))
    assert torch.equal(first, _grads(False, _grad)[0])


def _grad_retained(loss: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    (g,) = torch.autograd.grad(loss, [x], retain_graph=True)
    return g


def test_a_pass_that_does_not_reach_the_words_leaves_the_buffer_alone() -> None:
    """A gradient w.r.t. the queries only runs every read's backward but not the collector's; the
    words' gradient of a later pass over the same graph is still exact."""
    leaf, mask, queries, draws = _problem()
    loss = _loss(collect_word_grads(leaf * 1.0), mask, queries, draws)
    torch.autograd.grad(loss, queries, retain_graph=True)
    assert torch.equal(_grad_retained(loss, leaf), _grads(False, _grad)[0])


def test_a_differentiable_backward_falls_back_to_whole_shape_gradients() -> None:
    """With ``create_graph=True`` the reads return gradients of the whole memory (no in-place write
    into the buffer is recorded): the same first-order gradients, with a graph behind them. (The
    fine read has no second-order formula: differentiating them again is refused, as before.)"""

    def differentiable(loss: torch.Tensor, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        grads = torch.autograd.grad(loss, inputs, create_graph=True)
        assert grads[0].requires_grad
        return [g.detach() for g in grads]

    plain, collected = _grads(False, differentiable), _grads(True, differentiable)
    assert all(torch.equal(a, b) for a, b in zip(plain, collected))
    assert all(torch.equal(a, b) for a, b in zip(plain, _grads(False, _grad)))


def test_the_whole_step_op_collects_too() -> None:
    """``scg_summarize::c2f_attend`` (coarse choice and fine read in one op: the model's Triton path) draws
    its chunks (multinomial, with repeats) and places its words' gradients in the buffer: the
    gradients equal the whole-shape ones to the bit."""
    g = torch.Generator().manual_seed(1)
    keys = torch.randn(B, M, 4, generator=g).to(DEVICE).requires_grad_()
    q_coarse = [torch.randn(B, 4, generator=g).to(DEVICE) for _ in range(STEPS)]

    def grads(collect: bool) -> list[torch.Tensor]:
        leaf, mask, queries, _ = _problem()
        words = leaf * 1.0
        read = collect_word_grads(words) if collect else words
        total = words.new_zeros(())
        for t, (qc, qf) in enumerate(zip(q_coarse, queries)):
            seed = torch.tensor([100 + t], device=DEVICE)
            log_alpha, idx, weights, context, attn = ops.c2f_attend(keys, qc, mask.any(-1), read, mask, qf, seed, K)
            total = total + (t + 1.0) * context.pow(2).sum() + attn.sum() + log_alpha.logsumexp(-1).sum()
        return list(torch.autograd.grad(total, [leaf, keys, *queries]))

    plain, collected = grads(False), grads(True)
    assert all(torch.equal(a, b) for a, b in zip(plain, collected))
    assert bool(plain[0].abs().sum() > 0)


def test_without_a_gradient_the_words_are_not_wrapped() -> None:
    words = torch.randn(B, M, N, H, device=DEVICE)
    assert collect_word_grads(words) is words
    with torch.no_grad():
        grad_words = torch.randn(B, M, N, H, device=DEVICE, requires_grad=True)
        assert collect_word_grads(grad_words) is grad_words
