"""Saving figures: one call writes a figure in every requested format (PNG, SVG, PDF)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..choices import FIGURE_FORMATS

__all__ = ["FIGURE_FORMATS", "figure_paths", "save_figure"]


def figure_paths(path: str | Path, formats: Sequence[str] | None = None) -> list[Path]:
    """The files `save_figure` writes: ``path`` (its suffix is the format) or, with ``formats``,
    ``path`` with each format's suffix."""
    path = Path(path)
    if formats is None:
        suffix = path.suffix.lstrip(".").lower()
        if suffix not in FIGURE_FORMATS:
            raise ValueError(f"{path}: unknown figure format {suffix!r} (use {', '.join(FIGURE_FORMATS)})")
        formats = [suffix]
    for fmt in formats:
        if fmt not in FIGURE_FORMATS:
            raise ValueError(f"unknown figure format {fmt!r} (use {', '.join(FIGURE_FORMATS)})")
    return [path.with_suffix(f".{fmt}") for fmt in formats]


def save_figure(fig: Figure, path: str | Path, formats: Sequence[str] | None = None, dpi: int = 150) -> list[Path]:
    """Write ``fig`` to `figure_paths` ``(path, formats)``; returns them (parent folders are created)."""
    written = figure_paths(path, formats)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)  # attach a headless canvas (figures built with the object API have none)
    for target in written:
        fig.savefig(target, format=target.suffix.lstrip("."), dpi=dpi)
    return written
