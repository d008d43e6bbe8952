"""The ``scg-summarize compare`` subcommand: is system A's ROUGE really better than B's?

Example::

    scg-summarize compare runs/c2f/eval/test.summaries.jsonl baselines/first-test.summaries.jsonl

Pairs the two files' examples by id (files that score different examples are refused, or with
``--shared`` compared on the examples both score, with their count) and prints, per metric, both
means, the difference with its paired-bootstrap interval and the one-sided p-value
(:mod:`scg_summarize.evaluation.significance`). Scores are shown x 100, like the ROUGE tables.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path

from . import Command
from ._common import USER_ERRORS, add_overwrite_argument, error, positive_int, refuse_existing, write_json

__all__ = ["COMMAND"]


def _resamples(text: str) -> int:
    """``argparse`` type: at least 100 resamples (fewer give an interval that means nothing: one
    resample reported an interval and p = 1.0)."""
    value = positive_int(text)
    if value < 100:
        raise argparse.ArgumentTypeError(f"expected at least 100 resamples, got {value}")
    return value


def _level(text: str) -> float:
    """``argparse`` type: an interval coverage strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1 (e.g. 0.95), got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``compare``."""
    parser.add_argument("a", type=Path, metavar="A.summaries.jsonl", help="the system under test")
    parser.add_argument("b", type=Path, metavar="B.summaries.jsonl", help="the reference system")
    parser.add_argument("--metrics", default="rouge1,rouge2,rougeL", help="comma-separated (default %(default)s)")
    parser.add_argument(
        "--samples", type=_resamples, default=10_000, help="bootstrap resamples (at least 100; default %(default)s)"
    )
    parser.add_argument("--level", type=_level, default=0.95, help="interval coverage (default 0.95)")
    parser.add_argument("--seed", type=int, default=0, help="resampling seed")
    parser.add_argument("--json", type=Path, default=None, help="also write the comparison as JSON")
    add_overwrite_argument(parser, "--json")
    parser.add_argument(
        "--shared",
        action="store_true",
        help="when the files score different examples, compare them on the examples both score",
    )


def run(args: argparse.Namespace) -> int:
    """Execute ``compare``; returns 0 on success, 2 on bad input (one line naming the file and line)."""
    from ..evaluation.significance import paired_bootstrap, read_per_example

    try:
        refuse_existing("--json", [args.json], args.overwrite, inputs={"A": args.a, "B": args.b})
        rows = []
        metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
        if not metrics:
            raise ValueError(f"--metrics: no metric named in {args.metrics!r}")
        scores_a, scores_b = read_per_example(args.a, metrics), read_per_example(args.b, metrics)
        for metric in metrics:
            a, b = scores_a[metric], scores_b[metric]
            shared = sorted(set(a) & set(b))
            if set(a) != set(b):
                counts = f"A scores {len(a)} examples, B {len(b)}, {len(shared)} of them both"
                if not shared:
                    raise ValueError(f"{args.a} and {args.b} score different examples, none in common ({counts})")
                if not args.shared:
                    raise ValueError(
                        f"{args.a} and {args.b} score different examples ({counts}, e.g. "
                        f"{sorted(set(a) ^ set(b))[0]!r} only in one); pass --shared to compare them on "
                        f"the {len(shared)} shared examples, or evaluate both with the same --limit"
                    )
                if metric == metrics[0]:
                    print(f"compare: on the {len(shared)} examples both files score ({counts})", file=sys.stderr)
            ids = shared
            result = paired_bootstrap(
                [a[i] for i in ids], [b[i] for i in ids], samples=args.samples, level=args.level, seed=args.seed
            )
            rows.append((metric, result))
    except USER_ERRORS + (OSError,) as err:
        return error("compare", err)
    level = round(args.level * 100)
    print(f"A = {args.a}\nB = {args.b}\n")
    print(f"| metric | A | B | A − B | {level}% interval | p (A ≤ B) | n |")
    print("|---|---:|---:|---:|---|---:|---:|")
    for metric, r in rows:
        print(
            f"| {metric} | {100 * r.mean_a:.2f} | {100 * r.mean_b:.2f} | {100 * r.diff:+.2f} | "
            f"[{100 * r.low:+.2f}, {100 * r.high:+.2f}] | {r.p_value:.4f} | {r.n} |"
        )
    if args.json is not None:
        record = {"a": str(args.a), "b": str(args.b), "results": {m: asdict(r) for m, r in rows}}
        write_json(record, args.json)
    print(f"compare: paired bootstrap, {args.samples} resamples, seed {args.seed}", file=sys.stderr)
    return 0


COMMAND = Command(
    name="compare",
    help="paired bootstrap of two systems' per-example ROUGE (difference, interval, p-value)",
    add_arguments=add_arguments,
    run=run,
)
