"""Smoke test of ``benchmarks/kernel_host_overhead.py``: what it times is the Triton backend's Python with
every launch stubbed (two per step, three per model pair), the real kernels are back afterwards, and its
two launch-size functions compute the same sizes. (Timings are never asserted.)"""

from __future__ import annotations

from typing import Any

import pytest
from _benchmark_loader import NEEDS_TRITON_INTERPRETER, load_benchmark

pytestmark = NEEDS_TRITON_INTERPRETER


@pytest.fixture(scope="module")
def bench() -> Any:
    return load_benchmark("kernel_host_overhead")


def test_the_timed_calls_reach_the_stubbed_launches(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from scg_summarize.kernels.backend import triton_module

    grids: list[Any] = []
    monkeypatch.setattr(bench._NoLaunch, "__getitem__", lambda self, grid: lambda *a, **k: grids.append(grid))
    result = bench.run(repeats=1, calls=2)
    assert set(result["us"]) == {
        "step",
        "model pair",
        "torch op",
        "launch sizes, triton functions",
        "launch sizes, plain integers",
    }
    assert all(us > 0 for us in result["us"].values())
    # step: 2 warm-up + 2 timed + 2 profiled calls of 2 launches; model pair: 2 + 2 calls of 3 launches
    assert len(grids) == 6 * 2 + 4 * 3
    # _coarse_blocks on (R, blocks of 16 chunks), then _fine_read on (R, hidden slices): M = 10, H = 64
    assert grids[:2] == [(64, 1), (64, 1)]
    assert not isinstance(triton_module("fine")._fine_read, bench._NoLaunch)
    assert not isinstance(triton_module("coarse")._coarse_blocks, bench._NoLaunch)


def test_both_launch_size_functions_agree(bench: Any) -> None:
    import triton
    from scg_summarize.kernels.triton_common import cdiv, pow2

    assert bench.launch_sizes(triton.next_power_of_2, triton.cdiv)() == bench.launch_sizes(pow2, cdiv)()
