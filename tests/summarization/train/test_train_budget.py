"""Every phase of training says what it is doing, a time budget says what it covers and that it
stopped the run (training.json, results.json, report), and the process exits leaving no .lock
(issue 28 item 10, issue 31)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scg_summarize.cli import main
from scg_summarize.dirlock import DirLock
from scg_summarize.evaluation.report import make_result, markdown_report
from scg_summarize.train import Trainer, load_config
from scg_summarize.train.checkpoint import param_digest

from ..robust_support import forked_cli

FAST = ["train.max_steps_per_epoch=2", "train.epochs=2", "train.select_examples=8", "eval.max_len=5"]
TINY_BUDGET = "train.time_budget_s=1e-9"  # spent by the first step, whatever the machine's load


def _fit(data: Path, out: Path, *overrides: str) -> tuple[Trainer, list[str]]:
    lines: list[str] = []
    trainer = Trainer(load_config("tiny-STANDARD", [*FAST, *overrides]), data, out, log=lines.append)
    try:
        trainer.fit()
    finally:
        trainer.close()
    return trainer, lines


def test_a_run_budgeted_in_epochs_records_steps_and_times(synthetic_corpus: Path, tmp_path: Path) -> None:
    trainer, lines = _fit(
        synthetic_corpus, tmp_path / "run", "train.select_metric='rougeL'", "train.max_steps_per_epoch=1"
    )
    record = json.loads((tmp_path / "run" / "training.json").read_text())
    assert record["stopped_by"] == "epochs" and record["steps"] == 2 and record["validations"] == 2
    assert record["seed"] == 1 and record["threads"] == 1 and record["time_budget_s"] == 0
    assert 0 < record["validation_s"] <= record["wall_s"] and record["cpu_s"] > 0
    # progress for each phase after the steps: validation perplexity and the decoding that picks best.pt
    assert sum(line.startswith("validation (perplexity): done") for line in lines) == 2
    assert sum(line.startswith("validation (rougeL of greedy summaries, picks best.pt): done") for line in lines) == 2
    assert not any(line.startswith("time budget") for line in lines)
    assert not (tmp_path / "run" / ".lock").exists()  # released and removed by close()
    assert trainer.stopped_by == "epochs"


def test_a_time_budget_says_what_it_covers_and_that_it_stopped_the_run(
    synthetic_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    # the test evaluation decodes 4 examples: this test is about the record, not the scores
    sets = [a for kv in [*FAST, TINY_BUDGET, "eval.max_examples=4"] for a in ("--set", kv)]
    assert (
        main(
            ["train", "--config", "tiny-STANDARD", "--data", str(synthetic_corpus), "--out", str(out), "--rouge", *sets]
        )
        == 0
    )
    lines = capsys.readouterr().err.splitlines()
    record = json.loads((out / "training.json").read_text())
    assert record["stopped_by"] == "time_budget_s" and record["steps"] == 1 and record["validations"] == 1
    assert any("the test evaluation after it is not counted" in line for line in lines)
    assert any(line.startswith("time budget: stopping after step 1") for line in lines)
    end = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert end["event"] == "end" and end["stopped_by"] == "time_budget_s"
    # the record travels with the decoded results into the report
    result = json.loads((out / "results.json").read_text())
    assert result["training"]["stopped_by"] == "time_budget_s" and result["training"]["steps"] == 1
    assert main(["report", str(out)]) == 0
    assert "tiny-STANDARD (time budget)" in capsys.readouterr().out


def test_a_step_budget_stops_there_with_a_final_validation_and_repeats_to_the_bit(
    synthetic_corpus: Path, tmp_path: Path
) -> None:
    digests = []
    for name in ("a", "b"):
        trainer, _ = _fit(synthetic_corpus, tmp_path / name, "train.epochs=5", "train.max_steps=3")
        record = json.loads((tmp_path / name / "training.json").read_text())
        assert record["stopped_by"] == "max_steps" and record["steps"] == 3 and record["validations"] == 2
        digests.append(param_digest(trainer.model))
    assert digests[0] == digests[1]


def test_report_marks_results_of_runs_stopped_by_a_time_budget() -> None:
    stopped = {"steps": 428, "stopped_by": "time_budget_s", "time_budget_s": 840.0, "cpu_s": 437.0}
    rows = [
        make_result("model", "A", {"ppl": 2.0}, data="d", split="test", examples=3, run="r1", training=stopped),
        make_result(
            "model",
            "B",
            {"ppl": 2.0},
            data="d",
            split="test",
            examples=3,
            run="r2",
            training={**stopped, "stopped_by": "epochs"},
        ),
    ]
    text = markdown_report(rows)
    assert "| A (time budget) |" in text and "| B |" in text
    assert "A (time budget): training stopped by train.time_budget_s=840 after 428 steps" in text
    assert "B (time budget)" not in text


def test_a_released_lock_removes_its_file_and_the_folder_can_be_locked_again(tmp_path: Path) -> None:
    first = DirLock(tmp_path, "one").acquire()
    assert (tmp_path / ".lock").read_text().startswith("one (pid")
    first.release()
    assert not (tmp_path / ".lock").exists()
    with DirLock(tmp_path, "two"):
        assert (tmp_path / ".lock").read_text().startswith("two (pid")
    assert not (tmp_path / ".lock").exists()


def test_train_with_a_budget_exits_after_results_json_and_leaves_no_lock(
    synthetic_corpus: Path, tmp_path: Path
) -> None:
    """The one real process of this file (exiting is what it checks), forked from this one so that
    it does not import torch again (robust_support.fork_cli). Without ``--rouge``: the decoding
    phase is checked in process by test_train_loop's
    test_cli_train_writes_logs_checkpoints_and_results, the decoded results.json and the report by
    test_a_time_budget_says_what_it_covers_and_that_it_stopped_the_run."""
    out = tmp_path / "run"
    sets = [a for kv in [*FAST, TINY_BUDGET] for a in ("--set", kv)]
    done = forked_cli(
        "train", "--config", "tiny-STANDARD", "--data", synthetic_corpus, "--out", out, "--quiet", *sets, timeout=180
    )  # a process that does not exit fails here
    assert done.returncode == 0, done.stderr
    assert not (out / ".lock").exists()
    result = json.loads((out / "results.json").read_text())
    assert result["training"]["stopped_by"] == "time_budget_s" and result["training"]["steps"] == 1
    assert "train: test evaluation (perplexity): done" in done.stderr, done.stderr
    assert "validation (perplexity): done" in done.stderr  # --quiet keeps each phase's first and last line


class _TwoRanks:
    """A world of two seen from rank 0, whose other rank answers ``remote`` to every sum."""

    enabled, rank, world, is_main = True, 0, 2, True

    def __init__(self, remote: float) -> None:
        self.remote = remote

    def all_reduce(self, values: list[float], device: object) -> list[float]:
        return [v + self.remote for v in values]


def test_the_ranks_agree_on_a_flag_and_the_time_budget_goes_through_that_agreement(
    synthetic_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under DDP each rank reads its own clock: the stop decision must be agreed (any rank out of
    time stops all), or one rank stops while the other waits in its next all-reduce."""
    trainer = Trainer(
        load_config("tiny-STANDARD", [*FAST, "train.time_budget_s=1e9"]),
        synthetic_corpus,
        tmp_path / "run",
        log=lambda line: None,
    )
    try:
        single = trainer.dist
        trainer.dist = _TwoRanks(remote=1.0)  # type: ignore[assignment]
        assert trainer._any_rank(False) and trainer._any_rank(True)
        trainer.dist = _TwoRanks(remote=0.0)  # type: ignore[assignment]
        assert not trainer._any_rank(False) and trainer._any_rank(True)
        trainer.dist = single
        asked: list[bool] = []
        monkeypatch.setattr(trainer, "_stop_requested", lambda: False)
        monkeypatch.setattr(trainer, "_any_rank", lambda local: asked.append(local) or True)  # the other rank is out
        trainer.fit()
    finally:
        trainer.close()
    assert asked == [False]  # this rank's own clock had time left: the other rank's answer stopped it
    assert trainer.stopped_by == "time_budget_s" and trainer.counters.step == 1
