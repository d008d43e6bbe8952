"""Reading JSON files whose records are objects: JSON-lines (metrics logs, per-example results)
and single-object files (:func:`json_object`: a run's ``config.json``).

:func:`json_objects` is the one parser behind them: blank lines are skipped, and a line that is
not valid JSON or not a JSON object is a ``ValueError`` naming the file and the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["json_object", "json_objects"]


def json_object(path: str | Path) -> dict[str, Any]:
    """The JSON object stored in the file ``path`` (a run's ``config.json``, ``data.json``):
    ``FileNotFoundError`` when it is missing, ``ValueError`` naming the file when it is not UTF-8
    JSON or not an object."""
    path = Path(path)
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return value


def json_objects(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of ``path`` (1-based line numbers)."""
    path = Path(path)
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(
                    f"{path}:{lineno}: not UTF-8 text (byte {err.start} of the line); expected one JSON object per line"
                ) from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno}: invalid JSON ({err.msg})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object")
            yield lineno, record
