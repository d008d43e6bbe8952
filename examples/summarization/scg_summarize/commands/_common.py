"""Options shared by the ``summarize``, ``evaluate`` and ``baseline`` subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..decoding.loading import RunLoadError
from ..decoding.options import UNK_MODES, DecodeOptions
from ..evaluation.rouge import METRICS, RougeOptions

__all__ = [
    "USER_ERRORS",
    "add_decode_arguments",
    "add_rouge_arguments",
    "decode_options",
    "error",
    "positive_int",
    "rouge_options",
    "set_threads",
    "write_jsonl",
]

#: Exceptions that mean bad input or usage (reported in one line, exit status 1).
USER_ERRORS: tuple[type[BaseException], ...] = (
    RunLoadError,
    ValueError,
    KeyError,
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
)


def error(command: str, err: BaseException | str) -> int:
    """Print ``scg-summarize COMMAND: error: ...`` to stderr; returns exit status 1."""
    message = err.args[0] if isinstance(err, KeyError) and err.args else err
    print(f"scg-summarize {command}: error: {message}", file=sys.stderr)
    return 1


def positive_int(text: str) -> int:
    """``argparse`` type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def add_decode_arguments(parser: argparse.ArgumentParser) -> None:
    """Search options (beam, lengths, normalization, blocking, ``<unk>``, coarse top-k)."""
    group = parser.add_argument_group("decoding")
    group.add_argument("--beam", type=positive_int, default=5, help="beam size (default 5)")
    group.add_argument("--greedy", action="store_true", help="greedy search instead of beam search")
    group.add_argument("--max-len", type=positive_int, default=100, help="most words per summary (default 100)")
    group.add_argument("--min-len", type=int, default=0, help="fewest words per summary (default 0)")
    group.add_argument(
        "--length-penalty",
        type=float,
        default=1.0,
        metavar="ALPHA",
        help="rank finished hypotheses by log-prob / (length + 1) ** ALPHA (default 1; 0 = none)",
    )
    group.add_argument(
        "--no-repeat-ngram",
        type=int,
        default=0,
        metavar="N",
        help="forbid repeating any N-gram (3 = trigram blocking; default 0 = off)",
    )
    group.add_argument("--unk", choices=UNK_MODES, default="allow", help="<unk> handling (default allow)")
    group.add_argument(
        "--coarse-topk",
        type=positive_int,
        default=None,
        metavar="K",
        help="chunks read per step by C2F at test time (1 = argmax; >1 = +MULTI; default: the run's setting)",
    )
    group.add_argument("--batch-size", type=positive_int, default=32)
    group.add_argument("--checkpoint", default=None, help="a specific checkpoint of the run (default: the best)")
    group.add_argument("--device", default="cpu")
    group.add_argument("--threads", type=int, default=0, help="torch CPU threads (default 0: torch's choice)")


def set_threads(args: argparse.Namespace) -> None:
    """Apply ``--threads`` (small models decode faster on one thread than on many busy ones)."""
    if getattr(args, "threads", 0) > 0:
        import torch

        torch.set_num_threads(args.threads)


def decode_options(args: argparse.Namespace, extras: Iterable[str] = ()) -> DecodeOptions:
    """:class:`DecodeOptions` from parsed arguments (raises ``ValueError`` naming the option)."""
    try:
        return DecodeOptions(
            beam_size=args.beam,
            greedy=args.greedy,
            max_len=args.max_len,
            min_len=args.min_len,
            length_penalty=args.length_penalty,
            no_repeat_ngram=args.no_repeat_ngram,
            unk=args.unk,
            n_best=getattr(args, "n_best", 1),
            extras=tuple(extras),
        )
    except ValueError as err:
        raise ValueError(f"bad decoding option: {err}") from None


def add_rouge_arguments(parser: argparse.ArgumentParser) -> None:
    """ROUGE options (references, stemming, DUC-style limits, digit matching)."""
    group = parser.add_argument_group("ROUGE")
    group.add_argument(
        "--refs",
        choices=("all", "first", "concat", "pool"),
        default="all",
        help="score against all references (max), the first one, all joined, or pooled as ROUGE-1.5.5 "
        "(hits and counts summed over references; default all)",
    )
    group.add_argument("--no-stemming", action="store_true", help="turn Porter stemming off")
    group.add_argument("--limit-bytes", type=positive_int, default=None, help="truncate summaries (75 for DUC)")
    group.add_argument(
        "--measure",
        choices=("f", "recall", "precision"),
        default="f",
        help="report F1 (default), recall (DUC) or precision",
    )
    group.add_argument(
        "--hash-digits",
        choices=("auto", "on", "off"),
        default="auto",
        help="map digits and '#' to 0 on both sides (auto: on for models trained with digit mapping)",
    )
    group.add_argument("--metrics", default=",".join(METRICS), help=f"comma-separated (default {','.join(METRICS)})")


def rouge_options(args: argparse.Namespace, digits_mapped: bool = False) -> RougeOptions:
    """:class:`RougeOptions` from parsed arguments; ``digits_mapped`` resolves ``auto``."""
    hash_digits = {"on": True, "off": False, "auto": digits_mapped}[args.hash_digits]
    metrics = tuple(m.strip() for m in args.metrics.split(",") if m.strip())
    try:
        return RougeOptions(
            metrics=metrics,
            stemming=not args.no_stemming,
            refs=args.refs,
            measure=args.measure,
            limit_bytes=args.limit_bytes,
            hash_digits=hash_digits,
        )
    except ValueError as err:
        raise ValueError(f"bad ROUGE option: {err}") from None


def write_jsonl(records: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """Write one JSON object per line (parent folders created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path
