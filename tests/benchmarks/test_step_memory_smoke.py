"""``benchmarks/step_memory.py``: the bytes a step's source lines allocate (``train_throughput.py
--memory-by-line``), checked on the CPU against allocations whose size and count are known."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _benchmark_loader import load_benchmark
from scg_summarize.models.common.attention import flat_step

B, M, N, H = 4, 6, 8, 16


@pytest.fixture(scope="module")
def step_memory() -> Any:
    return load_benchmark("step_memory")


def test_a_copy_made_at_every_step_shows_as_steps_times_its_size(step_memory: Any) -> None:
    """Word states laid out (B, N, M, H) and viewed as (B, M, N, H): flat attention's reshape must copy
    them at each call. Five calls: 5 copies of B*M*N*H float32 charged to flat_step's line; the same
    calls over contiguous states charge that line nothing."""
    g = torch.Generator().manual_seed(0)
    strided = torch.randn(B, N, M, H, generator=g).transpose(1, 2)  # (B, M, N, H), not contiguous
    mask = torch.ones(B, M, N, dtype=torch.bool)
    q = torch.randn(B, H, generator=g)
    size_mib = B * M * N * H * 4 / 2**20
    with step_memory.LineAllocations(torch.device("cpu"), min_bytes=int(B * M * N * H * 4)) as seen:
        for _ in range(5):
            flat_step(strided, mask, q)
    (top,) = seen.top(3)
    assert top.line.startswith("scg_summarize/models/common/attention.py:") and top.line.endswith(" flat_step")
    assert (top.calls, top.dtype) == (5, "float32") and top.mib == pytest.approx(5 * size_mib)
    dense = strided.contiguous()
    with step_memory.LineAllocations(torch.device("cpu"), min_bytes=1) as contiguous:
        for _ in range(5):
            flat_step(dense, mask, q)
    assert contiguous.top(10) and all(r.mib < size_mib for r in contiguous.top(10))


def test_ops_below_the_threshold_and_views_are_not_charged(step_memory: Any) -> None:
    x = torch.randn(64, 64)
    with step_memory.LineAllocations(torch.device("cpu"), min_bytes=64 * 64 * 4) as seen:
        x.view(-1)
        x[:, :2] * 2
        x.t()
    assert seen.top(5) == []
    with step_memory.LineAllocations(torch.device("cpu"), min_bytes=1) as seen:
        x * 2
    (only,) = seen.top(5)
    assert (only.line, only.op, only.calls) == ("(autograd engine)", "aten.mul.Tensor", 1)
    assert only.mib == pytest.approx(64 * 64 * 4 / 2**20)
