"""Faults in one process (issue 13): best.pt and checkpoint.pt stay consistent across a crash
between them, the metrics log survives a torn tail and never repeats its ``end`` line, a full
disk while checkpointing keeps the old checkpoint with a clear message, and a replaced corpus
is refused."""

from __future__ import annotations

import errno
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from scg_summarize.cli import main
from scg_summarize.data import make_synthetic_corpus
from scg_summarize.data.synthetic import SyntheticConfig
from scg_summarize.models.loading import CheckpointError, read_checkpoint
from scg_summarize.train import Trainer, load_config
from scg_summarize.train import checkpoint as checkpoint_module
from scg_summarize.train import loop as loop_module
from scg_summarize.train.checkpoint import save_atomic
from scg_summarize.train.fingerprint import CorpusChangedError
from scg_summarize.train.metrics_log import repair_log

from ..conftest import ShortRun
from ..robust_support import SHORT, TINY, events, same_parameters, train_args

OVERRIDES = [arg for arg in SHORT if arg != "--set"]
TWO_STEPS = ["--set", "train.max_steps_per_epoch=2"]  # for the tests that need a run, not its length


class Crash(BaseException):
    """Stands for the process dying at a chosen moment."""


def _trainer(data: Path, out: Path, options: tuple[str, ...], resume: bool = False) -> Trainer:
    """The trainer of ``main(train_args(data, out, *options))``."""
    config = load_config(TINY, [*OVERRIDES, *(arg for arg in options if arg != "--set")])
    return Trainer(config, data, out, resume=resume, quiet=True, log=lambda line: None)


