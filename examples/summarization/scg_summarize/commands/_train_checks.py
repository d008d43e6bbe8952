"""Checks ``scg-summarize train`` makes before any work, so that nothing is lost or asked twice.

* :func:`check_run_folder`: a new run (no ``--resume``) never goes silently into a folder that
  holds one: it would replace ``config.json`` and empty ``metrics.jsonl``. ``--overwrite``
  starts over explicitly (the old run's checkpoints, metrics and evaluations are removed first,
  so none of them can be mistaken for the new run's).
* :func:`resume_settings`: ``--resume`` needs only ``--out``: the configuration comes from the
  run's ``config.json`` (with ``--set`` overrides on top, e.g. more epochs) and the corpus from
  its ``data.json``.
* :func:`missing_test_split`: a corpus without the test split is noticed before training; the
  final test evaluation is then skipped with a note instead of failing after training.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..data.dataset import available_splits
from ..data.storage import META_FILE, VOCAB_FILE
from ..jsonlines import json_object
from ..train.config_loading import parse_override

__all__ = ["RUN_FILES", "check_run_folder", "missing_test_split", "resume_settings"]

#: The files a run writes into its folder: a new run refuses a folder holding any of them
#: (without ``--overwrite``), whether a run or the user's own files of those names.
RUN_FILES: tuple[str, ...] = (
    "config.json",
    "checkpoint.pt",
    "best.pt",
    "metrics.jsonl",
    "data.json",
    "vocab.txt",
    "training.json",
    "results.json",
)
#: Removed by ``--overwrite`` before the new run starts.
_STALE = RUN_FILES


def check_run_folder(out: Path, *, resume: bool, overwrite: bool) -> None:
    """Refuse a new run in a folder that holds one (``FileExistsError`` with the way out);
    with ``overwrite``, remove the old run's files first. Under ``torchrun`` only rank 0 checks
    (the others would see the files rank 0 has just written)."""
    if os.environ.get("RANK", "0") != "0":
        return
    if resume:
        if overwrite:
            raise ValueError("--resume continues a run and --overwrite starts it again: give one of them")
        return
    if (out / META_FILE).is_file():  # (--overwrite restarts a run; it does not replace a corpus)
        raise FileExistsError(
            f"{out}: is a prepared corpus ({META_FILE}); a run there would replace its {VOCAB_FILE}. "
            "Choose another --out"
        )
    found = [name for name in RUN_FILES if (out / name).exists()]
    if not found:
        return
    if not overwrite:
        what = "a run" if (out / "config.json").is_file() else "files a run writes"
        raise FileExistsError(
            f"{out}: already holds {what} ({', '.join(found)}); pass --resume to continue a run, --overwrite "
            "to start it again from scratch (its checkpoints, metrics and evaluations are deleted, and these "
            "files replaced), or choose another --out"
        )
    for name in _STALE:
        (out / name).unlink(missing_ok=True)
    for pattern in ("*.summaries.jsonl", "digest-rank*.txt"):
        for path in out.glob(pattern):
            path.unlink()
    if (out / "eval").is_dir():
        shutil.rmtree(out / "eval")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json_object(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"--resume: {path}: no such file (is {path.parent} a run folder?)") from None
    except ValueError as err:
        raise ValueError(f"--resume: {err}") from None


def resume_settings(out: Path, overrides: Sequence[str] = ()) -> tuple[dict[str, Any], Path | None]:
    """The configuration dict recorded in ``out/config.json`` with ``overrides``
    (``TABLE.KEY=VALUE``) applied, and the corpus recorded in ``out/data.json`` (None if absent)."""
    saved = _read_json(out / "config.json")
    for text in overrides:
        keys, value = parse_override(text)
        if len(keys) != 2 or not isinstance(saved.get(keys[0], {}), dict):
            raise ValueError(f"--set expects TABLE.KEY=VALUE with one dot, got {text!r}")
        saved.setdefault(keys[0], {})[keys[1]] = value
    data = None
    if (out / "data.json").is_file():
        recorded = _read_json(out / "data.json").get("data_dir")
        data = Path(str(recorded)) if recorded else None
    return saved, data


def missing_test_split(data: Path, split: str) -> str | None:
    """A note when the corpus ``data`` has no ``split`` (None when it has it)."""
    have = available_splits(data)
    if split in have:
        return None
    return (
        f"{data} has no split {split!r} (available: {', '.join(have) or 'none'}): the final test evaluation "
        "is skipped (evaluate another split later with scg-summarize evaluate --split NAME)"
    )
