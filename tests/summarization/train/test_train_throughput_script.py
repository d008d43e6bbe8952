"""Smoke test of ``benchmarks/train_throughput.py`` on tiny models: the rows it writes, and that a run
failing under autocast is recorded and redone in fp32 instead of stopping the script (the GPU run of
issue 17 gets one call). No timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from _benchmark_loader import load_benchmark


@pytest.fixture(scope="module")
def bench() -> Any:
    return load_benchmark("train_throughput")


@pytest.fixture(autouse=True)
def one_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def no_full_collections(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The script runs ``gc.collect()`` after each measurement (GPU memory between runs); in the
    test process, thousands of modules in, each costs ~0.3 s of CPU, and no memory is asserted."""
    monkeypatch.setattr(bench.gc, "collect", lambda generation=2: 0)


def _run(
    bench: Any, corpus: Path, out: Path, *extra: str, configs: tuple[str, ...] = ("tiny-STANDARD", "tiny-C2F")
) -> dict[str, Any]:
    argv = [
        "--data",
        str(corpus),
        "--configs",
        *configs,
        "--steps",
        "2",
        "--warmup",
        "1",
        "--batch",
        "4",
        "--device",
        "cpu",
        "--vocab-size",
        "0",
        "--threads",
        "1",
        "--out",
        str(out),
        "--tag",
        "test",
        *extra,
    ]
    assert bench.main(argv) == 0
    payload: dict[str, Any] = json.loads((out / "train_throughput_test.json").read_text())
    assert (out / "train_throughput_test.md").is_file()
    return payload


def test_rows(bench: Any, synthetic_corpus: Path, tmp_path: Path) -> None:
    payload = _run(bench, synthetic_corpus, tmp_path, "--amp", "none")
    rows = payload["rows"]
    assert [(r["config"], r["amp"], r["split"]) for r in rows] == [
        ("tiny-STANDARD", "none", "train"),
        ("tiny-C2F", "none", "train"),
    ]
    for row in rows:
        assert row["steps"] == 2 and row["batch"] == 4 and not row["errors"]
        assert row["ms_per_step_median"] > 0 and row["tgt_tokens_per_s"] > 0 and row["src_tokens_per_s"] > 0
        assert row["params"] > 0 and row["loss_per_token"] > 0
        assert 0 < row["src_real_fraction"] <= 1
    assert rows[0]["kernels"] == "-" and rows[1]["kernels"] == "reference"  # CPU: the reference kernels
    ratio = rows[1]["ms_per_step_median"] / rows[0]["ms_per_step_median"]
    assert payload["ratios"][0].startswith(f"- M = {rows[0]['M']}, amp none: tiny-C2F / tiny-STANDARD = {ratio:.2f}x")


def test_compiled_rows_beside_the_eager_ones(bench: Any, synthetic_corpus: Path, tmp_path: Path) -> None:
    """``--compile eager``: each configuration runs eagerly and compiled (targets padded alike),
    and the report gives the compiled / eager ratio of each."""
    payload = _run(bench, synthetic_corpus, tmp_path, "--amp", "none", "--compile", "eager", configs=("tiny-C2F",))
    eager, compiled = payload["rows"]
    assert (eager["compile"], compiled["compile"]) == ("", "eager") and not eager["errors"] and not compiled["errors"]
    assert compiled["steps"] == 2 and compiled["graphs_compiled_timed"] >= 0
    ratio = compiled["ms_per_step_median"] / eager["ms_per_step_median"]
    assert f"- tiny-C2F, M = {eager['M']}, amp none: compiled (eager) / eager = {ratio:.2f}x" in "\n".join(
        payload["ratios"]
    )
    assert "| tiny-C2F (compiled, eager) |" in (tmp_path / "train_throughput_test.md").read_text()
    torch._dynamo.reset()


