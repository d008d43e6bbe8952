"""Options shared by the ``summarize``, ``evaluate`` and ``baseline`` subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..evaluation.rouge import RougeOptions


__all__ = [
    "CORPUS_DIR",
    "RUN_DIR",
    "USER_ERRORS",
    "add_overwrite_argument",
    "add_rouge_arguments",
    "error",
    "non_negative_int",
    "positive_int",
    "refuse_existing",
    "require_dirs",
    "rouge_options",
    "same_file",
    "set_threads",
    "write_jsonl",
]

#: Exceptions that mean bad input or usage (reported in one line by `error`, exit status 2).
USER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,  # (the data pipeline's, the run loader's and the checkpoint reader's errors are ones)
    KeyError,
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
)


def _int_at_least(text: str, low: int, expected: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """``argparse`` type: an integer >= 0."""
    return _int_at_least(text, 0, "an integer >= 0")


def positive_int(text: str) -> int:
    """``argparse`` type: an integer >= 1."""
    return _int_at_least(text, 1, "a positive integer")


def error(command: str, err: BaseException | str, status: int = 2) -> int:
    """Print ``scg-summarize COMMAND: error: ...`` to stderr; returns ``status`` (2: the commands
    catch bad input here, which exits with 2 in every subcommand, like argparse's usage errors)."""
    message = err.args[0] if isinstance(err, KeyError) and err.args else err
    if isinstance(err, OSError) and err.filename is not None and err.strerror:  # not "[Errno 2] ..."
        message = f"{err.filename}: {err.strerror.lower()}"
    print(f"scg-summarize {command}: error: {message}", file=sys.stderr)
    return status


#: what ``--run`` and ``--data`` name, for `require_dirs`
RUN_DIR = "a run directory written by scg-summarize train"
CORPUS_DIR = "a corpus written by scg-summarize prepare"


def require_dirs(args: argparse.Namespace, expected: Mapping[str, str]) -> None:
    """Refuse, naming the option as the user typed it, a directory option that names no directory
    (``expected``: option -> what it should be, e.g. ``{"--data": CORPUS_DIR}``; an option not
    given passes). The library's check (``load_run(data_dir=...): no such directory``) names its own
    argument, which the user of the command line never typed."""
    for option, what in expected.items():
        given = getattr(args, option.lstrip("-").replace("-", "_"), None)
        if given is None or Path(given).is_dir():
            continue
        found = "a file, not a directory" if Path(given).exists() else "no such directory"
        raise ValueError(f"{option} {given}: {found}; expected {what}")


def set_threads(args: argparse.Namespace) -> None:
    """Apply ``--threads`` (small models decode faster on one thread than on many busy ones)."""
    if getattr(args, "threads", 0) > 0:
        import torch

        torch.set_num_threads(args.threads)


def add_rouge_arguments(parser: argparse.ArgumentParser) -> None:
    """ROUGE options (references, stemming, DUC-style limits, digit matching)."""
    from ..choices import ROUGE_SCORES

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
    group.add_argument(
        "--metrics", default=",".join(ROUGE_SCORES), help=f"comma-separated (default {','.join(ROUGE_SCORES)})"
    )


def rouge_options(args: argparse.Namespace, digits_mapped: bool = False) -> RougeOptions:
    """:class:`RougeOptions` from parsed arguments; ``digits_mapped`` resolves ``auto``."""
    from ..evaluation.rouge import RougeOptions

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


def add_overwrite_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup, what: str) -> None:
    """``--overwrite``: replace ``what`` when it exists (`refuse_existing` otherwise refuses)."""
    parser.add_argument("--overwrite", action="store_true", help=f"replace {what} when it exists")


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` name the same file (through links, relative paths)."""
    a, b = Path(a), Path(b)
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return a.resolve() == b.resolve()


def refuse_existing(
    option: str,
    paths: Iterable[str | Path | None],
    overwrite: bool,
    inputs: Mapping[str, str | Path | None] | None = None,
) -> None:
    """Refuse, before any work, output paths of ``option`` that already exist (a file the user may
    have made), unless ``--overwrite`` was given; directories, and paths under a file
    (``--overwrite`` would not make them writable); and any of the command's ``inputs`` (what
    names each: ``{"A": path}``), which writing would erase before they are read. ``None``
    entries (an option not given) pass."""
    for path in paths:
        if path is None:
            continue
        path = Path(path)
        if path.is_dir():
            raise ValueError(f"{option} {path}: a directory; expected the path of a file to write")
        for name, given in (inputs or {}).items():
            if given is not None and same_file(given, path):
                raise ValueError(
                    f"{option} {path}: it is the {name} file, which writing would erase; choose another path"
                )
        parent = next((p for p in path.parents if p.exists()), None)
        if parent is not None and not parent.is_dir():
            raise ValueError(f"{option} {path}: {parent} is a file, not a folder")
        if not overwrite and path.exists():
            raise ValueError(f"{option} {path}: it exists; pass --overwrite to replace it")


def write_json(value: Any, path: str | Path) -> str:
    """Write ``value`` as indented JSON (parent folders created); returns the text (for printing)."""
    path = Path(path)
    text = json.dumps(value, indent=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n", encoding="utf-8")
    return text


def write_jsonl(records: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """Write one JSON object per line (parent folders created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path
