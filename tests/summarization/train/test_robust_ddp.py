"""DDP equivalence (issue 13, fault 8): one SGD step of 2 gloo ranks on a global batch equals one
process on the same batch within rounding, for every ``train.normalize`` mode; the check
catches the old per-rank token normalization."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from scg_summarize.train import Trainer, load_config

from ..robust_support import STEP_OVERRIDES

WORKER = Path(__file__).resolve().parents[1] / "ddp_step_worker.py"


def _max_abs(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)


# two gloo ranks under torchrun, end to end; the same averaging in process (default suite):
# test_math_objectives.py::test_two_ranks_on_half_batches_equal_one_process_on_the_batch (both normalize modes)
@pytest.mark.slow
def test_two_gloo_ranks_equal_one_process_for_every_normalize_mode(
    synthetic_corpus: Path, tmp_path: Path, torchrun_env: dict[str, str]
) -> None:
    modes = ("batch", "tokens")
    single: dict[str, dict[str, torch.Tensor]] = {}
    initial: dict[str, torch.Tensor] = {}
    batch_file = tmp_path / "batch.pt"
    for mode in modes:
        config = load_config("tiny-STANDARD", [*STEP_OVERRIDES, f"train.normalize='{mode}'"])
        trainer = Trainer(config, synthetic_corpus, tmp_path / f"single-{mode}", quiet=True, log=lambda line: None)
        if not batch_file.exists():
            batch = next(iter(trainer.loader))
            lengths = batch.tgt_mask[:, 1:].sum(1)
            assert lengths[0::2].sum() != lengths[1::2].sum()  # the ranks' token counts differ
            torch.save(batch, batch_file)
            initial = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        trainer.train_step(torch.load(batch_file, weights_only=False))
        single[mode] = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        trainer.close()
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(WORKER),
        str(synthetic_corpus),
        str(batch_file),
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=torchrun_env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # rounding level: float32 sums in another order, a few ulps of the largest parameter
    tol = 8 * torch.finfo(torch.float32).eps * max(float(v.abs().max()) for v in initial.values())
    for mode in modes:
        moved = _max_abs(single[mode], initial)
        exact = _max_abs(torch.load(tmp_path / f"{mode}-exact.pt"), single[mode])
        assert moved > 1000 * tol and exact <= tol, (mode, moved, exact, tol)
    per_rank = _max_abs(torch.load(tmp_path / "tokens-per-rank.pt"), single["tokens"])
    assert per_rank > 10 * tol, (per_rank, tol)  # dividing by each rank's own count is caught
