"""Checkpoints: written atomically, holding everything needed to continue a run bit for bit.

A training checkpoint is a dict with the model, optimizer, lr schedule, baseline and data
loader states, the step/epoch counters, and the random number generator states (Python,
NumPy, torch CPU and CUDA). :func:`save_atomic` writes it to ``PATH.tmp``, flushes it to disk
and renames it over ``PATH`` (``os.replace`` is atomic on POSIX), so a run killed at any moment
leaves either the previous checkpoint or the new one, never a torn file.
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from ..models.loading import CheckpointError

__all__ = ["get_rng_state", "param_digest", "save_atomic", "set_rng_state"]


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
