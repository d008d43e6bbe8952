"""The ``scg-summarize demo`` subcommand: train small STANDARD and C2F+MULTI2 models and compare.

Examples::

    scg-summarize demo                                  # synthetic corpus, about 8 CPU minutes
    scg-summarize demo --budget-minutes 10 --out demo
    scg-summarize demo --data data/scitldr --configs small-STANDARD small-C2F+MULTI2

Prints a table (PPL, ROUGE-1/2/L, coarse-attention accuracy, attention entropy, fraction of
words read) and writes ``OUT/results.{md,json}`` and ``OUT/heatmap.png``. An ``OUT`` that already
holds the results of a demo is not trained over again unless ``--overwrite`` is given (the
generated corpus in ``OUT/data`` is reused either way).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cli import Command

__all__ = ["COMMAND"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=None,
                        help="a prepared corpus (default: generate the synthetic one)")
    parser.add_argument("--out", type=Path, default=Path("demo-run"), help="output directory (default: demo-run)")
    parser.add_argument("--budget-minutes", type=float, default=8.0,
                        help="training time for all models together (default 8)")
    parser.add_argument("--configs", nargs="+", default=None, help="configurations to compare")
    parser.add_argument("--set", action="append", default=[], metavar="TABLE.KEY=VALUE",
                        help="override a configuration value of every model")
    parser.add_argument("--n-train", type=int, default=20000, help="synthetic training documents (default 20000)")
    parser.add_argument("--n-eval", type=int, default=200, help="synthetic validation/test documents")
    parser.add_argument("--seed", type=int, default=0, help="synthetic corpus seed")
    parser.add_argument("--verbose", action="store_true", help="show training progress")
    parser.add_argument("--overwrite", action="store_true", help="train again into an OUT that holds a demo's results")


def run(args: argparse.Namespace) -> int:
    from ..demo import DEFAULT_CONFIGS, run_demo

    if (args.out / "results.json").is_file() and not args.overwrite:
        print(f"demo: error: {args.out} already holds the results of a demo ({args.out / 'results.md'}); pass "
              "--overwrite to train again there, or choose another --out", file=sys.stderr)
        return 1
    try:
        run_demo(args.out, data=args.data, configs=args.configs or DEFAULT_CONFIGS,
                 budget_s=args.budget_minutes * 60.0, overrides=args.set, n_train=args.n_train, n_eval=args.n_eval,
                 seed=args.seed, quiet=not args.verbose,
                 log=lambda line: print(line, flush=True))
    except (ValueError, FileNotFoundError, KeyError) as err:
        print(f"demo: error: {err}", file=sys.stderr)
        return 1
    return 0


COMMAND = Command(
    name="demo",
    help="train small STANDARD and C2F+MULTI2 models on a synthetic corpus and compare them",
    add_arguments=add_arguments,
    run=run,
)
