"""Progress lines of the training loop when no progress bar is shown (logs, CI, ``nohup``).

Outside a terminal the trainer prints a line every ``train.log_every`` steps; it says where the
run is and when it will end: ``step 150/2500 (6%), epoch 1/4, 1m02s, ETA 16m10s``. The total
is ``train.epochs`` times the steps per epoch (the loader's length, or
``train.max_steps_per_epoch``); the time left is the mean time per step so far times the steps
left, capped by what is left of ``train.time_budget_s``. The phases after the steps say so too:
:class:`PhaseProgress` prints ``validation: 96/619 examples, 12s`` lines for the per-epoch
validation, the decoding that picks ``best.pt`` by ROUGE and the final test evaluation.

What a run did is written to ``RUN_DIR/training.json`` (:class:`TrainingRecord`): the steps, the
wall and CPU seconds of training and of validation, the seed and thread count, and what stopped
it (``epochs``, ``max_steps``, or ``time_budget_s``: then the result depends on the machine's load, and every
evaluation of the run says so). ``train.time_budget_s`` covers the training steps and the
per-epoch validations (the mean time of a validation is kept in reserve for the final one);
the test evaluation after training is not counted, and the trainer says so when it starts.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..evaluation.report import TRAINING_RECORD
from .config import TrainConfig

__all__ = [
    "PhaseProgress",
    "TrainingRecord",
    "epoch_bar",
    "format_duration",
    "step_progress",
    "total_steps",
    "train_line",
]


def format_duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def total_steps(epochs: int, steps_per_epoch: int, max_steps_per_epoch: int = 0) -> int:
    """Optimizer steps of a whole run."""
    per_epoch = min(steps_per_epoch, max_steps_per_epoch) if max_steps_per_epoch > 0 else steps_per_epoch
    return max(epochs, 0) * max(per_epoch, 0)


def step_progress(step: int, total: int, elapsed: float, *, epoch: int, epochs: int, budget_s: float = 0.0) -> str:
    """``step S/T (P%), epoch E/N, <elapsed>, ETA <left>`` (see the module docstring)."""
    parts = [
        f"step {step}/{total} ({100.0 * step / total:.0f}%)" if total > 0 else f"step {step}",
        f"epoch {epoch}/{epochs}",
        format_duration(elapsed),
    ]
    if step > 0 and total > 0:
        left = max(total - step, 0) * elapsed / step
        if budget_s > 0:
            left = min(left, max(budget_s - elapsed, 0.0))
        if math.isfinite(left):
            parts.append(f"ETA {format_duration(left)}")
    return ", ".join(parts)


def train_line(where: str, values: dict[str, float]) -> str:
    """``<where>: loss L ppl P T tok/s`` (and the self-critical rewards) of a ``train`` metrics line."""
    line = f"{where}: loss {values['loss']:.3f} ppl {values['ppl']:.2f} {values['tok_per_s']:.0f} tok/s"
    if "reward" in values:
        line += f" reward {values['reward']:.3f} (greedy {values['greedy_reward']:.3f})"
    return line


def epoch_bar(total: int, initial: int, epoch: int) -> Any:
    """A terminal progress bar of an epoch's ``total`` steps (tqdm; None without it)."""
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, initial=initial, desc=f"epoch {epoch + 1}", leave=False, dynamic_ncols=True)


