"""Progress lines of the training loop when no progress bar is shown (logs, CI, ``nohup``).

Outside a terminal the trainer prints a line every ``train.log_every`` steps; it says where the
run is and when it will end: ``step 150/2500 (6%), epoch 1/4, 1m02s, ETA 16m10s``. The total
is ``train.epochs`` times the steps per epoch (the loader's length, or
``train.max_steps_per_epoch``); the time left is the mean time per step so far times the steps
left, capped by what is left of ``train.time_budget_s``.
"""

from __future__ import annotations

import math

__all__ = ["format_duration", "step_progress", "total_steps"]


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
    parts = [f"step {step}/{total} ({100.0 * step / total:.0f}%)" if total > 0 else f"step {step}",
             f"epoch {epoch}/{epochs}", format_duration(elapsed)]
    if step > 0 and total > 0:
        left = max(total - step, 0) * elapsed / step
        if budget_s > 0:
            left = min(left, max(budget_s - elapsed, 0.0))
        if math.isfinite(left):
            parts.append(f"ETA {format_duration(left)}")
    return ", ".join(parts)
