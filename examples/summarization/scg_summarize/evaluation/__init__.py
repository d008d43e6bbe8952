"""Evaluation: ROUGE, perplexity, attention metrics, baselines and result tables.

=============== ===========================================================================
``rouge``       :class:`Rouge` (``rouge-score``, stemming, max over references, Lsum, DUC)
``perplexity``  teacher-forced scoring through the step protocol; :class:`Perplexity`
``metrics``     coarse-attention entropy, fraction of the source read, coarse accuracy
``baselines``   FIRST, LEAD-3, PREFIX-75 bytes, TextRank (networkx PageRank)
``report``      result JSON records; markdown tables in the layout of the paper's Table 1
``runner``      :func:`evaluate_model` / :func:`evaluate_baseline` on a prepared split
``runs``        :func:`evaluate_run`: a finished training run on its test split
``naming``      result file names that carry the settings; results refused, never overwritten
=============== ===========================================================================

See ``docs/evaluation.md``.
"""

from .baselines import BASELINES, ExtractiveBaseline, first_sentence, get_baseline, lead, prefix_bytes, textrank
from .metrics import AttentionMetrics, coarse_entropy, fraction_read, fraction_read_per_step
from .perplexity import Perplexity, TeacherForced, teacher_forced
from .report import collect_results, make_result, markdown_report, markdown_table, read_result, write_result
from .rouge import METRICS, Rouge, RougeOptions, RougeResult, truncate_bytes
from .runner import evaluate_baseline, evaluate_model
from .runs import evaluate_run

__all__ = [
    "BASELINES",
    "METRICS",
    "AttentionMetrics",
    "ExtractiveBaseline",
    "Perplexity",
    "Rouge",
    "RougeOptions",
    "RougeResult",
    "TeacherForced",
    "coarse_entropy",
    "collect_results",
    "evaluate_baseline",
    "evaluate_model",
    "evaluate_run",
    "first_sentence",
    "fraction_read",
    "fraction_read_per_step",
    "get_baseline",
    "lead",
    "make_result",
    "markdown_report",
    "markdown_table",
    "prefix_bytes",
    "read_result",
    "teacher_forced",
    "textrank",
    "truncate_bytes",
    "write_result",
]
