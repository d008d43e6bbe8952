"""Graceful stops: SIGTERM / SIGINT, and the death of the ``torchrun`` agent.

:class:`StopRequest` replaces the default handlers while the trainer runs. The first signal
only sets a flag (and says so on stderr); the loop looks at it after every step, writes a
checkpoint and ends with :class:`TrainingStopped`, which the command turns into a one-line
message and exit status 128 + the signal number (130 for SIGINT, 143 for SIGTERM). A second
signal exits at once (status 128 + signal): the last checkpoint, written atomically, is intact.

Under ``torchrun`` a worker whose agent dies (SIGKILL, OOM) is re-parented; :meth:`StopRequest.
requested` notices that its parent pid changed and stops the same way, so orphaned workers do
not keep training and writing the run directory. Under DDP the ranks agree on stopping (the
flag is summed over ranks each step), so they all stop after the same step.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

__all__ = ["Interrupted", "StopRequest", "TrainingStopped", "interrupt_on_signals"]

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class TrainingStopped(Exception):
    """The run stopped early on request, after writing a checkpoint."""

    def __init__(self, reason: str, step: int, status: int) -> None:
        super().__init__(f"stopped by {reason} at step {step}")
        self.reason = reason
        self.step = step
        self.status = status


class Interrupted(Exception):
    """SIGTERM/SIGINT arrived while :func:`interrupt_on_signals` was in force."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.status = 128 + signum


class interrupt_on_signals:
    """Within the block, SIGTERM and SIGINT raise :class:`Interrupted` (for work after training,
    such as the final test evaluation, where there is no step to finish: nothing is lost by
    abandoning it, and the command says so in one line instead of dying silently)."""

    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}

    def _raise(self, signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)

    def __enter__(self) -> interrupt_on_signals:
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                self._previous[sig] = signal.signal(sig, self._raise)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


class StopRequest:
    """Signal handlers that turn SIGTERM/SIGINT into a stop after the current step.

    Args:
        watch_parent: also stop when the parent process is gone (set under ``torchrun``).
    """

    def __init__(self, watch_parent: bool = False) -> None:
        self.signum: int | None = None
        self.reason = ""
        self._parent = os.getppid() if watch_parent else None
        self._previous: dict[int, Any] = {}
        self._pid = os.getpid()

    def install(self) -> StopRequest:
        """Replace the SIGTERM/SIGINT handlers (main thread only; elsewhere a no-op)."""
        self._pid = os.getpid()
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def restore(self) -> None:
        """Put the previous handlers back."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self._pid:  # a forked data-loader worker: its parent decides
            return
        name = signal.Signals(signum).name
        if self.signum is not None:
            sys.stderr.write(f"train: second {name}: exiting now (the last checkpoint is intact)\n")
            sys.stderr.flush()
            os._exit(128 + signum)
        self.signum, self.reason = signum, name
        sys.stderr.write(
            f"train: {name} received: stopping after this step and writing a checkpoint "
            f"(send it again to exit at once)\n"
        )
        sys.stderr.flush()

    def requested(self) -> bool:
        """Whether to stop now (a signal arrived, or the watched parent process died)."""
        if self.signum is None and self._parent is not None and os.getppid() != self._parent:
            self.signum, self.reason = signal.SIGTERM, f"the death of the torchrun agent (pid {self._parent})"
        return self.signum is not None

    @property
    def status(self) -> int:
        """The exit status for the stop (128 + signal number)."""
        return 128 + (self.signum or signal.SIGTERM)
