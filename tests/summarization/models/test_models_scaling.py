"""The C2F scaling benchmark runs, and C2F's per-step work does not grow with M·N."""

from __future__ import annotations

from _benchmark_loader import load_benchmark


def test_benchmark_measures_standard_and_c2f() -> None:
    bench = load_benchmark("c2f_scaling")
    small = bench.measure(M=4, N=20, B=2, H=32, repeats=2)
    large = bench.measure(M=64, N=20, B=2, H=32, repeats=2)
    for row in (small, large):
        for name in ("standard_attn", "c2f_attn_k1", "c2f_attn_k2", "standard_step", "c2f_step"):
            assert row[f"{name}_ms"] > 0
    # STANDARD's reads and allocations grow with M; C2F's gathered block does not
    assert large["standard_read_floats"] == 16 * small["standard_read_floats"]
    assert large["standard_attn_alloc_kib"] > 8 * small["standard_attn_alloc_kib"]
    assert large["c2f_attn_k1_alloc_kib"] < 2 * small["c2f_attn_k1_alloc_kib"]  # only the O(M) scores grow
    assert "| M | words |" in bench.to_markdown(
        [small, large], {"device": "cpu", "torch": "x", "threads": 1, "repeats": 2}
    )
