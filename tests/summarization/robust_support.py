"""Helpers for the fault and bad-input tests (issue 13): the CLI in a subprocess or a forked child,
waiting on a run's progress, and reading checkpoints."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from scg_summarize.cli import main

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


def fork_cli(*args: str | Path, stdout: int, stderr: int) -> int:
    """``scg-summarize ARGS`` in a forked child of this process, writing to the file descriptors
    ``stdout`` and ``stderr``; returns the child's pid (wait with :func:`wait_child`).

    A real process (its own exit status, file descriptors, pipes and signal dispositions) that
    inherits this process's imports: a fresh ``python -m scg_summarize.cli`` pays ~3.5 s of CPU to
    import torch and ~2.7 s more for ``torch._dynamo`` (which torch's optimizers import) before it
    does anything. The child ends the way the interpreter would after ``sys.exit(main(...))``: it
    joins the threads that are not daemons (a leftover one hangs it, and the caller's timeout
    fails the test), flushes stdout and stderr (an error there prints its traceback and exits 120,
    as Python does), then leaves with ``os._exit`` so that nothing of pytest runs in it."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:  # the child: from here on, never back into pytest
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # as a new process has them: the caller's pipe ends closed
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
        sys.stderr = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8", errors="backslashreplace"
        )
        torch.set_num_threads(1)  # as OMP_NUM_THREADS=1 in cli(); no OpenMP pool is used across the fork
        try:
            code = main([str(a) for a in args])
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # what Python prints when its exit-time flush fails
                print(f"Exception ignored in: {stream!r}", file=sys.__stderr__)
                traceback.print_exc(file=sys.__stderr__)
                code = 120
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(code)


def wait_child(pid: int, timeout: float) -> int:
    """The exit status of the forked child ``pid`` as ``subprocess`` reports it (``-N`` for signal
    N); a child still running after ``timeout`` seconds is killed and fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"the forked child {pid} did not exit within {timeout} s")
        time.sleep(0.02)


def forked_cli(*args: str | Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """:func:`cli` in a forked child (see :func:`fork_cli`): exit status and output of a real
    process, without its imports."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        code = wait_child(fork_cli(*args, stdout=out.fileno(), stderr=err.fileno()), timeout)
        texts = []
        for handle in (out, err):
            handle.seek(0)
            texts.append(handle.read().decode("utf-8", "replace"))
    return subprocess.CompletedProcess(list(map(str, args)), code, texts[0], texts[1])


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
