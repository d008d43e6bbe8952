"""A run killed with SIGKILL mid-epoch and resumed ends with bitwise the same parameters."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from scg_summarize.models.loading import read_checkpoint

from ..conftest import ShortRun
from ..robust_support import SHORT, TINY

# C2F with +MULTI2 and +ALTERNATE: sampling, the EMA baseline, dropout and the coin all matter
SETTINGS = [
    "--set",
    "train.max_steps_per_epoch=8",
    "--set",
    "train.epochs=2",
    "--set",
    "train.checkpoint_every=1",
    "--set",
    "train.alternate=0.5",
    "--set",
    "train.log_every=1",
]


def _train(data: Path, out: Path, *extra: str) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "scg_summarize.cli",
        "train",
        "--config",
        "tiny-C2F+MULTI2",
        "--data",
        str(data),
        "--out",
        str(out),
        "--quiet",
        "--no-test",
        *SETTINGS,
        *extra,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)


def _finish(proc: subprocess.Popen) -> None:
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out.decode()


def _step(path: Path) -> int:
    try:
        return int(read_checkpoint(path)["step"])
    except (FileNotFoundError, EOFError, RuntimeError, ValueError):
        return -1


# end to end in subprocesses; the same logic in process (default suite):
# test_a_crash_after_a_periodic_checkpoint_then_resume_in_process_is_bitwise_identical
@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_is_bitwise_identical(synthetic_corpus: Path, tmp_path: Path) -> None:
    reference = _train(synthetic_corpus, tmp_path / "reference")
    victim = _train(synthetic_corpus, tmp_path / "victim", "--set", "train.throttle_s=0.25")
    deadline = time.time() + 180
    while _step(tmp_path / "victim" / "checkpoint.pt") < 4:  # steps 1-8 are epoch 1
        assert victim.poll() is None, "the run finished before it could be killed"
        assert time.time() < deadline
        time.sleep(0.05)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    killed_at = _step(tmp_path / "victim" / "checkpoint.pt")
    assert killed_at % 8 != 0, killed_at  # mid-epoch (epochs are 8 steps)
    _finish(reference)
    _finish(_train(synthetic_corpus, tmp_path / "victim", "--resume"))

    ref = read_checkpoint(tmp_path / "reference" / "checkpoint.pt")
    got = read_checkpoint(tmp_path / "victim" / "checkpoint.pt")
    assert ref["step"] == got["step"] == 16
    for name, value in ref["model"].items():
        assert torch.equal(value, got["model"][name]), name
    assert ref["baseline"]["keys"] == got["baseline"]["keys"]
    assert torch.equal(ref["baseline"]["values"], got["baseline"]["values"])
    # the metrics log has no duplicated steps after the resume
    import json

    steps = [
        json.loads(line)["step"]
        for line in (tmp_path / "victim" / "metrics.jsonl").read_text().splitlines()
        if json.loads(line)["event"] == "train"
    ]
    assert steps == sorted(set(steps)) and steps[-1] == 16


#: the in-process test's runs: epochs of 2 steps (the logic is the same, the runs a quarter as long)
SHORT_EPOCHS = ["--set", "train.max_steps_per_epoch=2"]


class _Crash(BaseException):
    """Stands for SIGKILL: nothing of the trainer runs after it (not even an ``except Exception``)."""


def test_a_crash_after_a_periodic_checkpoint_then_resume_in_process_is_bitwise_identical(
    synthetic_corpus: Path, finished_short_run: ShortRun, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """The reference is the session's uninterrupted run of the same options without periodic
    checkpoints (``finished_short_run``): writing them must not change the run either."""
    import json

    from scg_summarize.cli import main
    from scg_summarize.train.loop import Trainer

    # the reference's options are this test's but train.checkpoint_every
    assert TINY == "tiny-C2F+MULTI2" and finished_short_run.options == tuple(SHORT_EPOCHS)
    assert [kv for kv in SETTINGS[1::2] if kv != "train.checkpoint_every=1"] == SHORT[1::2]

    def args(out: Path, *extra: str) -> list[str]:
        return [
            "train",
            "--config",
            "tiny-C2F+MULTI2",
            "--data",
            str(synthetic_corpus),
            "--out",
            str(out),
            "--quiet",
            "--no-test",
            *SETTINGS,
            *SHORT_EPOCHS,
            *extra,
        ]

    real_step = Trainer.train_step

    def crash_in_step_4(self, batch):  # type: ignore[no-untyped-def]
        if self.counters.step == 3:  # the periodic checkpoint of step 3 is written; step 4 dies half-way
            raise _Crash
        return real_step(self, batch)

    monkeypatch.setattr(Trainer, "train_step", crash_in_step_4)
    with pytest.raises(_Crash):
        main(args(tmp_path / "victim"))
    killed_at = _step(tmp_path / "victim" / "checkpoint.pt")
    assert killed_at == 3 and killed_at % 2 != 0  # mid-epoch (epochs are 2 steps)
    monkeypatch.setattr(Trainer, "train_step", real_step)
    (tmp_path / "victim" / ".lock").unlink(missing_ok=True)  # whatever a crash left (a lock held by this pid)
    assert main(args(tmp_path / "victim", "--resume")) == 0

    ref = read_checkpoint(finished_short_run.path / "checkpoint.pt")
    got = read_checkpoint(tmp_path / "victim" / "checkpoint.pt")
    assert ref["step"] == got["step"] == 4
    for name, value in ref["model"].items():
        assert torch.equal(value, got["model"][name]), name
    assert ref["baseline"]["keys"] == got["baseline"]["keys"]
    assert torch.equal(ref["baseline"]["values"], got["baseline"]["values"])
    steps = [
        json.loads(line)["step"]
        for line in (tmp_path / "victim" / "metrics.jsonl").read_text().splitlines()
        if json.loads(line)["event"] == "train"
    ]
    assert steps == sorted(set(steps)) and steps[-1] == 4


def _lines(run: Path) -> list[dict[str, object]]:
    import json

    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("stop", [13, 8])  # inside the second epoch of 8 steps; at the end of the first
def test_a_run_extended_on_resume_trains_as_the_longer_run(synthetic_corpus: Path, tmp_path: Path, stop: int) -> None:
    """``train.max_steps=K``, then ``--resume`` with a larger budget, gives the uninterrupted run's
    parameters and log: the final validation inside an epoch no longer steps the lr schedule (it
    halved the lr one epoch early), an epoch ended by the budget is not validated again on resume
    (twice at step 8 before), and the first ``train`` line after the resume averages the steps
    before the stop too (its window is in the checkpoint). The only difference is the final
    validation's own line, inside an epoch."""
    from scg_summarize.cli import main

    def args(out: Path, steps: int, *extra: str) -> list[str]:
        budget = {"max_steps_per_epoch": 8, "epochs": 3, "log_every": 3, "decay_patience": 0, "max_steps": steps}
        sets = [a for key, value in budget.items() for a in ("--set", f"train.{key}={value}")]
        command = f"train --config tiny-STANDARD --data {synthetic_corpus} --out {out} --quiet --no-test"
        return [*command.split(), *sets, *extra]

    assert main(args(tmp_path / "whole", 24)) == 0
    assert main(args(tmp_path / "split", stop)) == 0
    assert main(args(tmp_path / "split", 24, "--resume")) == 0
    whole, split = _lines(tmp_path / "whole"), _lines(tmp_path / "split")
    final = [r for r in split if r["event"] == "valid" and r["step"] == stop and stop % 8]  # (inside an epoch)
    # (the final validation may also be the best so far: then best.pt, and the end line's best, differ)
    best = {"best_ppl", "best_step"} if final else set()
    strip = [[{k: v for k, v in r.items() if k not in best} for r in log if r not in final] for log in (split, whole)]
    assert _same_but_seconds(*strip)
    a = read_checkpoint(tmp_path / "whole" / "checkpoint.pt")["model"]
    b = read_checkpoint(tmp_path / "split" / "checkpoint.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    lrs = [r["lr"] for r in whole if r["event"] == "valid"]
    assert len(set(lrs)) > 1  # (the schedule does decay in this run: the check can fail)


def _same_but_seconds(a: list[dict[str, object]], b: list[dict[str, object]]) -> bool:
    """The logs equal but for the wall-clock fields."""
    clock = {"tok_per_s", "elapsed_s", "seconds", "time_s"}
    strip = [[{k: v for k, v in r.items() if k not in clock} for r in log] for log in (a, b)]
    return strip[0] == strip[1]


def test_resuming_a_finished_run_trains_nothing_and_keeps_its_rouge_results(
    synthetic_corpus: Path, tmp_path: Path
) -> None:
    """A run stopped by its time budget trained one more step at every ``--resume``; a run
    evaluated with ``--rouge`` lost its ROUGE ``results.json`` to a perplexity-only one."""
    import json

    from scg_summarize.cli import main

    base = ["train", "--config", "tiny-STANDARD", "--data", str(synthetic_corpus), "--quiet"]
    run = tmp_path / "budget"
    assert main([*base, "--out", str(run), "--no-test", "--set", "train.time_budget_s=0.05"]) == 0
    steps = json.loads((run / "training.json").read_text())["steps"]
    for _ in range(2):
        assert main(["train", "--out", str(run), "--resume", "--quiet", "--no-test"]) == 0
        assert json.loads((run / "training.json").read_text())["steps"] == steps
    run = tmp_path / "rouge"
    assert main([*base, "--out", str(run), "--rouge", "--set", "train.max_steps=2", "--set", "eval.max_len=5"]) == 0
    before = json.loads((run / "results.json").read_text())
    assert "rouge1" in before["metrics"]
    assert main(["train", "--out", str(run), "--resume", "--quiet"]) == 0
    assert json.loads((run / "results.json").read_text())["metrics"] == before["metrics"]


def test_a_stop_signal_in_the_last_step_keeps_the_final_validation(
    synthetic_corpus: Path, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A SIGINT/SIGTERM during step ``max_steps`` stopped the run before its final validation,
    and ``--resume`` took the run for finished: no ``valid`` line, no ``best.pt``."""
    from scg_summarize.cli import main
    from scg_summarize.train.loop import Trainer
    from scg_summarize.train.signals import TrainingStopped

    def stop_at_the_last_step(self) -> bool:  # type: ignore[no-untyped-def]
        return self.counters.step == 5

    monkeypatch.setattr(Trainer, "_stop_requested", stop_at_the_last_step)
    run = tmp_path / "run"
    args = ["train", "--config", "tiny-STANDARD", "--data", str(synthetic_corpus), "--out", str(run), "--quiet"]
    try:
        main([*args, "--no-test", "--set", "train.max_steps=5"])
    except TrainingStopped:
        pass
    monkeypatch.undo()
    (run / ".lock").unlink(missing_ok=True)
    assert main(["train", "--out", str(run), "--resume", "--quiet", "--no-test"]) == 0
    assert [(r["event"], r["step"]) for r in _lines(run) if r["event"] != "train"] == [("valid", 5), ("end", 5)]
    assert (run / "best.pt").is_file()
