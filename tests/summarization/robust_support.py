"""Helpers for the fault and bad-input tests (issue 13): the CLI in a subprocess, waiting on a
run's progress, and reading checkpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

#: a short C2F run: sampling, the EMA baseline, dropout and the +ALTERNATE coin all matter
TINY = "tiny-C2F+MULTI2"
SHORT = [
    "--set",
    "train.max_steps_per_epoch=8",
    "--set",
    "train.epochs=2",
    "--set",
    "train.alternate=0.5",
    "--set",
    "train.log_every=1",
]
#: one deterministic SGD step of a soft model (no dropout, no clipping): DDP must equal one process
STEP_OVERRIDES = [
    "model.dropout=0.0",
    "train.optimizer='sgd'",
    "train.lr=1.0",
    "train.max_grad_norm=0.0",
    "train.batch_size=8",
    "train.device='cpu'",
]


def cli(*args: str | Path, stdin: bytes | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``python -m scg_summarize.cli ARGS`` to completion (text output)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "scg_summarize.cli", *map(str, args)],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        env=env,
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    )


def start(*args: str | Path, out_file: Path | None = None) -> subprocess.Popen[bytes]:
    """Start ``python -m scg_summarize.cli ARGS`` (output to ``out_file``, else a pipe)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    sink: Any = subprocess.PIPE if out_file is None else out_file.open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "scg_summarize.cli", *map(str, args)], stdout=sink, stderr=subprocess.STDOUT, env=env
    )


def train_args(data: Path, out: Path, *extra: str, config: str = TINY) -> list[str]:
    return ["train", "--config", config, "--data", str(data), "--out", str(out), "--quiet", "--no-test", *SHORT, *extra]


def train_lines(run: Path) -> int:
    """How many complete ``train`` lines the run's metrics log has."""
    try:
        text = (run / "metrics.jsonl").read_text()
    except FileNotFoundError:
        return 0
    return sum(1 for line in text.splitlines() if line.endswith("}") and '"event": "train"' in line)


def wait_for(condition: Any, proc: subprocess.Popen[bytes] | None = None, timeout: float = 180) -> None:
    """Poll ``condition()`` until true (failing if ``proc`` ends first or time runs out)."""
    deadline = time.time() + timeout
    while not condition():
        assert proc is None or proc.poll() is None, "the process ended before the condition held"
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def same_parameters(a: Path, b: Path) -> bool:
    """Whether two checkpoints hold bitwise identical model parameters."""
    sa = torch.load(a, map_location="cpu", weights_only=False)["model"]
    sb = torch.load(b, map_location="cpu", weights_only=False)["model"]
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def events(run: Path, event: str) -> list[dict[str, Any]]:
    """The metrics log's lines of one event."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == event]
