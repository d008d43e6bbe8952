"""The run directory of ``scg-summarize train`` (the same for every model family).

=================  ====================================================================
``checkpoint.pt``  the resumable state (`.checkpoint`), at epoch ends and every
                   ``train.checkpoint_every`` steps
``best.pt``        the configuration and model of the best validation score so far
``config.json``    the run configuration (rewritten on ``--resume``)
``data.json``      where the corpus is, its preprocessing options and fingerprint: what
                   ``evaluate`` / ``summarize --run RUN_DIR`` need without ``--data``
``vocab.txt``      a copy of the corpus vocabulary (the run stays usable for summarizing new
                   text when the corpus is moved or deleted)
``metrics.jsonl``  the metrics log (`.metrics_log`)
=================  ====================================================================

:func:`start_run_dir` writes the files of a new run; :func:`check_best` makes a resumed run's
best score agree with the ``best.pt`` on disk.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from ..data.storage import VOCAB_FILE, read_meta
from ..models.loading import read_checkpoint
from .checkpoint import save_atomic
from .config import Config
from .fingerprint import corpus_fingerprint
from .selection import selection_value

__all__ = [
    "BEST",
    "CHECKPOINT",
    "METRICS",
    "BestModel",
    "check_best",
    "remove_torn_files",
    "save_best",
    "start_run_dir",
    "write_config",
]

CHECKPOINT = "checkpoint.pt"
BEST = "best.pt"
METRICS = "metrics.jsonl"


@dataclass(kw_only=True, slots=True)
class BestModel:
    """Which step's model ``best.pt`` holds and its selection score (`selection_value`: lower is better)."""

    step: int
    score: float


def remove_torn_files(out_dir: Path) -> None:
    """Delete the temporary files left by a process killed while writing (`.checkpoint.save_atomic`)."""
    for name in (CHECKPOINT, BEST, METRICS):
        (out_dir / f"{name}.tmp").unlink(missing_ok=True)


def write_config(out_dir: Path, config: Config) -> None:
    """``config.json``: the run configuration."""
    (out_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")


def start_run_dir(out_dir: Path, config: Config, data_dir: Path, splits: list[str]) -> None:
    """The files of a new run: an empty metrics log, ``config.json``, ``data.json`` and ``vocab.txt``."""
    (out_dir / METRICS).write_text("")
    write_config(out_dir, config)
    record = {
        "data_dir": str(data_dir.resolve()),
        "prep_options": read_meta(data_dir)["options"],
        "fingerprint": corpus_fingerprint(data_dir, splits),
    }
    (out_dir / "data.json").write_text(json.dumps(record, indent=2) + "\n")
    shutil.copyfile(data_dir / VOCAB_FILE, out_dir / VOCAB_FILE)


def check_best(
    out_dir: Path, metric: str, recorded: BestModel, step: int, info: Callable[[str], None]
) -> BestModel | None:
    """The best model a run resumed at ``step`` really has (``recorded``: what its checkpoint says;
    None: ``best.pt`` is missing, the next improving epoch writes it).

    ``best.pt`` is written before ``checkpoint.pt`` at an improving epoch end, so after a crash
    between the two ``best.pt`` is at most *newer* than the checkpoint (the resumed run redoes
    that epoch and rewrites it identically): ``recorded`` stands. A ``best.pt`` *older* than the
    checkpoint's best (runs of earlier versions, which wrote the checkpoint first) cannot be
    repaired: the best is then the model ``best.pt`` really holds, and the user is told (``info``).
    """
    if not math.isfinite(recorded.score):
        return recorded
    path = out_dir / BEST
    if not path.is_file():
        info(
            f"resume: {path} is missing although the run recorded a best validation {metric} "
            f"{abs(recorded.score):.3f}; the next improving epoch writes it"
        )
        return None
    best = read_checkpoint(path, map_location="cpu")
    valid = best.get("valid", {})
    held = BestModel(
        step=int(best.get("step", -1)), score=selection_value(valid, metric) if metric in valid else math.inf
    )
    if held.step > step or held.score == recorded.score:
        return recorded  # (newer: written just before a crash; the resumed run redoes that epoch and rewrites it)
    lost = f"step {recorded.step}" if recorded.step >= 0 else "an earlier step"
    info(
        f"resume: {path} holds the model of step {held.step} (validation {metric} {abs(held.score):.3f}), "
        f"not the best of {lost} ({metric} {abs(recorded.score):.3f}), which was lost before it was "
        f"written; the run now reports the best that best.pt holds"
    )
    return held


def save_best(
    out_dir: Path, config: Config, model: nn.Module, vocab: str, *, step: int, epoch: int, metrics: dict[str, Any]
) -> None:
    """Write ``out_dir/best.pt``: the configuration, the weights, the vocabulary's `Vocab.digest`,
    and the step, epoch and validation metrics that selected them (`check_best` reads them back on
    resume)."""
    save_atomic(
        {
            "config": config.to_dict(),
            "model": model.state_dict(),
            "vocab": vocab,
            "step": step,
            "epoch": epoch,
            "valid": metrics,
        },
        out_dir / BEST,
    )
