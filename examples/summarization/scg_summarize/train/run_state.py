"""What a run has done so far ([`RunCounters`][scg_summarize.train.run_state.RunCounters]): steps,
the best validation, the seconds spent. Saved in ``checkpoint.pt``, restored by ``--resume``,
summarized in ``training.json`` (`training_record`) and the trainer's closing line (`done_line`)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch

from .config import TrainConfig
from .progress import TrainingRecord

__all__ = ["RunCounters", "done_line", "training_record"]


@dataclass(kw_only=True, slots=True)
class RunCounters:
    """The counters of a run (one ``checkpoint.pt`` key each).

    Attributes:
        step: optimizer steps taken.
        best_ppl: the lowest validation perplexity so far.
        best_step, best_score: the step of ``best.pt`` and its selection value
            (``train.select_metric``; lower is better); -1 and infinity before the first.
        elapsed: wall seconds of training and validation (what ``train.time_budget_s`` bounds);
            cpu_elapsed: the process's CPU seconds in them.
        validation_s: wall seconds of the validations (in ``elapsed``); validations: how many.
        last_valid_ppl: the last validation perplexity (NaN before the first).
        valid_step: the step of the last validation (-1 before the first): a run resumed with
            its budget spent has made its final validation when it is ``step``.
    """

    step: int = 0
    best_ppl: float = math.inf
    best_step: int = -1
    best_score: float = math.inf
    elapsed: float = 0.0
    cpu_elapsed: float = 0.0
    validation_s: float = 0.0
    validations: int = 0
    last_valid_ppl: float = math.nan
    valid_step: int = -1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_checkpoint(cls, state: dict[str, Any]) -> RunCounters:
        """The counters stored in a checkpoint (``step`` and ``best_ppl`` required)."""
        best_ppl = float(state["best_ppl"])
        return cls(
            step=int(state["step"]),
            best_ppl=best_ppl,
            best_step=int(state.get("best_step", -1)),
            best_score=float(state.get("best_score", best_ppl)),
            elapsed=float(state.get("elapsed", 0.0)),
            cpu_elapsed=float(state.get("cpu_elapsed", 0.0)),
            validation_s=float(state.get("validation_s", 0.0)),
            validations=int(state.get("validations", 0)),
            last_valid_ppl=float(state.get("last_valid_ppl", math.nan)),
            valid_step=int(state.get("valid_step", -1)),
        )


def training_record(counters: RunCounters, epochs: float, stopped_by: str, tc: TrainConfig) -> TrainingRecord:
    """What the run has done (``RUN_DIR/training.json``); ``epochs``: the epochs begun, a fraction
    when cut short."""
    return TrainingRecord(
        steps=counters.step,
        epochs=round(epochs, 4),
        stopped_by=stopped_by,
        time_budget_s=tc.time_budget_s,
        seed=tc.seed,
        threads=torch.get_num_threads(),
        wall_s=round(counters.elapsed, 3),
        cpu_s=round(counters.cpu_elapsed, 3),
        validation_s=round(counters.validation_s, 3),
        validations=counters.validations,
        best_step=counters.best_step,
        valid_ppl=None if math.isnan(counters.last_valid_ppl) else round(counters.last_valid_ppl, 6),
    )


def done_line(counters: RunCounters, stopped_by: str, select_metric: str) -> str:
    """The trainer's closing line (with ``best.pt``'s step and score when another metric than
    perplexity selected it)."""
    c = counters
    held = (
        f"; best.pt: step {c.best_step}, validation {select_metric} {abs(c.best_score):.3f}"
        if select_metric != "ppl" and c.best_step >= 0
        else ""
    )
    return (
        f"done: {c.step} steps in {c.elapsed:.0f}s ({c.cpu_elapsed:.0f} CPU s; "
        f"{c.validation_s:.0f}s of it in {c.validations} validations), stopped by {stopped_by}, "
        f"best validation ppl {c.best_ppl:.3f}{held}"
    )
