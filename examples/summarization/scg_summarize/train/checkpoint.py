"""Checkpoints: written atomically, holding everything needed to continue a run bit for bit.

A training checkpoint is a dict with the model, optimizer, lr schedule, baseline and data
loader states, the step/epoch counters, and the random number generator states (Python,
NumPy, torch CPU and CUDA). :func:`save_atomic` writes it to ``PATH.tmp``, flushes it to disk
and renames it over ``PATH`` (``os.replace`` is atomic on POSIX), so a run killed at any moment
leaves either the previous checkpoint or the new one, never a torn file.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["get_rng_state", "load_checkpoint", "save_atomic", "set_rng_state"]


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


def save_atomic(obj: Any, path: str | Path) -> None:
    """``torch.save(obj, path)`` through a temporary file and an atomic rename."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_atomic`."""
    obj: dict[str, Any] = torch.load(path, map_location=map_location, weights_only=False)
    return obj
