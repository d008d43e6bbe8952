"""The ``scg-summarize report`` subcommand: every result under a folder in one table.

Example::

    scg-summarize report runs/ --output runs/results.md --json runs/results.json

Finds the result files written by ``evaluate`` (``RUN/eval/*.json``) and ``baseline
--output-dir`` under ``RUNS_DIR`` and prints markdown in the layout of the paper's Table 1
(one table per data set and split), followed by the coarse-attention metrics. Every result
with its own settings gets its own row; only identical evaluations (the same settings run again)
are reduced to the newest, and the count of those is printed. ``--columns`` prints one table
with the columns named instead (dotted paths into the result records, e.g.
``--columns training.steps:0,training.valid_ppl,metrics.rouge1``): the generated tables of
``docs/results.md`` (``scripts/reproduce.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import Command
from ._common import USER_ERRORS, add_overwrite_argument, error, refuse_existing, write_json

__all__ = ["COMMAND"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``report``."""
    parser.add_argument("runs_dir", type=Path, metavar="RUNS_DIR", help="folder holding runs and result files")
    parser.add_argument("--split", default=None, help="only results on this split")
    parser.add_argument("--output", type=Path, default=None, help="also write the markdown here")
    parser.add_argument("--json", type=Path, default=None, help="write all collected results as one JSON list")
    add_overwrite_argument(parser, "--output and --json")
    parser.add_argument("--title", default="Results", help="the report's heading")
    parser.add_argument(
        "--columns",
        default=None,
        metavar="PATH[:DECIMALS],...",
        help="one table with these columns (dotted paths into the results, e.g. "
        "training.steps:0,training.valid_ppl,metrics.rouge1)",
    )


def run(args: argparse.Namespace) -> int:
    """Execute ``report``; returns 0 on success, 1 on an error (also when nothing is found)."""
    from ..evaluation.report import collect_results, columns_table, markdown_report, select_results

    try:
        refuse_existing("--output", [args.output], args.overwrite)
        refuse_existing("--json", [args.json], args.overwrite)
        results = collect_results(args.runs_dir)
        if not results:
            raise ValueError(f"{args.runs_dir}: no result files found (run evaluate or baseline --output-dir first)")
        if args.split is not None:
            splits = sorted({str(r.get("split")) for r in results})
            results = [r for r in results if r.get("split") == args.split]
            if not results:
                raise ValueError(f"--split {args.split}: no result is on it (the results' splits: {', '.join(splits)})")
        if args.columns is not None:
            text = columns_table(results, [c.strip() for c in args.columns.split(",") if c.strip()])
        else:
            text = markdown_report(results, title=args.title)
        if args.output is not None:
            args.output.parent.mkdir(parents=True, exist_ok=True)
            args.output.write_text(text, encoding="utf-8")
        if args.json is not None:
            write_json(results, args.json)
    except USER_ERRORS as err:
        return error("report", err)
    kept, superseded = select_results(results)
    print(text)
    note = f" ({len(superseded)} older copies of identical evaluations left out)" if superseded else ""
    print(f"report: {len(kept)} result(s) from {len(results)} file(s) in {args.runs_dir}{note}", file=sys.stderr)
    return 0


COMMAND = Command(
    name="report",
    help="collect every evaluation and baseline result under a folder into one table",
    add_arguments=add_arguments,
    run=run,
)
