"""Data parallelism: torchrun with 2 CPU processes (gloo) keeps the ranks' parameters identical."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from scg_summarize.models.loading import read_checkpoint


# torchrun end to end; the ranks' gradient averaging is checked in process (default suite) by
# test_math_objectives.py::test_two_ranks_on_half_batches_equal_one_process_on_the_batch
@pytest.mark.slow
@pytest.mark.parametrize("config", ["tiny-C2F+MULTI2"])
def test_torchrun_two_processes_agree(
    synthetic_corpus: Path, tmp_path: Path, config: str, torchrun_env: dict[str, str]
) -> None:
    out = tmp_path / "ddp"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "scg_summarize.cli",
        "train",
        "--config",
        config,
        "--data",
        str(synthetic_corpus),
        "--out",
        str(out),
        "--quiet",
        "--no-test",
        "--set",
        "train.epochs=1",
        "--set",
        "train.max_steps_per_epoch=4",
        "--set",
        "train.device='cpu'",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=torchrun_env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    digests = [(out / f"digest-rank{r}.txt").read_text() for r in (0, 1)]
    assert digests[0] == digests[1]
    state = read_checkpoint(out / "checkpoint.pt")
    assert state["step"] == 4
    # the ranks trained (parameters moved away from the shared initialization)
    from scg_summarize.train import build_model, load_config

    torch.manual_seed(1)
    fresh = build_model(
        load_config(config), state["config"]["model"]["vocab_size"], state["config"]["model"]["num_chunks"]
    )
    moved = [not torch.equal(fresh.state_dict()[k], v) for k, v in state["model"].items()]
    assert sum(moved) > len(moved) // 2
