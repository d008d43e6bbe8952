"""What ``--resume`` accepts: the saved configuration, and a checkpoint that fits the model.

Exact resumption continues the configuration saved in the checkpoint. :func:`check_resume_config`
compares it with the one given on the command line: options that change what is computed
(the model, the data, the objective, the optimizer) must not differ, and are refused by name
(``train.lr: saved 0.01, given 0.1``), since applying them silently would make the saved
configuration lie and ignoring them would make the command line lie. Options that only say how
long, where or how verbosely to run (:data:`RESUMABLE`) are applied, and the change is reported.
(That a checkpoint fits the model is checked by ``models.loading.check_same_model``.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config import Config, EvalConfig

__all__ = ["RESUMABLE", "check_resume_config"]

#: options a resumed run may change (they do not change the computation of any step)
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
