"""Figures (matplotlib, object API, PNG and SVG).

=============== ===========================================================================
``heatmaps``    coarse-attention heatmap (the paper's Figure 3) and word attention per step
``curves``      training curves (perplexity per epoch) from a run's JSON lines log
``output``      :func:`save_figure` in several formats
=============== ===========================================================================
"""

from .curves import find_log, load_curves, plot_curves
from .heatmaps import AttentionRecord, attention_from_record, coarse_heatmap, word_heatmap
from .output import FIGURE_FORMATS, save_figure

__all__ = [
    "FIGURE_FORMATS",
    "AttentionRecord",
    "attention_from_record",
    "coarse_heatmap",
    "find_log",
    "load_curves",
    "plot_curves",
    "save_figure",
    "word_heatmap",
]
