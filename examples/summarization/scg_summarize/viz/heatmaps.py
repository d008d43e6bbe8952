"""Attention figures: the coarse-attention heatmap of the paper's Figure 3 and word attention.

Both take the ``attention`` object that ``scg-summarize summarize --attention`` writes per
document (see :func:`attention_from_record`): the generated ``steps`` (words, then ``</s>``),
the ``source`` words per chunk, ``coarse`` ``(steps, M)``, optionally ``chunk_read``
``(steps, M)`` and ``word`` ``(steps, M, N)``.

* :func:`coarse_heatmap`: rows are the (non-empty) chunks, labelled with their first words;
  columns are the generated words; the colour is the coarse attention. Chunks actually read
  by a hard-attention model are outlined.
* :func:`word_heatmap`: the word attention of one generated word, over the words of the
  chunks it reads (for soft attention: the chunks with the most attention mass); each cell
  shows its source word.

Figures use matplotlib's object API only (no global ``pyplot`` state), so they work under the
``Agg`` backend in scripts and tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

__all__ = ["AttentionRecord", "attention_from_record", "coarse_heatmap", "word_heatmap"]


@dataclass
class AttentionRecord:
    """The attention of one summary (see the module docstring)."""

    steps: list[str]
    source: list[list[str]]
    coarse: np.ndarray[Any, Any] | None
    chunk_read: np.ndarray[Any, Any] | None = None
    word: np.ndarray[Any, Any] | None = None
    title: str = ""


def attention_from_record(record: Mapping[str, Any], where: str = "record") -> AttentionRecord:
    """Parse a ``summarize --attention`` JSON line (raises ``ValueError`` naming ``where``)."""
    att = record.get("attention")
    if not isinstance(att, Mapping):
        raise ValueError(f"{where}: no 'attention' object (run summarize with --attention)")
    steps, source = att.get("steps"), att.get("source")
    if not isinstance(steps, list) or not isinstance(source, list):
        raise ValueError(f"{where}: attention needs 'steps' and 'source' lists")

    def array(name: str, ndim: int) -> np.ndarray[Any, Any] | None:
        if name not in att:
            return None
        value = np.asarray(att[name], dtype=float)
        if value.ndim != ndim or value.shape[0] != len(steps) or value.shape[1] != len(source):
            raise ValueError(
                f"{where}: attention[{name!r}] has shape {value.shape}, expected ({len(steps)}, {len(source)}, ...)"
            )
        return value

    return AttentionRecord(
        steps=[str(s) for s in steps],
        source=[[str(w) for w in chunk] for chunk in source],
        coarse=array("coarse", 2),
        chunk_read=array("chunk_read", 2),
        word=array("word", 3),
        title=str(record.get("id", "")),
    )


def chunk_label(words: Sequence[str], n_words: int = 4) -> str:
    """A chunk's row label: its first ``n_words`` words."""
    return " ".join(words[:n_words]) + (" …" if len(words) > n_words else "")


def coarse_heatmap(att: AttentionRecord, *, n_words: int = 4, include_eos: bool = False, cmap: str = "Blues") -> Figure:
    """The coarse-attention heatmap (rows: chunks, columns: generated words)."""
    if att.coarse is None:
        raise ValueError(f"{att.title or 'record'}: the model returned no coarse attention (soft-attention model?)")
    rows = [m for m, chunk in enumerate(att.source) if chunk]
    cols = len(att.steps) if include_eos else max(len(att.steps) - 1, 1)
    data = att.coarse[:cols, rows].T  # (chunks, words)
    fig = Figure(figsize=(max(4.0, 0.32 * cols + 3.0), max(2.5, 0.32 * len(rows) + 1.5)), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(data, aspect="auto", cmap=cmap, vmin=0.0, vmax=max(float(data.max()), 1e-9))
    ax.set_xticks(range(cols), att.steps[:cols], rotation=90, fontsize=8)
    ax.set_yticks(range(len(rows)), [chunk_label(att.source[m], n_words) for m in rows], fontsize=8)
    ax.set_xlabel("generated word")
    ax.set_ylabel("source chunk")
    if att.chunk_read is not None:
        for col in range(cols):
            for row, m in enumerate(rows):
                if att.chunk_read[col, m] > 0.5:
                    ax.add_patch(Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="crimson", lw=1.2))
    fig.colorbar(image, ax=ax, label="coarse attention", shrink=0.8)
    if att.title:
        ax.set_title(att.title, fontsize=9)
    return fig


def word_heatmap(att: AttentionRecord, step: int, *, max_rows: int = 4, cmap: str = "Oranges") -> Figure:
    """Word attention of generated word ``step`` (0-based) over the words of the chunks read."""
    if att.word is None:
        raise ValueError(f"{att.title or 'record'}: the model returned no word attention")
    if not 0 <= step < len(att.steps):
        raise ValueError(f"step {step} out of range: the summary has {len(att.steps)} steps (words and </s>)")
    weights = att.word[step]  # (M, N)
    if att.chunk_read is not None and att.chunk_read[step].any():
        rows = [m for m in range(weights.shape[0]) if att.chunk_read[step, m] > 0.5 and att.source[m]]
    else:
        mass = weights.sum(1)
        rows = [int(m) for m in np.argsort(-mass, kind="stable")[:max_rows] if att.source[int(m)]]
    rows = rows[:max_rows] or [0]
    width = max(len(att.source[m]) for m in rows) or 1
    data = np.zeros((len(rows), width))
    for r, m in enumerate(rows):
        n = len(att.source[m])
        data[r, :n] = weights[m, :n]
    fig = Figure(figsize=(max(4.0, 0.55 * width + 1.5), 0.7 * len(rows) + 1.6), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(data, aspect="auto", cmap=cmap, vmin=0.0, vmax=max(float(data.max()), 1e-9))
    top = float(data.max())
    for r, m in enumerate(rows):
        for n, word in enumerate(att.source[m]):
            colour = "white" if top > 0 and data[r, n] > 0.6 * top else "black"
            ax.text(n, r, word, ha="center", va="center", rotation=90, fontsize=7, color=colour)
    ax.set_yticks(range(len(rows)), [f"chunk {m}" for m in rows], fontsize=8)
    ax.set_xticks([])
    ax.set_title(f"word attention generating {att.steps[step]!r} (step {step})", fontsize=9)
    fig.colorbar(image, ax=ax, label="word attention", shrink=0.8)
    return fig