class PhaseProgress:
    """Progress lines of a phase after the training steps: ``NAME: DONE/TOTAL examples, 12s``,
    printed at most every ``every_s`` seconds, and one line with the phase's seconds at the end.

    ``print_line`` gets each line (None: silent; the phase is still timed). Call the object with
    the number of examples finished since the last call; :meth:`done` returns the seconds taken.
    """

    def __init__(self, name: str, total: int, print_line: Callable[[str], None] | None, every_s: float = 10.0) -> None:
        self.name, self.total, self.print_line, self.every_s = name, total, print_line, every_s
        self.count = 0
        self.start = self.last = time.perf_counter()
        if print_line is not None:
            print_line(f"{name}: {total} examples ...")

    def __call__(self, finished: int) -> None:
        self.count += finished
        now = time.perf_counter()
        if self.print_line is not None and now - self.last >= self.every_s and self.count < self.total:
            self.last = now
            self.print_line(f"{self.name}: {self.count}/{self.total} examples, {format_duration(now - self.start)}")

    def done(self) -> float:
        seconds = time.perf_counter() - self.start
        if self.print_line is not None:
            self.print_line(
                f"{self.name}: done, {min(self.count, self.total) or self.total} examples in {format_duration(seconds)}"
            )
        return seconds


@dataclass(kw_only=True, slots=True)
class TrainingRecord:
    """What a training run did (``RUN_DIR/training.json``).

    Attributes:
        steps: optimizer steps in all; epochs: the epochs begun (a fraction when cut short).
        stopped_by: ``epochs`` (``train.epochs`` reached), ``max_steps`` (``train.max_steps``) or
            ``time_budget_s`` (the wall-clock budget ended the run: its result depends on the
            machine's load).
        time_budget_s: the budget (0: none); seed, threads: ``train.seed``, ``train.threads``.
        wall_s: wall seconds of training and validation; cpu_s: the process's CPU seconds in them.
        validation_s: wall seconds of the validations (included in ``wall_s``); validations: how many.
        best_step: the step of ``best.pt``; valid_ppl: the last validation perplexity.
    """

    steps: int
    epochs: float
    stopped_by: str
    time_budget_s: float
    seed: int
    threads: int
    wall_s: float
    cpu_s: float
    validation_s: float
    validations: int
    best_step: int
    valid_ppl: float | None

    def write(self, run_dir: str | Path) -> Path:
        path = Path(run_dir) / TRAINING_RECORD
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path


def epoch_line(
    epoch: int,
    metrics: dict[str, Any],
    select_metric: str,
    lr: float,
    decayed: bool,
    seconds: float,
    terms: tuple[str, ...] = (),
) -> str:
    """The line after epoch ``epoch`` (0-based): validation perplexity, coarse accuracy (C2F), the
    selection metric, the family's own ``terms`` (those measured), the fraction read, the
    learning rate and the validation's duration."""
    acc = metrics.get("coarse_acc")
    return (
        f"epoch {epoch + 1}: valid ppl {metrics['ppl']:.3f}"
        + (f", coarse acc {acc:.3f}" if acc is not None else "")
        + (f", {select_metric} {metrics[select_metric]:.2f}" if select_metric != "ppl" else "")
        + "".join(f", {name} {metrics[name]:.3f}" for name in terms if name in metrics)
        + f", read {metrics['read_frac']:.3f}, lr {lr:g}"
        + (" (decayed)" if decayed else "")
        + f" ({format_duration(seconds)})"
    )


def step_line(
    values: dict[str, float], step: int, elapsed: float, epoch: int, steps_per_epoch: int, tc: TrainConfig
) -> str:
    """The progress line of a ``train`` metrics line at ``step`` of (1-based) ``epoch``."""
    total = total_steps(tc.epochs, steps_per_epoch, tc.max_steps_per_epoch)
    total = min(total, tc.max_steps) if tc.max_steps else total
    where = step_progress(step, total, elapsed, epoch=epoch, epochs=tc.epochs, budget_s=tc.time_budget_s)
    return train_line(where, values)


def budget_notice(budget_s: float) -> str:
    """What a run with a time budget says when it starts."""
    return (
        f"time budget: {format_duration(budget_s)} of wall-clock time for the training steps "
        f"and validations (the mean time of a validation is kept for the final one); the test "
        f"evaluation after it is not counted. The result depends on the machine's load: budget "
        f"in train.epochs / train.max_steps_per_epoch to reproduce it"
    )
