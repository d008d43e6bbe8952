"""Checkpoints: written atomically, holding everything needed to continue a run bit for bit.

A training checkpoint is a dict with the model, optimizer, lr schedule, baseline and data
loader states, the step/epoch counters, and the random number generator states (Python,
NumPy, torch CPU and CUDA): :meth:`TrainingParts.checkpoint` writes it and
:meth:`TrainingParts.restore` reads it back (:data:`RESUME_KEYS` are required to resume).
:func:`save_atomic` writes it to ``PATH.tmp``, flushes it to disk and renames it over ``PATH``
(``os.replace`` is atomic on POSIX), so a run killed at any moment leaves either the previous
checkpoint or the new one, never a torn file. The +ALTERNATE coin of step s is drawn from a
generator seeded by (seed, s), so it needs no state. A resumed run reaches bitwise the same
parameters as an uninterrupted one (``tests/summarization/train/test_train_resume.py`` kills a
run with SIGKILL to check).
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch
from torch import nn

import scg

from ..data import SummaryLoader
from ..models.loading import CheckpointError
from .config import Config
from .metrics_log import LogWindow
from .optim import PlateauDecay
from .run_state import RunCounters

__all__ = [
    "RESUME_KEYS",
    "TrainingParts",
    "get_rng_state",
    "param_digest",
    "save_atomic",
    "seed_all",
    "set_rng_state",
    "write_param_digest",
]

#: what a checkpoint needs for --resume (best.pt holds only the config and model)
RESUME_KEYS = ("config", "model", "optimizer", "schedule", "baseline", "loader", "rng", "step", "best_ppl")


def seed_all(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators with ``seed``."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def get_rng_state() -> dict[str, Any]:
    """The states of every generator the training loop draws from."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore :func:`get_rng_state`'s output."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@dataclass(kw_only=True, slots=True)
class TrainingParts:
    """The stateful parts of a run (the trainer's own objects) that ``checkpoint.pt`` saves and
    ``--resume`` restores, one checkpoint key each."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    schedule: PlateauDecay
    baseline: scg.baselines.EMA
    loader: SummaryLoader
    window: LogWindow  #: the training steps since the last ``train`` line of the metrics log
    vocab: str  #: the corpus vocabulary's `Vocab.digest`, recorded beside the weights

    def checkpoint(self, config: Config, counters: RunCounters) -> dict[str, Any]:
        """The checkpoint of the run now (with every RNG state and the `RunCounters`)."""
        return {
            "config": config.to_dict(),
            "model": self.model.state_dict(),
            "vocab": self.vocab,
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "baseline": self.baseline.state_dict(),
            "loader": self.loader.state_dict(),
            "log_window": self.window.state_dict(),
            "rng": get_rng_state(),
            **counters.to_dict(),
        }

    def restore(self, state: dict[str, Any], *, rank: int, seed: int) -> RunCounters:
        """Load ``state`` (a checked checkpoint: the model is already loaded) into the optimizer,
        schedule, baseline, loader and RNGs; returns its counters. Rank 0 restores its RNG
        streams; other ranks reseed their own (DDP runs resume exactly on rank 0 only)."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        self.baseline.load_state_dict(state["baseline"])
        self.loader.load_state_dict(state["loader"])
        if "log_window" in state:  # (a checkpoint written at an epoch's end may hold an empty one)
            self.window.load_state_dict(state["log_window"])
        counters = RunCounters.from_checkpoint(state)
        if rank == 0:
            set_rng_state(state["rng"])
        else:
            torch.manual_seed(seed + 1000 * rank + counters.step)
        return counters


class _Sink:
    """The file object ``torch.save`` writes to: it keeps the first ``OSError`` of the underlying
    file (``ENOSPC`` on a full disk), which torch otherwise reports as ``enforce fail ...
    unexpected pos``."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return _write(self.handle, data)
        except OSError as err:
            if self.error is None:
                self.error = err
            raise

    def flush(self) -> None:
        self.handle.flush()


def _write(handle: BinaryIO, data: Any) -> int:
    """One write to a checkpoint file (a seam for the full-disk test)."""
    return handle.write(data)


def save_atomic(obj: Any, path: str | Path) -> None:
    """``torch.save(obj, path)`` through a temporary file and an atomic rename.

    When writing fails (a full disk, a quota, an I/O error) the temporary file is removed, the
    previous ``path`` is left untouched, and :class:`CheckpointError` names the file and the
    reason.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            sink = _Sink(f)
            try:
                torch.save(obj, sink)  # type: ignore[arg-type]
                f.flush()
                os.fsync(f.fileno())
            except (OSError, RuntimeError) as err:
                cause: BaseException = sink.error or err
                raise CheckpointError(_write_failure(path, cause)) from cause
    except OSError as err:  # opening (or closing) the temporary file failed
        tmp.unlink(missing_ok=True)
        raise CheckpointError(_write_failure(path, err)) from err
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    try:  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_failure(path: Path, err: BaseException) -> str:
    reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err).splitlines()[0]
    if isinstance(err, OSError) and err.errno == errno.ENOSPC:
        reason = "no space left on the device"
    kept = "the previous checkpoint is kept" if path.exists() else "no previous checkpoint"
    return f"could not write {path}: {reason} ({kept}; the partial file was removed)"


def param_digest(model: torch.nn.Module) -> str:
    """A SHA-256 of all parameters' bytes (identical parameters ⇔ identical digest)."""
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def write_param_digest(out_dir: Path, rank: int, model: torch.nn.Module) -> None:
    """``out_dir/digest-rank{rank}.txt``: the rank's `param_digest` (DDP ranks must agree)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"digest-rank{rank}.txt").write_text(param_digest(model) + "\n")
