"""`Memory` (``models/common/attention.py``) under ``torch.autocast``: the states cast once, when the
memory is built, not by autocast at every decoder step's products."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from scg_summarize.kernels.word_grads import collector_of
from scg_summarize.models.common.attention import Memory, flat_step, hier_step
from torch.utils._python_dispatch import TorchDispatchMode

from ..models_helpers import make_batch, make_model

B, M, N, H = 2, 3, 5, 4


class MemoryCopies(TorchDispatchMode):
    """Counts the casts (``aten._to_copy``) whose output has as many elements as the word states."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size, self.copies = size, 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten._to_copy.default and out.numel() == self.size:
            self.copies += 1
        return out


def _memory(dtype: torch.dtype) -> Memory:
    g = torch.Generator().manual_seed(0)
    words = torch.randn(B, M, N, H, generator=g).to(dtype)  # (B, M, N, H)
    mask = torch.rand(B, M, N, generator=g) < 0.7
    return Memory.build(words, mask, torch.randn(B, M, 6, generator=g).to(dtype))


def _step_copies(memory: Memory) -> int:
    """The memory-sized casts of a flat and a HIER step under bf16 autocast."""
    q = torch.randn(B, H)
    chunk_probs = torch.softmax(torch.randn(B, M), -1)
    with torch.autocast("cpu", dtype=torch.bfloat16), MemoryCopies(memory.words.numel()) as seen:
        flat_step(memory.words, memory.word_mask, q)
        hier_step(memory.words, memory.word_mask, chunk_probs, q)
    return seen.copies


# (float16: what cuDNN's LSTM gives under autocast on CUDA, whatever autocast's dtype)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_memory_built_under_autocast_holds_its_states_in_autocast_s_dtype(dtype: torch.dtype) -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        memory = _memory(dtype)
    assert memory.words.dtype == torch.bfloat16 and memory.chunks is not None
    assert memory.chunks.dtype == torch.bfloat16
    assert memory.chunk_sizes.dtype == dtype  # (counted in the incoming dtype, as without autocast)
    assert _step_copies(memory) == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_memory_built_without_autocast_is_left_as_it_is_and_cast_at_every_product(dtype: torch.dtype) -> None:
    """The same steps over a memory built outside autocast: autocast copies the states for each of
    the four products (flat attention's two, HIER's two): the copies the cast at build time saves,
    which also shows that the count above sees them."""
    memory = _memory(dtype)
    assert memory.words.dtype == dtype and memory.chunks is not None and memory.chunks.dtype == dtype
    assert _step_copies(memory) == 4


def test_float64_states_are_left_alone_as_autocast_leaves_them() -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        memory = _memory(torch.float64)
    assert memory.words.dtype == torch.float64


@pytest.mark.parametrize("attention", ["c2f", "standard"])
def test_a_model_s_states_from_a_float16_encoder_reach_its_attention_in_autocast_s_dtype(
    attention: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's own encode with its word encoder's states in float16, as cuDNN's LSTM gives them
    under autocast on CUDA: the memory's states are bf16, and a hard model's fine reads still find the
    collector of their gradients (`kernels.word_grads`) behind them: the cast comes before it."""
    model = make_model(attention)
    encoder = model.word_encoder
    run = encoder.forward

    def float16_states(*args: Any, **kwargs: Any) -> Any:
        out = run(*args, **kwargs)
        return type(out)(out.states.to(torch.float16), out.final)

    monkeypatch.setattr(encoder, "forward", float16_states)
    batch = make_batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        memory, _ = model.encode(batch.src, batch.src_mask)
    assert memory.words.dtype == torch.bfloat16
    assert (collector_of(memory.words) is not None) == (attention == "c2f")
