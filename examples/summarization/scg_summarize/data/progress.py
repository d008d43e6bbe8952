"""A minimal progress indicator: ``tqdm`` when installed, else a plain stderr counter.

Progress output is disabled when ``enabled`` is False (``--quiet``) or when stderr is not a
terminal (logs, CI, pytest), so it never clutters captured output.
"""

from __future__ import annotations

import importlib
import sys
import time
from types import TracebackType
from typing import Any, TextIO

__all__ = ["Progress", "progress_enabled"]


def progress_enabled(quiet: bool = False, stream: TextIO | None = None) -> bool:
    """Whether to show progress: not ``quiet`` and ``stream`` (default stderr) is a TTY."""
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return not quiet and callable(isatty) and bool(isatty())


class Progress:
    """Count processed items, showing a bar or a throttled ``desc: N items`` line.

    Use as a context manager; :meth:`update` is cheap when disabled.

    Args:
        desc: a label such as ``"pass 1 (tokenize)"``.
        total: the expected number of items, if known.
        enabled: show anything at all.
        use_tqdm: use ``tqdm`` if it can be imported (otherwise the stderr counter).
        stream: where the fallback counter writes (default ``sys.stderr``).
        interval: minimum seconds between fallback counter refreshes.
    """

    def __init__(
        self,
        desc: str,
        total: int | None = None,
        *,
        enabled: bool = True,
        use_tqdm: bool = True,
        stream: TextIO | None = None,
        interval: float = 0.5,
    ) -> None:
        self.desc = desc
        self.total = total
        self.enabled = enabled
        self.count = 0
        self._stream = stream if stream is not None else sys.stderr
        self._interval = interval
        self._last = 0.0
        self._bar: Any = None
        if enabled and use_tqdm:
            try:
                tqdm_module: Any = importlib.import_module("tqdm")
            except ImportError:
                self._bar = None
            else:
                self._bar = tqdm_module.tqdm(total=total, desc=desc, unit=" ex", file=self._stream)

    def update(self, n: int = 1) -> None:
        """Record ``n`` more processed items."""
        self.count += n
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.monotonic()
        if now - self._last >= self._interval:
            self._last = now
            self._write("\r")

    def _write(self, prefix: str, end: str = "") -> None:
        of_total = f"/{self.total}" if self.total is not None else ""
        self._stream.write(f"{prefix}{self.desc}: {self.count}{of_total}{end}")
        self._stream.flush()

    def close(self) -> None:
        """Finish the display (prints the final count on its own line)."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        else:
            self._write("\r", "\n")
        self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
