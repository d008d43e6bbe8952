"""Bad-input handling: the :class:`DataError` exception and the skip report.

Every problem with an input file is raised as a :class:`DataError` that names the file and,
where it makes sense, the 1-based line. Readers never drop anything silently: they hand each
error to a :class:`BadInputReport`, which re-raises it (the default) or, in ``skip_bad`` mode,
counts it under a short reason code and keeps the first few messages for the report that is
printed and stored in the prepared corpus's metadata.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BadInputReport", "DataError", "require_file"]


class DataError(ValueError):
    """A malformed or unusable input record.

    Args:
        message: what is wrong, in words.
        path: the file the record came from (``None`` for in-memory input).
        line: the 1-based line number inside ``path`` where the problem is, if known.
        reason: a short machine-readable code used to count skipped records
            (e.g. ``"bad_json"``, ``"missing_highlight"``, ``"invalid_utf8"``).
    """

    def __init__(
        self,
        message: str,
        path: str | Path | None = None,
        line: int | None = None,
        reason: str = "malformed",
    ) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        self.reason = reason
        super().__init__(self._format())

    @property
    def location(self) -> str:
        """``"file:line"``, ``"file"`` or ``"<input>"``."""
        if self.path is None:
            return "<input>" if self.line is None else f"<input>:{self.line}"
        return self.path if self.line is None else f"{self.path}:{self.line}"

    def _format(self) -> str:
        return f"{self.location}: {self.message} [{self.reason}]"

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep the keyword fields when pickled (e.g. across DataLoader workers).
        return (type(self), (self.message, self.path, self.line, self.reason))

    @property
    def skippable(self) -> bool:
        """Whether ``skip_bad`` could skip it: a bad record, not a missing input."""
        return self.reason != "missing_input"


def require_file(path: str | Path) -> None:
    """Refuse an input path that is not a file, saying whether it is missing or a directory."""
    path = Path(path)
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "no such file"
        raise DataError(what, path, reason="missing_input")


@dataclass
class BadInputReport:
    """Counts of records that were skipped (or, by default, the first error raised).

    Args:
        skip_bad: when False (the default) :meth:`handle` re-raises every error; when True
            it counts the error under its reason and keeps going.
        max_messages: how many full error messages to keep for the report.
    """

    skip_bad: bool = False
    max_messages: int = 20
    skipped: Counter[str] = field(default_factory=Counter)
    messages: list[str] = field(default_factory=list)

    def handle(self, error: DataError) -> None:
        """Raise ``error`` or, in ``skip_bad`` mode, record it as skipped."""
        if not self.skip_bad:
            raise error
        self.skipped[error.reason] += 1
        if len(self.messages) < self.max_messages:
            self.messages.append(str(error))

    @property
    def total_skipped(self) -> int:
        """The number of skipped records over all reasons."""
        return sum(self.skipped.values())

    def merge(self, other: BadInputReport) -> None:
        """Add ``other``'s counts and messages to this report."""
        self.skipped.update(other.skipped)
        room = self.max_messages - len(self.messages)
        self.messages.extend(other.messages[: max(room, 0)])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable summary (stored in ``meta.json``)."""
        return {
            "skipped": dict(sorted(self.skipped.items())),
            "total_skipped": self.total_skipped,
            "messages": list(self.messages),
        }

    def summary_lines(self, title: str = "") -> list[str]:
        """Human-readable lines for the console (empty when nothing was skipped)."""
        if not self.skipped:
            return []
        head = f"{title}: " if title else ""
        lines = [f"{head}skipped {self.total_skipped} bad record(s)"]
        lines += [f"  {reason}: {count}" for reason, count in sorted(self.skipped.items())]
        if self.messages:
            lines.append("  first problems:")
            lines += [f"    {m}" for m in self.messages]
        return lines
