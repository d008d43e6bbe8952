"""Compatibility names: test-set evaluation moved to :mod:`scg_summarize.evaluation.runs`.

``evaluate_run`` is :func:`scg_summarize.evaluation.runs.evaluate_run`; :func:`decode_options`
turns an ``[eval]`` table into :class:`~scg_summarize.decoding.DecodeOptions` (through
:func:`~scg_summarize.decoding.options.resolve_decode_options`, the one place that maps the
table to search settings).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..decoding.options import DecodeOptions, resolve_decode_options
from ..evaluation.runs import evaluate_run
from .config import EvalConfig

__all__ = ["decode_options", "evaluate_run"]


def decode_options(e: EvalConfig | dict[str, Any], extras: tuple[str, ...] = ()) -> DecodeOptions:
    """The :class:`~scg_summarize.decoding.DecodeOptions` of an ``[eval]`` table."""
    table = asdict(e) if isinstance(e, EvalConfig) else dict(e)
    options, _ = resolve_decode_options({}, table, extras=tuple(extras))
    return options