def test_a_crash_between_best_and_checkpoint_keeps_them_consistent(
    synthetic_corpus: Path, finished_short_run: ShortRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = finished_short_run.path  # the same run, not stopped
    assert read_checkpoint(reference / "best.pt")["step"] == 4  # epoch 2 improved
    real_save = loop_module.save_atomic

    def crash_at_the_last_checkpoint(obj: Any, path: Path) -> None:
        if Path(path).name == "checkpoint.pt" and obj["step"] == 4:
            raise Crash  # best.pt of step 4 is written, checkpoint.pt of step 4 is not
        real_save(obj, path)

    monkeypatch.setattr(loop_module, "save_atomic", crash_at_the_last_checkpoint)
    victim = _trainer(synthetic_corpus, tmp_path / "victim", finished_short_run.options)
    with pytest.raises(Crash):
        victim.fit()
    victim.close()
    monkeypatch.setattr(loop_module, "save_atomic", real_save)
    assert read_checkpoint(tmp_path / "victim" / "checkpoint.pt")["step"] == 2
    resumed = _trainer(synthetic_corpus, tmp_path / "victim", finished_short_run.options, resume=True)
    resumed.fit()
    resumed.close()
    for name in ("best.pt", "checkpoint.pt"):
        assert same_parameters(reference / name, tmp_path / "victim" / name), name
    best = read_checkpoint(tmp_path / "victim" / "best.pt")
    final = read_checkpoint(tmp_path / "victim" / "checkpoint.pt")
    assert final["best_ppl"] == best["valid"]["ppl"] and final["best_step"] == best["step"] == 4
    assert len(events(tmp_path / "victim", "valid")) == 2 and len(events(tmp_path / "victim", "end")) == 1


def test_resume_repairs_a_best_pt_older_than_the_recorded_best(
    synthetic_corpus: Path, finished_short_run: ShortRun, tmp_path: Path
) -> None:
    # what runs of earlier versions could leave: checkpoint.pt says the best is step 4, best.pt is step 2
    run, old, options = tmp_path / "run", tmp_path / "one-epoch", finished_short_run.options
    shutil.copytree(finished_short_run.path, run)
    assert main(train_args(synthetic_corpus, old, *options, "--set", "train.epochs=1")) == 0
    shutil.copyfile(old / "best.pt", run / "best.pt")
    held = read_checkpoint(run / "best.pt")["valid"]["ppl"]
    assert read_checkpoint(run / "checkpoint.pt")["best_ppl"] < held
    assert main(train_args(synthetic_corpus, run, *options, "--resume")) == 0
    assert events(run, "end")[-1]["best_ppl"] == held  # the run now reports what best.pt holds
    assert read_checkpoint(run / "checkpoint.pt")["best_ppl"] == held


def test_repair_log_drops_a_torn_tail_and_the_lines_after_the_checkpoint(tmp_path: Path) -> None:
    log = tmp_path / "metrics.jsonl"
    lines = [{"event": "train", "step": s} for s in (1, 2, 3)] + [{"event": "end", "step": 3}]
    body = "".join(json.dumps(r) + "\n" for r in lines)
    log.write_text(body + '{"event": "train", "st')  # killed mid-append
    warnings = repair_log(log, 2)
    assert [json.loads(x)["step"] for x in log.read_text().splitlines()] == [1, 2]
    assert len(warnings) == 1 and "torn last line" in warnings[0]
    log.write_text(body + '{"event": "train", "st\n')  # torn, then the newline of a later write
    assert len(repair_log(log, 3)) == 1
    assert [json.loads(x) for x in log.read_text().splitlines()] == lines[:3]  # no "end": written again
    log.write_text('{"event": "train", "step": 1}\nnot json\n{"event": "train", "step": 2}\n')
    with pytest.raises(ValueError, match=r"metrics\.jsonl:2: not a JSON object line"):
        repair_log(log, 5)  # damage in the middle is not a crash's torn tail: say so, drop nothing
    assert log.read_text().count("\n") == 3


def test_resume_after_a_torn_log_and_of_a_finished_run_writes_each_line_once(
    synthetic_corpus: Path, finished_short_run: ShortRun, tmp_path: Path, capsys
) -> None:
    run, options = tmp_path / "run", finished_short_run.options
    shutil.copytree(finished_short_run.path, run)
    complete = (run / "metrics.jsonl").read_text()
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"event": "train", "step": 5, "lo')
    assert main(train_args(synthetic_corpus, run, *options, "--resume")) == 0  # a finished run, a torn tail
    assert "dropped a torn last line" in capsys.readouterr().err
    assert _without_times(run) == _without_times(complete)
    assert main(train_args(synthetic_corpus, run, *options, "--resume")) == 0
    assert _without_times(run) == _without_times(complete)
    assert len(events(run, "end")) == 1


def _without_times(log: Path | str) -> list[dict[str, Any]]:
    text = (log / "metrics.jsonl").read_text() if isinstance(log, Path) else log
    timed = ("tok_per_s", "elapsed_s")
    return [{k: v for k, v in json.loads(line).items() if k not in timed} for line in text.splitlines()]


def _full_disk_after(budget: int) -> Any:
    """A ``checkpoint._write`` that accepts ``budget`` bytes, then fails like a full disk."""
    written = {"n": 0}

    def write(handle: Any, data: Any) -> int:
        view = memoryview(data).cast("B")
        if written["n"] + len(view) > budget:
            handle.write(bytes(view[: budget - written["n"]]))
            written["n"] = budget
            raise OSError(errno.ENOSPC, "No space left on device")
        written["n"] += len(view)
        return int(handle.write(data))

    return write


def test_a_full_disk_while_checkpointing_keeps_the_old_one_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "checkpoint.pt"
    save_atomic({"config": {}, "model": {"w": torch.zeros(3)}, "step": 1}, path)
    before = path.read_bytes()
    monkeypatch.setattr(checkpoint_module, "_write", _full_disk_after(1000))
    with pytest.raises(CheckpointError, match=r"no space left on the device \(the previous checkpoint is kept"):
        save_atomic({"config": {}, "model": {"w": torch.ones(10_000)}, "step": 2}, path)
    assert path.read_bytes() == before and not (tmp_path / "checkpoint.pt.tmp").exists()


def test_train_reports_a_full_disk_in_one_line(
    synthetic_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    run = tmp_path / "run"
    real = checkpoint_module._write

    def write(handle: Any, data: Any) -> int:  # the disk fills up after the first checkpoint
        if handle.name.endswith("checkpoint.pt.tmp") and (run / "checkpoint.pt").exists():
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(handle, data)

    monkeypatch.setattr(checkpoint_module, "_write", write)
    assert main(train_args(synthetic_corpus, run, "--set", "train.max_steps_per_epoch=1")) == 1  # 2 epochs of 1 step
    err = capsys.readouterr().err
    assert "train: error: could not write" in err and "no space left on the device" in err
    assert "enforce fail" not in err and "Traceback" not in err
    assert read_checkpoint(run / "checkpoint.pt")["step"] == 1 and not list(run.glob("*.tmp"))


def test_a_replaced_corpus_is_refused_on_resume_and_before_the_test_evaluation(
    synthetic_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scg_summarize.commands.train import evaluate_test

    data, other, run = tmp_path / "data", synthetic_corpus, tmp_path / "run"
    make_synthetic_corpus(data, n_train=16, n_valid=4, n_test=4, seed=3)  # two steps of 8
    assert main(train_args(data, run, *TWO_STEPS, "--set", "train.epochs=1")) == 0
    evaluate_test(run, data, rouge=False)  # the same corpus: accepted
    assert main(train_args(other, run, *TWO_STEPS, "--set", "train.epochs=2", "--resume")) == 2  # another --data
    assert "not the one" in capsys.readouterr().err
    smaller = tmp_path / "smaller"  # another vocabulary size: said as another corpus, not as model.vocab_size
    make_synthetic_corpus(smaller, n_train=16, n_valid=4, n_test=4, seed=3, config=SyntheticConfig(content_words=150))
    assert main(train_args(smaller, run, *TWO_STEPS, "--set", "train.epochs=2", "--resume")) == 2
    err = capsys.readouterr().err
    assert "is not the one" in err and "model.vocab_size" not in err, err
    make_synthetic_corpus(data, n_train=16, n_valid=4, n_test=4, seed=5, overwrite=True)  # prepare --overwrite
    assert main(train_args(data, run, *TWO_STEPS, "--set", "train.epochs=2", "--resume")) == 2
    assert "refusing to resume on different data" in capsys.readouterr().err
    with pytest.raises(CorpusChangedError, match="refusing to evaluate the test split"):
        evaluate_test(run, data, rouge=False)
    assert math.isfinite(read_checkpoint(run / "checkpoint.pt")["best_ppl"])
