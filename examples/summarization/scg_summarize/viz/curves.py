"""Training curves from a run's metrics log (JSON lines), like the thesis's Figure 6.1.

The log is read tolerantly: every line is a JSON object; its x value is ``epoch`` (or the key
given, e.g. ``step``); every numeric field whose name contains one of the requested metric
names (default ``ppl``/``perplexity``) is a point of the series of that field. A ``split``, ``event``
(the trainer's ``metrics.jsonl``: ``train``/``valid``) or ``phase`` field names the series, so
``{"epoch": 1, "train_ppl": 9.1, "valid_ppl": 9.8}`` gives series ``train_ppl``/``valid_ppl`` and
``{"epoch": 1, "event": "valid", "ppl": 9.8}`` a series ``valid``; ``event: end`` records (run
summaries) are skipped. When a series has several points at one x (per-batch logging), the last is kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from ..jsonlines import json_objects

__all__ = ["find_log", "load_curves", "plot_curves"]

#: Records with these ``event`` values summarize a run (e.g. the best perplexity) and are skipped.
SUMMARY_EVENTS: tuple[str, ...] = ("end", "summary")
LOG_NAMES: tuple[str, ...] = ("metrics.jsonl", "log.jsonl", "train_log.jsonl", "history.jsonl")
Series = dict[str, list[tuple[float, float]]]


def find_log(run_dir: str | Path) -> Path:
    """The metrics log of a run directory (or the file itself when given a file)."""
    path = Path(run_dir)
    if path.is_file():
        return path
    for name in LOG_NAMES:
        if (path / name).is_file():
            return path / name
    found = sorted(path.glob("*.jsonl")) if path.is_dir() else []
    if found:
        return found[0]
    raise FileNotFoundError(f"{path}: no metrics log found (looked for {', '.join(LOG_NAMES)} or any *.jsonl)")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))


def load_curves(path: str | Path, metrics: Sequence[str] = ("ppl", "perplexity"), x_key: str = "epoch") -> Series:
    """Series name -> sorted ``(x, y)`` points (see the module docstring).

    Raises ``ValueError`` naming the file and line for a line that is not a JSON object, and
    when no point is found at all.
    """
    path = Path(path)
    points: dict[str, dict[float, float]] = {}
    for _, record in json_objects(path):
        x = record.get(x_key)
        if not isinstance(x, (int, float)) or not _is_number(x):
            continue
        prefix = record.get("split") or record.get("event") or record.get("phase")
        if prefix in SUMMARY_EVENTS:
            continue
        for key, value in record.items():
            if key == x_key or not _is_number(value) or not any(m in key.lower() for m in metrics):
                continue
            if not isinstance(prefix, str):
                name = key
            else:
                name = prefix if key in metrics else f"{prefix} {key}"
            points.setdefault(name, {})[float(x)] = float(value)  # both checked numeric
    if not points:
        raise ValueError(f"{path}: no {'/'.join(metrics)} values with a numeric {x_key!r} found")
    return {name: sorted(values.items()) for name, values in sorted(points.items())}


def plot_curves(series: Series, *, x_label: str = "epoch", y_label: str = "perplexity", log_y: bool = True) -> Figure:
    """One line per series (markers at the points); a log y axis by default."""
    if not series:
        raise ValueError("no series to plot")
    width, height = 5.5, 3.6
    fig = Figure(figsize=(width, height))
    # margins in inches: the tick labels of either axis are short numbers, so a layout engine that measures every
    # label first (constrained layout: about half of the figure's CPU) finds nothing more to fit
    fig.subplots_adjust(left=0.85 / width, right=1 - 0.15 / width, bottom=0.55 / height, top=1 - 0.15 / height)
    ax = fig.add_subplot()
    for name, pts in series.items():
        xs, ys = zip(*pts)
        ax.plot(xs, ys, marker="o", markersize=3, label=name)
    if log_y and all(y > 0 for pts in series.values() for _, y in pts):
        ax.set_yscale("log")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig
