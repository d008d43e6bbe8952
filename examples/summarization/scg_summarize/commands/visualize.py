"""The ``scg-summarize visualize`` subcommand: attention heatmaps and training curves.

Examples::

    scg-summarize summarize --run runs/c2f --data data/cnndm --split test --limit 5 \\
        --attention --output c2f.jsonl
    scg-summarize visualize coarse --input c2f.jsonl --example 0 --output fig/coarse --format png,svg
    scg-summarize visualize words --input c2f.jsonl --example 0 --step 3 --output fig/words.png
    scg-summarize visualize curves --run runs/c2f --output fig/curves.svg

``coarse``: the paper's Figure 3 (rows: chunks labelled by their first words; columns:
generated words; chunks read by a hard-attention model outlined). ``words``: the word
attention when generating word ``--step`` (0-based). ``curves``: perplexity per epoch from the
run's metrics log (``--metric`` selects other fields, ``--x step`` plots per step).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..jsonlines import json_objects
from . import Command
from ._common import USER_ERRORS, add_overwrite_argument, error, non_negative_int, refuse_existing

__all__ = ["COMMAND", "read_record"]


def _add_output(parser: argparse.ArgumentParser) -> None:
    from ..choices import FIGURE_FORMATS

    parser.add_argument("--output", required=True, type=Path, help="figure path (its suffix is the format)")
    parser.add_argument(
        "--format", default=None, help=f"comma-separated formats written next to --output ({','.join(FIGURE_FORMATS)})"
    )
    add_overwrite_argument(parser, "the figure files")


def _add_record(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", required=True, type=Path, help="JSON lines from summarize --attention")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--example", type=int, default=0, help="the 0-based line (document) to draw (default 0)")
    which.add_argument("--id", default=None, help="the document id to draw")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``visualize`` (one sub-subcommand per figure)."""
    figures = parser.add_subparsers(dest="figure", metavar="FIGURE", required=True)
    coarse = figures.add_parser("coarse", help="coarse-attention heatmap (chunks x generated words)")
    _add_record(coarse)
    coarse.add_argument("--label-words", type=non_negative_int, default=4, help="words per chunk label (default 4)")
    coarse.add_argument("--eos", action="store_true", help="include the </s> step")
    _add_output(coarse)
    words = figures.add_parser("words", help="word attention of one generated word")
    _add_record(words)
    words.add_argument("--step", type=int, required=True, help="the 0-based generated word")
    _add_output(words)
    curves = figures.add_parser("curves", help="training curves (perplexity per epoch)")
    source = curves.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", type=Path, help="a run directory (its metrics log)")
    source.add_argument("--log", type=Path, help="a metrics JSON lines file")
    curves.add_argument("--metric", action="append", default=None, help="field name part to plot (default ppl)")
    curves.add_argument("--x", default="epoch", help="the x field (default epoch)")
    curves.add_argument("--linear", action="store_true", help="linear instead of log y axis")
    _add_output(curves)


def read_record(path: Path, example: int = 0, doc_id: str | None = None) -> tuple[dict[str, Any], str]:
    """The JSON line ``example`` (0-based, non-blank lines) or the one with ``id == doc_id``."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    index = -1
    for lineno, record in json_objects(path):
        index += 1
        if (doc_id is None and index == example) or (doc_id is not None and str(record.get("id")) == doc_id):
            return record, f"{path}:{lineno}"
    wanted = f"id {doc_id!r}" if doc_id is not None else f"example {example} (it has {index + 1})"
    raise ValueError(f"{path}: no {wanted}")


def _formats(args: argparse.Namespace) -> list[str] | None:
    if args.format is None:
        return None
    return [f.strip().lower() for f in args.format.split(",") if f.strip()]


def run(args: argparse.Namespace) -> int:
    """Execute ``visualize``; returns 0 on success, 1 on an error."""
    from ..viz.curves import find_log, load_curves, plot_curves
    from ..viz.heatmaps import attention_from_record, coarse_heatmap, word_heatmap
    from ..viz.output import figure_paths, save_figure

    try:
        refuse_existing("--output", figure_paths(args.output, _formats(args)), args.overwrite)
        if args.figure == "curves":
            log = find_log(args.run) if args.run is not None else args.log
            if not Path(log).is_file():
                raise FileNotFoundError(f"{log}: no such file")
            series = load_curves(log, metrics=tuple(args.metric or ("ppl", "perplexity")), x_key=args.x)
            fig = plot_curves(series, x_label=args.x, log_y=not args.linear)
        else:
            if args.example < 0:
                raise ValueError(f"--example must be >= 0, got {args.example}")
            record, where = read_record(args.input, args.example, args.id)
            att = attention_from_record(record, where)
            if args.figure == "coarse":
                fig = coarse_heatmap(att, n_words=args.label_words, include_eos=args.eos)
            else:
                fig = word_heatmap(att, args.step)
        written = save_figure(fig, args.output, _formats(args))
    except USER_ERRORS as err:
        return error("visualize", err)
    for path in written:
        print(f"visualize: wrote {path}", file=sys.stderr)
    return 0


COMMAND = Command(
    name="visualize",
    help="attention heatmaps (coarse, per-word) and training curves as PNG/SVG",
    add_arguments=add_arguments,
    run=run,
)
