"""The ``scg-summarize baseline`` subcommand: ROUGE of extractive baselines on a prepared split.

Examples::

    scg-summarize baseline --method first --data data/scitldr --split test
    scg-summarize baseline --method all --data data/cnndm --split test --output-dir runs/baselines
    scg-summarize baseline --method prefix --limit-bytes 75 --measure recall --data data/duc --split test

Methods: ``first`` (first sentence), ``lead3`` (first ``--k`` sentences, default 3), ``prefix``
(first ``--bytes`` bytes, default 75), ``textrank`` (``--k`` sentences by PageRank), or ``all``.
Each result is written as ``<output-dir>/<method>-<data>-<split>.json`` when ``--output-dir`` is
given (``lead3-cnndm-test.json``; a non-default parameter or ROUGE option is added to the name,
see :mod:`scg_summarize.evaluation.naming`, and a result with other settings is never replaced
without ``--overwrite``), so that ``scg-summarize report`` puts the baselines into the same table
as the models.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import Command
from ._common import USER_ERRORS, add_rouge_arguments, error, positive_int, rouge_options, write_jsonl

__all__ = ["COMMAND"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``baseline``."""
    from ..choices import BASELINES

    parser.add_argument(
        "--method",
        action="append",
        choices=[*BASELINES, "all"],
        required=True,
        help="the baseline (repeatable; 'all' runs every one)",
    )
    parser.add_argument("--data", required=True, type=Path, metavar="DIR", help="a prepared corpus")
    parser.add_argument("--split", default="test", help="split to evaluate (default test)")
    parser.add_argument("--k", type=positive_int, default=None, help="sentences for lead3/textrank (default 3)")
    parser.add_argument("--bytes", type=positive_int, default=None, help="bytes for prefix (default 75)")
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=None,
        help="evaluate only the first N examples of the split, in its stored order (not a sample)",
    )
    parser.add_argument("--output-dir", type=Path, default=None, help="write result JSON files here")
    parser.add_argument("--summaries", action="store_true", help="also write the summaries (needs --output-dir)")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace existing result files even when their settings differ"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_rouge_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Execute ``baseline``; returns 0 on success, 1 on an error."""
    from ..choices import BASELINES
    from ..data.dataset import SummarizationDataset
    from ..data.progress import Progress, progress_enabled
    from ..evaluation.baselines import get_baseline
    from ..evaluation.naming import baseline_stem, write_result_safely
    from ..evaluation.report import markdown_report
    from ..evaluation.runner import evaluate_baseline

    methods = list(BASELINES) if "all" in args.method else list(dict.fromkeys(args.method))
    results = []
    try:
        if args.summaries and args.output_dir is None:
            raise ValueError("--summaries needs --output-dir")
        if args.output_dir is not None and args.output_dir.exists() and not args.output_dir.is_dir():
            raise ValueError(f"--output-dir {args.output_dir}: a file; expected a directory for the result files")
        for flag, value, readers in (("--bytes", args.bytes, ("prefix",)), ("--k", args.k, ("lead3", "textrank"))):
            if value is not None and not set(methods) & set(readers):
                raise ValueError(
                    f"{flag} sets {' and '.join(readers)}, which --method {' '.join(methods)} does not run"
                )
        dataset = SummarizationDataset(args.data, args.split)
        rouge = rouge_options(args, digits_mapped=False)
        for method in methods:
            param = args.bytes if method == "prefix" else (args.k if method in ("lead3", "textrank") else None)
            baseline = get_baseline(method, param)
            total = len(dataset) if args.limit is None else min(args.limit, len(dataset))
            with Progress(f"{baseline.name} {args.split}", total, enabled=progress_enabled(args.quiet)) as bar:
                result, outputs = evaluate_baseline(baseline, dataset, rouge, limit=args.limit, progress=bar.update)
            results.append(result)
            if args.output_dir is not None:
                stem = baseline_stem(baseline, Path(args.data).name, args.split, rouge)
                path = write_result_safely(
                    result, args.output_dir / f"{stem}.json", overwrite=args.overwrite, option="--output-dir"
                )
                print(f"baseline: wrote {path}", file=sys.stderr)
                if args.summaries:
                    write_jsonl(outputs, args.output_dir / f"{stem}.summaries.jsonl")
    except USER_ERRORS as err:
        return error("baseline", err)
    print(markdown_report(results, title=f"Baselines on {Path(args.data).name}/{args.split}"))
    return 0


COMMAND = Command(
    name="baseline",
    help="ROUGE of extractive baselines (FIRST, LEAD-3, PREFIX-75, TextRank) on a prepared split",
    add_arguments=add_arguments,
    run=run,
)
