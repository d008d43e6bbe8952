"""Starting a run directory, or continuing it with ``--resume`` (:func:`open_run`): what
``--resume`` accepts (the saved configuration, a checkpoint that fits the model), and restoring
the run from its ``checkpoint.pt`` (:func:`resume_run`).

Exact resumption continues the configuration saved in the checkpoint. :func:`check_resume_config`
compares it with the one given on the command line: options that change what is computed
(the model, the data, the objective, the optimizer) must not differ, and are refused by name
(``train.lr: saved 0.01, given 0.1``), since applying them silently would make the saved
configuration lie and ignoring them would make the command line lie. Options that only say how
long, where or how verbosely to run (:data:`RESUMABLE`) are applied, and the change is reported.
(That a checkpoint fits the model is checked by ``models.loading.check_same_model``.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..models.loading import check_same_model, read_checkpoint
from .checkpoint import RESUME_KEYS, TrainingParts, save_atomic
from .config import Config, EvalConfig
from .metrics_log import repair_log
from .run_dir import CHECKPOINT, METRICS, BestModel, check_best, remove_torn_files, start_run_dir, write_config
from .run_state import RunCounters

__all__ = ["RESUMABLE", "check_resume_config", "open_run", "resume_run"]

#: options a resumed run may change: they do not change what a step computes (``train.threads``
#: and ``train.device`` change the order of floating-point sums inside torch's kernels, so the
#: last bits of the parameters: a run resumed on other threads or another device is not
#: bit-identical to one that was not interrupted)
RESUMABLE: frozenset[str] = frozenset(
    {
        "train.epochs",
        "train.max_steps",
        "train.time_budget_s",
        "train.log_every",
        "train.device",
        "train.num_workers",
        "train.threads",
        "train.throttle_s",
        "train.checkpoint_every",
        *(f"eval.{k}" for k in EvalConfig().to_table()),  # decoding settings change no training step
    }
)


def _flat(config: dict[str, Any]) -> dict[str, Any]:
    return {
        f"{table}.{key}": value
        for table in ("model", "train", "data", "eval")
        for key, value in config.get(table, {}).items()
    }


def check_resume_config(saved: dict[str, Any], given: Config, path: Path) -> list[str]:
    """Refuse differences outside :data:`RESUMABLE`; returns lines describing the applied ones."""
    old, new = _flat(saved), _flat(given.to_dict())
    for key in ("model.vocab_size", "model.num_chunks"):  # filled in from the corpus (0 = from the corpus)
        if new.get(key) == 0:
            new[key] = old.get(key)
    changed = sorted(k for k in set(old) | set(new) if old.get(k, new.get(k)) != new.get(k, old.get(k)))
    refused = [k for k in changed if k not in RESUMABLE]
    if refused:
        lines = "; ".join(f"{k}: saved {old.get(k)!r}, given {new.get(k)!r}" for k in refused)
        raise ValueError(
            f"--resume: the configuration differs from the one saved in {path} ({lines}). A resumed "
            f"run continues its saved configuration exactly; start a new run (another --out) "
            f"to change these"
        )
    return [f"resume: applying {k} = {new[k]!r} (saved {old.get(k)!r})" for k in changed]


def open_run(
    parts: TrainingParts,
    config: Config,
    out_dir: Path,
    data_dir: Path,
    device: torch.device,
    rank: int,
    info: Callable[[str], None],
    *,
    resume: bool,
) -> RunCounters:
    """Start the run directory ``out_dir`` (rank 0), or continue the run in it (`resume_run`);
    returns the run's counters (fresh ones for a new run)."""
    if rank == 0:
        remove_torn_files(out_dir)  # left by a process killed while writing
    splits = config.data.splits
    if resume:
        return resume_run(parts, config=config, out_dir=out_dir, device=device, rank=rank, info=info)
    if rank == 0:
        start_run_dir(out_dir, config, data_dir, splits)
    return RunCounters()


def resume_run(
    parts: TrainingParts,
    *,
    config: Config,
    out_dir: Path,
    device: torch.device,
    rank: int,
    info: Callable[[str], None],
) -> RunCounters:
    """Continue the run in ``out_dir`` from its ``checkpoint.pt`` (the trainer has checked its
    corpus before building the model: `check_fingerprint`): check the configuration and the model,
    restore ``parts`` and the RNGs, and (rank 0) cut the metrics log back to the checkpoint's step,
    reconcile ``best.pt`` and rewrite ``config.toml``. Returns the restored counters."""
    path = out_dir / CHECKPOINT
    if not path.is_file():
        raise FileNotFoundError(f"--resume: no checkpoint at {path}")
    state = read_checkpoint(path, map_location=device, required=RESUME_KEYS)
    for line in check_resume_config(state["config"], config, path):
        info(line)
    check_same_model(parts.model, state["model"], path)
    counters = parts.restore(state, rank=rank, seed=config.train.seed)
    if rank == 0:  # drop log lines written after the checkpoint (and a torn last line)
        for warning in repair_log(out_dir / METRICS, counters.step):
            info(f"resume: {warning}")
        _check_best(parts, config, out_dir, counters, info)
        write_config(out_dir, config)
    info(
        f"resumed from {path} at step {counters.step} (epoch {parts.loader.epoch}, "
        f"batch {parts.loader.position}/{len(parts.loader)})"
    )
    return counters


def _check_best(
    parts: TrainingParts, config: Config, out_dir: Path, counters: RunCounters, info: Callable[[str], None]
) -> None:
    """Make the resumed best selection score agree with the ``best.pt`` on disk (`check_best`)."""
    recorded = BestModel(step=counters.best_step, score=counters.best_score)
    held = check_best(out_dir, config.train.select_metric, recorded, counters.step, info)
    if held is None:
        counters.best_score, counters.best_step = math.inf, -1
    elif held != recorded:
        counters.best_score, counters.best_step = held.score, held.step
        if config.train.select_metric == "ppl":
            counters.best_ppl = held.score
        save_atomic(parts.checkpoint(config, counters), out_dir / CHECKPOINT)  # the repaired record
