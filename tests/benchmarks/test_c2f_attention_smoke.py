"""Smoke test of ``benchmarks/c2f_attention.py`` on the CPU at tiny sizes: the methods run, the
back-to-back steps call their steps in turn, and the report pairs each C2F row with the dense row timed
the same way. (Timings are never asserted.)"""

from __future__ import annotations

import argparse
from typing import Any

import pytest
import torch
from _benchmark_loader import load_benchmark


@pytest.fixture(scope="module")
def bench() -> Any:
    return load_benchmark("c2f_attention")


def test_back_to_back_calls_the_steps_in_turn(bench: Any) -> None:
    calls: list[int] = []
    steps = [lambda i=i: calls.append(i) for i in range(3)]
    bench.back_to_back(steps, 7)()
    assert calls == [0, 1, 2, 0, 1, 2, 0]


def test_the_input_sets_differ_by_salt(bench: Any) -> None:
    a, b = (bench.make_inputs(2, 3, 4, 8, torch.float32, torch.device("cpu"), salt) for salt in (0, 1))
    assert a["words"].shape == (2, 3, 4, 8)
    assert not torch.equal(a["words"], b["words"])
    assert torch.equal(a["words"], bench.make_inputs(2, 3, 4, 8, torch.float32, torch.device("cpu"))["words"])


def test_a_cpu_run_and_its_report(bench: Any) -> None:
    args = argparse.Namespace(device="cpu", dtype="fp32", small=True, chunks=[2, 4], ks=[1], repeats=1)
    args.no_graphs, args.b2b = False, 20  # on the CPU: no graph rows, no back-to-back rows
    result = bench.run(args)
    methods = {(r["M"], r["method"], r["k"]) for r in result["rows"]}
    assert methods == {(m, name, k) for m in (2, 4) for name, k in [("dense_eager", 0), ("dense_sdpa", 0)]} | {
        (m, "c2f_reference", 1) for m in (2, 4)
    }
    assert all(r["ms"] > 0 and r["launches"] > 0 for r in result["rows"])
    text = bench.to_markdown(result, "cmd")
    assert "- M = 2, c2f_reference k=1:" in text and "Scaling, time at M = 4 over time at M = 2" in text


def test_the_report_pairs_back_to_back_rows_with_dense_back_to_back(bench: Any) -> None:
    def row(method: str, k: int, ms: float) -> dict[str, Any]:
        need = bench.bytes_read(method, 2, 10, 4, 8, k, 4)
        return {"M": 10, "method": method, "k": k, "ms": ms, "bytes_read": need, "gb_per_s": need / ms / 1e6}

    rows = [row("dense_eager_graph", 0, 4.0), row("dense_eager_graph_b2b", 0, 3.0)]
    rows += [row("c2f_triton_graph", 1, 2.0), row("c2f_triton_graph_b2b", 1, 1.0)]
    for r in rows:
        r["peak_extra_bytes"] = r["launches"] = None
    result = {"device": "x", "torch": "y", "dtype": "float32", "threads": 1, "B": 2, "N": 4, "H": 8}
    result |= {"repeats": 1, "copy_gb_per_s": 1.0, "rows": rows}
    text = bench.to_markdown(result, "cmd")
    assert "- M = 10, c2f_triton_graph k=1: 2.0x faster" in text  # 4.0 / 2.0: one replay against one
    assert "- M = 10, c2f_triton_graph_b2b k=1: 3.0x faster" in text  # 3.0 / 1.0: back to back against b2b
