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
