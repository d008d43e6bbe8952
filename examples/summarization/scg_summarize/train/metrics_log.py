"""``RUN_DIR/metrics.jsonl``: the run's metrics log, appended line by line and repaired on resume.

Each line is one JSON object ``{"event": "train" | "valid" | "end", "step": s, ...}``. A run
killed mid-append (SIGKILL, a full disk) can leave a *torn* last line: bytes without their
closing newline, or a line that is not complete JSON. :func:`repair_log` (called by
``--resume``) makes the log agree with the checkpoint it resumes from:

* a torn **last** line is dropped (with a warning); a bad line anywhere else is an error naming
  the file and line (that is not what a crash leaves, so nothing is silently discarded);
* lines of steps after the checkpoint's step are dropped (the resumed run writes them again,
  identically), and so is the ``end`` line of a finished run (written again when it finishes),
  so that no line is ever duplicated or lost.

The log is rewritten through a temporary file and an atomic rename. :class:`LogWindow` sums the
training steps between two ``train`` lines.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .objective import StepValues

__all__ = ["LogWindow", "append_record", "repair_log"]


@dataclass(kw_only=True, slots=True)
class LogWindow:
    """Sums over the training steps since the last ``train`` line: summed NLL and target tokens,
    soft-attention minibatches, steps, the objective's per-term values, and when it started."""

    nll: float = 0.0
    tokens: int = 0
    soft: int = 0
    steps: int = 0
    terms: dict[str, float] = field(default_factory=dict)
    start: float = field(default_factory=time.perf_counter)

    def add(self, step: StepValues) -> None:
        self.nll += step.nll
        self.tokens += step.tokens
        self.soft += int(step.soft)
        self.steps += 1
        for key, value in step.terms.items():  # per-term losses and rewards of the objective
            self.terms[key] = self.terms.get(key, 0.0) + value

    def state_dict(self) -> dict[str, Any]:
        """The sums (checkpointed: the first ``train`` line after a resume covers the steps before
        the stop too, as the uninterrupted run's does; its tokens per second only those after)."""
        return {
            "nll": self.nll,
            "tokens": self.tokens,
            "soft": self.soft,
            "steps": self.steps,
            "terms": dict(self.terms),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.nll, self.tokens = float(state["nll"]), int(state["tokens"])
        self.soft, self.steps = int(state["soft"]), int(state["steps"])
        self.terms = {str(k): float(v) for k, v in state["terms"].items()}
        self.start = time.perf_counter()

    def values(self, lr: float) -> dict[str, float]:
        """The ``train`` line: loss (NLL per token), ppl, tokens per second, lr, the fraction of
        soft minibatches and each term's mean per step."""
        nll = self.nll / max(self.tokens, 1)
        steps = max(self.steps, 1)
        return {
            "loss": nll,
            "ppl": math.exp(min(nll, 50.0)),
            "tok_per_s": self.tokens / max(time.perf_counter() - self.start, 1e-9),
            "lr": lr,
            "soft_frac": self.soft / steps,
            **{k: v / steps for k, v in self.terms.items()},
        }


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line (a single ``write`` of the whole line)."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def repair_log(path: Path, step: int) -> list[str]:
    """Keep the lines of steps ``<= step`` (no ``end`` line); returns warnings for the user."""
    if not path.is_file():
        return []
    raw = path.read_bytes()
    pieces = raw.split(b"\n")
    complete, tail = pieces[:-1], pieces[-1]  # tail: bytes after the last newline (torn when not empty)
    warnings: list[str] = []
    records: list[dict[str, Any]] = []
    for lineno, line in enumerate(complete, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
        except ValueError as err:
            if lineno == len(complete) and not tail.strip():  # the last line: torn by a crash
                warnings.append(f"{path}:{lineno}: dropped a torn last line ({len(line)} bytes; {err})")
                continue
            raise ValueError(
                f"{path}:{lineno}: not a JSON object line ({err}); the log is damaged "
                f"beyond a torn last line, repair or remove that line"
            ) from None
        records.append(record)
    if tail.strip():
        warnings.append(f"{path}:{len(complete) + 1}: dropped a torn last line ({len(tail)} bytes without a newline)")
    kept = [r for r in records if int(r.get("step", 0)) <= step and r.get("event") != "end"]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
    os.replace(tmp, path)
    return warnings
