"""Smoke test of ``benchmarks/train_throughput.py`` on tiny models: the rows it writes, and that a run
failing under autocast is recorded and redone in fp32 instead of stopping the script (the GPU run of
issue 17 gets one call). No timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
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


def test_a_captured_step_refuses_what_one_graph_cannot_replay(bench: Any) -> None:
    for normalize, alternate, optimizer in (("tokens", 0.0, "sgd"), ("batch", 0.5, "sgd"), ("batch", 0.0, "adam")):
        train = SimpleNamespace(normalize=normalize, alternate=alternate, optimizer=optimizer)
        config = SimpleNamespace(train=train, data=SimpleNamespace(pad_targets=0))
        with pytest.raises(ValueError, match="--cuda-graph needs train.normalize = 'batch', no \\+ALTERNATE"):
            bench.CapturedStep(SimpleNamespace(config=config), 10, 1)
    train = SimpleNamespace(normalize="batch", alternate=0.0, optimizer="sgd")
    for multiple, length in ((0, 10), (8, 16)):  # (rounded up to data.pad_targets' multiple)
        config = SimpleNamespace(train=train, data=SimpleNamespace(pad_targets=multiple))
        step = bench.CapturedStep(SimpleNamespace(config=config), 10, 1)
        assert step.graph is None and step.length == length


def test_padded_targets_leave_a_soft_step_unchanged(bench: Any, synthetic_corpus: Path, tmp_path: Path) -> None:
    """The captured step pads every batch's targets to one length: on a deterministic (soft,
    dropout-free) model the padded positions change neither the NLL, the token count nor any
    gradient; a length shorter than the batch's targets is refused."""
    from scg_summarize.train import Trainer, load_config

    config = load_config("tiny-STANDARD", ["model.dropout=0.0", "train.max_steps_per_epoch=1", "train.epochs=1"])
    trainer = Trainer(config, synthetic_corpus, tmp_path / "run", quiet=True, log=lambda line: None)
    try:
        batch = next(iter(trainer.loader))
        T = int(batch.tgt.shape[1])
        params = [p for p in trainer.model.parameters() if p.requires_grad]
        got = []
        for b in (batch, batch.with_target_length(T + 5)):
            result, _ = trainer.forward_backward(*trainer.step_inputs(b))
            grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in params]
            got.append((result.read(), grads))
        (plain, g0), (padded, g1) = got
        assert padded.tokens == plain.tokens and abs(padded.nll - plain.nll) <= 1e-5 * abs(plain.nll)
        assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(g0, g1))
        assert any(bool(g.abs().sum() > 0) for g in g0)
        with pytest.raises(ValueError, match=f"a batch has targets of {T} positions, more than the {T - 1} it is"):
            batch.with_target_length(T - 1)
    finally:
        trainer.close()


def test_a_captured_step_fills_its_static_inputs_and_reads_its_values(
    bench: Any, synthetic_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plumbing of ``--cuda-graph`` on the CPU, with torch.cuda's stream and graph calls made
    inert (the "capture" runs the step eagerly once; a replay does nothing): the first call warms
    up and captures on its padded batch; a later call copies its batch into the same input
    tensors; each returns the step's values and counts a step. (What a real capture does on a
    device is not tested here: it has not run yet.)"""
    from contextlib import nullcontext

    from scg_summarize.train import Trainer, load_config

    class Inert:
        def wait_stream(self, other: object) -> None: ...

        def replay(self) -> None: ...

    monkeypatch.setattr(torch.cuda, "Stream", Inert)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: Inert())
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: nullcontext())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Inert)
    monkeypatch.setattr(torch.cuda, "graph", lambda graph: nullcontext())
    options = ["train.optimizer='sgd'", "train.epochs=1", "train.max_steps_per_epoch=2"]
    trainer = Trainer(load_config("tiny-C2F", options), synthetic_corpus, tmp_path / "run", quiet=True)
    try:
        first, second = (b for b, _ in zip(trainer.loader, range(2)))
        length = max(int(first.tgt.shape[1]), int(second.tgt.shape[1])) + 3
        step = bench.CapturedStep(trainer, length, warmup=2)
        values = step(first)
        inputs = step.inputs
        assert inputs is not None and inputs.tgt.shape[1] == length and trainer.counters.step == 1
        assert values.tokens == int(first.tgt_mask[:, 1:].sum()) and values.norm is not None
        step(second)
        assert step.inputs is inputs and trainer.counters.step == 2  # the same tensors, refilled
        padded = second.with_target_length(length)
        assert torch.equal(inputs.tgt, padded.tgt) and torch.equal(inputs.src, padded.src)
    finally:
        trainer.close()