def test_memory_by_line_names_the_lines_of_one_more_step(bench: Any, synthetic_corpus: Path, tmp_path: Path) -> None:
    payload = _run(
        bench,
        synthetic_corpus,
        tmp_path,
        "--amp",
        "none",
        "--memory-by-line",
        "4",
        "--memory-min-mib",
        "0",
        configs=("tiny-STANDARD",),
    )
    (row,) = payload["rows"]
    lines = row["memory_by_line"]
    assert len(lines) == 4 and [m["mib"] for m in lines] == sorted((m["mib"] for m in lines), reverse=True)
    assert all(m["calls"] >= 1 and m["mib"] > 0 for m in lines)
    assert any(m["line"].startswith("scg_summarize/") for m in lines)
    md = (tmp_path / "train_throughput_test.md").read_text()
    assert "## Where a step's memory goes" in md and f"| `{lines[0]['line']}` | `{lines[0]['op']}` |" in md


def test_memory_by_line_is_refused_with_a_captured_step(bench: Any, synthetic_corpus: Path, capsys: Any) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--data", str(synthetic_corpus), "--device", "cpu", "--compile", "eager", "--memory-by-line", "3"])
    assert "--memory-by-line records an eager step's ops: not with --cuda-graph or --compile" in capsys.readouterr().err


def test_a_corpus_of_another_vocabulary_size_is_refused_before_any_run(
    bench: Any, synthetic_corpus: Path, capsys: Any
) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--data", str(synthetic_corpus), "--device", "cpu", "--vocab-size", "50004"])
    err = capsys.readouterr().err
    assert f"--vocab-size 50004, but {synthetic_corpus} has a vocabulary of" in err
    assert "prepare it with `scg-summarize prepare --vocab`" in err


def test_a_failing_autocast_run_falls_back_to_fp32(
    bench: Any, synthetic_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = bench.measure

    def measure(config_name: str, data: Path, split: str, args: Any, amp: str, deadline: float, backend: str) -> Any:
        if amp == "bf16" and config_name == "tiny-C2F":
            raise RuntimeError("a dtype mismatch in a custom op")
        return real(config_name, data, split, args, amp, deadline, backend)

    monkeypatch.setattr(bench, "measure", measure)
    payload = _run(bench, synthetic_corpus, tmp_path, "--amp", "bf16", configs=("tiny-C2F",))
    (c2f,) = payload["rows"]
    assert c2f["amp_requested"] == "bf16" and c2f["amp"] == "none" and c2f["steps"] == 2
    assert len(c2f["errors"]) == 1 and "a dtype mismatch in a custom op" in c2f["errors"][0]["error"]
    md = (tmp_path / "train_throughput_test.md").read_text()
    assert "none (asked bf16)" in md and "a dtype mismatch in a custom op" in md


def test_a_missing_split_is_named(bench: Any, synthetic_corpus: Path) -> None:
    assert bench.pick_split(synthetic_corpus, "auto") == "train"
    with pytest.raises(SystemExit, match="--split nope"):
        bench.pick_split(synthetic_corpus, "nope")


def test_cuda_graph_needs_a_cuda_device(bench: Any, synthetic_corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--data", str(synthetic_corpus), "--device", "cpu", "--cuda-graph"])
    assert "--cuda-graph needs a CUDA device, got --device cpu" in capsys.readouterr().err


def test_configurations_run_at_two_grids_get_their_curve(bench: Any, tmp_path: Path) -> None:
    def row(config: str, M: int, ms: float) -> dict[str, Any]:
        return {"config": config, "M": M, "amp": "bf16", "ms_per_step_median": ms, "peak_mem_mib": 10.0 * M}

    one_grid = [row("STANDARD", 10, 5.0), row("C2F", 10, 6.0)]
    payload = {"rows": one_grid, "environment": {"device": "cpu"}, "args": {}}
    assert not bench.write_plot(tmp_path / "one.png", payload) and not (tmp_path / "one.png").exists()
    two = [*one_grid, row("C2F", 100, 7.0), {"config": "STANDARD", "M": 100, "failed": True}]
    assert set(bench.curves(two)) == {("C2F", "bf16", "")}  # (STANDARD's second grid failed)
    fallback = {**row("STANDARD", 100, 9.0), "amp": "none"}  # (a bf16 run redone in fp32)
    assert set(bench.curves([*two, fallback])) == {
        ("C2F", "bf16", ""),
        ("STANDARD", "bf16", ""),
        ("STANDARD", "none", ""),
    }
    payload["rows"] = two
    assert bench.write_plot(tmp_path / "two.png", payload)
    assert (tmp_path / "two.png").read_bytes().startswith(b"\x89PNG")
