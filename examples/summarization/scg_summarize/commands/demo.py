"""The ``scg-summarize demo`` subcommand: train small STANDARD and C2F+MULTI2 models and compare.

Examples::

    scg-summarize demo                                  # synthetic corpus, about 2 CPU minutes
    scg-summarize demo --steps 1200 --out demo-long
    scg-summarize demo --data data/scitldr --configs small-STANDARD small-C2F+MULTI2

Prints a table (steps, PPL, ROUGE-1/2/L, coarse-attention accuracy, attention entropy, fraction
of words read) that is the same on every machine (a fixed number of seeded steps on one thread),
then the CPU and wall-clock seconds, and a warning for a model that has not left its plateau.
Writes ``OUT/results.{md,json}``, ``OUT/timings.md`` and ``OUT/heatmap.png``. An ``OUT`` that
holds the results of a demo, or a run in ``OUT/CONFIG``, is not trained over again unless
``--overwrite`` is given (the generated corpus in ``OUT/data`` is reused either way).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import Command
from ._common import CORPUS_DIR, USER_ERRORS, error, positive_int, require_dirs

__all__ = ["COMMAND"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", type=Path, default=None, help="a prepared corpus (default: generate the synthetic one)"
    )
    parser.add_argument("--out", type=Path, default=Path("demo-run"), help="output directory (default: demo-run)")
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=450,  # demo.DEFAULT_STEPS (not imported: --help stays light)
        help="training steps per model (default 450; above 150 a multiple of 150)",
    )
    parser.add_argument("--configs", nargs="+", default=None, help="configurations to compare")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="TABLE.KEY=VALUE",
        help="override a configuration value of every model",
    )
    parser.add_argument(
        "--n-train", type=positive_int, default=10000, help="synthetic training documents (default 10000)"
    )
    parser.add_argument("--n-eval", type=positive_int, default=200, help="synthetic validation/test documents")
    parser.add_argument("--seed", type=int, default=0, help="synthetic corpus seed")
    parser.add_argument("--verbose", action="store_true", help="show training progress")
    parser.add_argument(
        "--overwrite", action="store_true", help="train again into an OUT that holds a demo's results or runs"
    )


def run(args: argparse.Namespace) -> int:
    from ..demo import DEFAULT_CONFIGS, run_demo

    if args.out.exists() and not args.out.is_dir():
        return error("demo", f"--out {args.out}: an existing file; expected a directory (new, or a demo's)")
    try:
        require_dirs(args, {"--data": CORPUS_DIR})
        run_demo(
            args.out,
            data=args.data,
            configs=args.configs or DEFAULT_CONFIGS,
            steps=args.steps,
            overrides=args.set,
            n_train=args.n_train,
            n_eval=args.n_eval,
            seed=args.seed,
            overwrite=args.overwrite,
            quiet=not args.verbose,
            log=lambda line: print(line, flush=True),
        )
    except USER_ERRORS as err:
        return error("demo", err)
    return 0


COMMAND = Command(
    name="demo",
    help="train small STANDARD and C2F+MULTI2 models on a synthetic corpus and compare them",
    add_arguments=add_arguments,
    run=run,
)
