"""When the training run stops: `RunStopping`, a base of
[`Trainer`][scg_summarize.train.loop.Trainer].

After each step the loop asks whether ``train.max_steps`` is reached or the time budget
(``train.time_budget_s``) spent once a validation is added (`_out_of_steps_or_time`, which records
what stopped the run), measured by the run's wall-clock and CPU seconds (`_tick`), and whether a
stop signal (`.signals`) came on any rank (`_stop_requested`, `_stopped`): under DDP the ranks
agree through an all-reduce (`_any_rank`), so that all of them stop after the same step.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from .config import Config
from .ddp import DistContext
from .progress import format_duration
from .run_state import RunCounters
from .signals import StopRequest, TrainingStopped

__all__ = ["RunStopping"]


class RunStopping:
    """The decisions of the module docstring, as methods of the `Trainer`, which sets the
    attributes below."""

    config: Config
    dist: DistContext
    device: torch.device
    counters: RunCounters
    stop: StopRequest
    stopped_by: str
    info: Callable[[str], None]
    _wall_start: float
    _cpu_start: float

    def _any_rank(self, local: bool) -> bool:
        """``local`` on any rank (summed over ranks, so that all of them decide alike after a step)."""
        if not self.dist.enabled:
            return local
        return self.dist.all_reduce([1.0 if local else 0.0], self.device)[0] > 0

    def _stop_requested(self) -> bool:
        """A stop signal on any rank: all ranks stop after the same step."""
        return self._any_rank(self.stop.requested())

    def _stopped(self) -> TrainingStopped:
        return TrainingStopped(self.stop.reason or "a signal on another rank", self.counters.step, self.stop.status)

    def _tick(self) -> None:
        """Update the wall-clock and CPU seconds the run has trained and validated."""
        self.counters.elapsed = time.perf_counter() - self._wall_start
        self.counters.cpu_elapsed = time.process_time() - self._cpu_start

    def _out_of_steps_or_time(self) -> bool:
        """``train.max_steps`` reached, or the time budget spent once a validation is added."""
        tc = self.config.train
        if tc.max_steps and self.counters.step >= tc.max_steps:
            self.stopped_by = "max_steps"
            return True
        last_validation = self.counters.validation_s / self.counters.validations if self.counters.validations else 0.0
        if tc.time_budget_s and self._any_rank(self.counters.elapsed + last_validation >= tc.time_budget_s):
            # each rank reads its own clock, so they agree (any rank out of time stops them all);
            # otherwise one would stop while another waits in its next all-reduce
            self.stopped_by = "time_budget_s"
            self.info(
                f"time budget: stopping after step {self.counters.step} ({format_duration(self.counters.elapsed)} "
                f"of {format_duration(tc.time_budget_s)}; one validation left)"
            )
            return True
        return False
