"""The ``scg-summarize evaluate`` subcommand: perplexity, ROUGE and attention metrics of a run.

Example::

    scg-summarize evaluate --run runs/c2f --data data/cnndm --split test --beam 5 --no-repeat-ngram 3

``--data`` defaults to the corpus the run was trained on. The result is written to
``RUN_DIR/eval/<data>-<split>.json`` (or ``--output``), the per-example summaries and scores
next to it (``.summaries.jsonl``), and a markdown table in the layout of the paper's Table 1
is printed. ``scg-summarize report`` collects these files into one table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cli import Command
from ..data.dataset import SummarizationDataset
from ..data.progress import Progress, progress_enabled
from ..decoding.loading import load_run
from ..evaluation.report import markdown_report, write_result
from ..evaluation.runner import evaluate_model
from ._common import (
    USER_ERRORS,
    add_decode_arguments,
    add_rouge_arguments,
    decode_options,
    error,
    positive_int,
    rouge_options,
    set_threads,
    write_jsonl,
)

__all__ = ["COMMAND"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``evaluate``."""
    parser.add_argument("--run", required=True, type=Path, metavar="RUN_DIR", help="a trained run directory")
    parser.add_argument("--data", type=Path, default=None, metavar="DIR", help="prepared corpus (default: the run's)")
    parser.add_argument("--split", default="test", help="split to evaluate (default test)")
    parser.add_argument("--limit", type=positive_int, default=None, help="evaluate only the first N examples")
    parser.add_argument("--output", type=Path, default=None, help="result JSON (default RUN_DIR/eval/DATA-SPLIT.json)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_decode_arguments(parser)
    add_rouge_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Execute ``evaluate``; returns 0 on success, 1 on an error."""
    set_threads(args)
    try:
        loaded = load_run(
            args.run, checkpoint=args.checkpoint, coarse_topk=args.coarse_topk, device=args.device, data_dir=args.data
        )
        data_dir = args.data or loaded.data_dir
        if data_dir is None:
            raise ValueError(f"{args.run}: the run does not record its data directory; pass --data DIR")
        dataset = SummarizationDataset(data_dir, args.split)
        rouge = rouge_options(args, digits_mapped=loaded.prep_options.digits_to_hash)
        total = len(dataset) if args.limit is None else min(args.limit, len(dataset))
        with Progress(f"evaluate {args.split}", total, enabled=progress_enabled(args.quiet)) as bar:
            result, outputs = evaluate_model(
                loaded,
                dataset,
                decode_options(args),
                rouge,
                limit=args.limit,
                batch_size=args.batch_size,
                device=args.device,
                progress=bar.update,
            )
        output = args.output or Path(args.run) / "eval" / f"{Path(data_dir).name}-{args.split}.json"
        write_result(result, output)
        write_jsonl(outputs, output.with_suffix(".summaries.jsonl"))
    except USER_ERRORS as err:
        return error("evaluate", err)
    print(markdown_report([result], title=f"{loaded.model} on {Path(data_dir).name}/{args.split}"))
    print(f"evaluate: wrote {output}", file=sys.stderr)
    return 0


COMMAND = Command(
    name="evaluate",
    help="perplexity, ROUGE and coarse-attention metrics of a trained run on a prepared split",
    add_arguments=add_arguments,
    run=run,
)
