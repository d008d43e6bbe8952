"""The command line of ``scg-summarize prepare``: its options (`add_arguments`, `parse_input_spec`)
and every check of their values before any work (`usage_problems`): numbers in range, options the
``--format`` reads, split names that look misspelt, fractions that would split nothing.
"""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from ..choices import CORPUS_FORMATS

__all__ = ["add_arguments", "parse_input_spec", "usage_problems"]


def parse_input_spec(spec: str) -> tuple[str | None, Path]:
    """``"valid=dev.jsonl"`` -> ``("valid", Path("dev.jsonl"))``; a bare path has no split.

    A ``=`` counts as a split prefix only when the part before it is a plain name, so paths
    containing ``=`` still work.
    """
    name, sep, path = spec.partition("=")
    if sep and name and name.replace("_", "").replace("-", "").isalnum() and path:
        return name, Path(path)
    if sep and name and path and "/" not in name and not Path(spec).exists():
        raise ValueError(
            f"--input {spec!r}: invalid split name {name!r} (expected letters, digits, _ and -, as in valid=dev.jsonl)"
        )
    return None, Path(spec)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prepare``."""
    from ..choices import CORPUS_FORMATS, LAYOUTS

    io = parser.add_argument_group("input and output")
    io.add_argument("--format", required=True, choices=[*CORPUS_FORMATS, "synthetic"])
    io.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="[SPLIT=]PATH",
        help="an input (repeatable); SPLIT= names its split, a bare path is "
        "split by --valid-fraction/--test-fraction (default: all train)",
    )
    io.add_argument("--output", required=True, type=Path, metavar="DIR")
    io.add_argument(
        "--skip-bad",
        action="store_true",
        help="skip and count malformed records instead of stopping",
    )
    io.add_argument("--overwrite", action="store_true", help="replace a prepared corpus in DIR")
    io.add_argument("--quiet", action="store_true", help="no progress display")
    io.add_argument("--limit", type=int, default=None, help="read at most N examples per input")
    io.add_argument("--valid-fraction", type=float, default=0.0)
    io.add_argument("--test-fraction", type=float, default=0.0)
    io.add_argument("--vocab", type=Path, default=None, help="use this vocab.txt instead of counting one")
    fields = parser.add_argument_group("fields (jsonl and cnndm JSON lines)")
    fields.add_argument("--source-field", default=None)
    fields.add_argument("--target-field", default=None)
    fields.add_argument("--id-field", default="id")
    fields.add_argument(
        "--target-sep",
        default=None,
        help="split a string target into several references (e.g. '\\n')",
    )
    fields.add_argument("--max-line-chars", type=int, default=1_000_000)
    fields.add_argument(
        "--gigaword-filter",
        action="append",
        choices=("all", "no_overlap", "byline", "question_colon"),
        default=None,
        help="parallel format: drop title-article pairs as Rush et al. (2015) (repeatable; counted in meta.json)",
    )
    prep = parser.add_argument_group("preprocessing")
    prep.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="grid",
        help="grid: first M*N words in M chunks; sentences: one sentence per chunk",
    )
    prep.add_argument("--chunks", type=int, default=None, metavar="M", help="chunks (10; synthetic 8)")
    prep.add_argument("--chunk-len", type=int, default=None, metavar="N", help="words per chunk (40; synthetic 16)")
    prep.add_argument("--vocab-size", type=int, default=50_000, help="V most frequent words")
    prep.add_argument("--min-freq", type=int, default=1, help="drop rarer words")
    prep.add_argument(
        "--field-vocab-min-freq",
        type=int,
        default=0,
        metavar="N",
        help="also write separate article and title vocabularies (src_vocab.txt, tgt_vocab.txt): "
        "the words seen >= N times in the training articles / titles (the abs family's "
        "V_x and V_y; Rush et al. 2015: 5); 0: none",
    )
    prep.add_argument("--max-target-len", type=int, default=100, help="0: no limit")
    prep.add_argument("--target-mode", choices=("first", "concat"), default="first")
    prep.add_argument(
        "--tokenizer",
        choices=("auto", "ptb", "whitespace"),
        default="auto",
        help="auto: whitespace for parallel (pre-tokenized), else ptb",
    )
    prep.add_argument("--no-lowercase", action="store_true")
    prep.add_argument("--no-digit-map", action="store_true")
    prep.add_argument("--no-sentence-split", action="store_true")
    prep.add_argument("--max-stored-sentences", type=int, default=0, help="0: keep all")
    synth = parser.add_argument_group("synthetic corpus (--format synthetic)")
    synth.add_argument("--n-train", type=int, default=2000, help="training examples")
    synth.add_argument("--n-valid", type=int, default=200, help="validation examples")
    synth.add_argument("--n-test", type=int, default=200, help="test examples")
    synth.add_argument("--seed", type=int, default=0, help="generator seed")


#: (option, attribute, smallest allowed value) of the numeric options
_MINIMUMS: tuple[tuple[str, str, int], ...] = (
    ("--chunks", "chunks", 1),
    ("--chunk-len", "chunk_len", 1),
    ("--vocab-size", "vocab_size", 1),
    ("--min-freq", "min_freq", 1),
    ("--field-vocab-min-freq", "field_vocab_min_freq", 0),
    ("--max-target-len", "max_target_len", 0),
    ("--limit", "limit", 1),
    ("--max-line-chars", "max_line_chars", 1),
    ("--max-stored-sentences", "max_stored_sentences", 0),
    ("--n-train", "n_train", 0),
    ("--n-valid", "n_valid", 0),
    ("--n-test", "n_test", 0),
    ("--seed", "seed", 0),
)


#: (destination, the formats that read it) of the options that only some formats read: one
#: given to another format would be accepted and do nothing (``--vocab`` with ``synthetic``)
_APPLIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    *((dest, ("synthetic",)) for dest in ("n_train", "n_valid", "n_test", "seed")),
    *(
        (dest, CORPUS_FORMATS)
        for dest in (
            "limit",
            "valid_fraction",
            "test_fraction",
            "vocab",
            "layout",
            "vocab_size",
            "min_freq",
            "max_target_len",
            "target_mode",
            "tokenizer",
            "no_lowercase",
            "no_digit_map",
            "no_sentence_split",
            "max_stored_sentences",
            "max_line_chars",
        )
    ),
    *((dest, ("cnndm", "jsonl")) for dest in ("source_field", "target_field", "id_field", "target_sep")),
    ("gigaword_filter", ("parallel",)),
)


def _unread_options(args: argparse.Namespace) -> list[str]:
    """The options given a value of their own that ``--format`` does not read (one line each)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    return [
        f"--{dest.replace('_', '-')} does not apply to --format {args.format} (only to {', '.join(formats)})"
        for dest, formats in _APPLIES
        if args.format not in formats and getattr(args, dest, None) != parser.get_default(dest)
    ]


#: the splits training and evaluation read unless told otherwise (``data.*_split``)
_STANDARD_SPLITS = ("train", "valid", "test")


def _misspelt_split(split: str | None) -> str | None:
    """The standard split that ``split`` is a near miss of (``trian``, ``vaild``), or None: any
    other name is a split of its own (``dev``, ``extra``), which a misspelling would silently make
    (``train`` would then find no training split, and the vocabulary be counted on every split)."""
    if split is None or split in _STANDARD_SPLITS:
        return None
    close = difflib.get_close_matches(split, _STANDARD_SPLITS, n=1, cutoff=0.8)
    return close[0] if close else None


def usage_problems(args: argparse.Namespace) -> list[str]:
    """Every bad option value (one line each; ``--chunks 0`` must not silently mean the default)."""
    if args.format == "synthetic" and args.input:
        return ["--format synthetic takes no --input"]
    if args.format != "synthetic" and not args.input:
        return [f"--format {args.format} needs at least one --input"]
    unread = _unread_options(args)
    if unread:
        return unread
    problems = [
        f"{flag}: expected an integer >= {low}, got {getattr(args, attr)}"
        for flag, attr, low in _MINIMUMS
        if getattr(args, attr) is not None and getattr(args, attr) < low
    ]
    for flag in ("valid_fraction", "test_fraction"):
        value = getattr(args, flag)
        if not 0.0 <= value < 1.0:
            problems.append(f"--{flag.replace('_', '-')}: expected a fraction in [0, 1), got {value}")
    if args.output.exists() and not args.output.is_dir():
        problems.append(f"--output {args.output}: an existing file; expected a directory")
    named = []
    for spec in args.input:
        try:
            split = parse_input_spec(spec)[0]
        except ValueError as err:
            problems.append(str(err))
            continue
        named.append(split is not None)
        near = _misspelt_split(split)
        if near is not None:
            problems.append(
                f"--input {spec}: split {split!r} looks like a misspelling of {near!r} (training reads the "
                f"splits train, valid and test); give --input {near}={parse_input_spec(spec)[1]}"
            )
    if named and all(named):  # the fractions split only unnamed inputs: here they would silently do nothing
        for flag in ("valid_fraction", "test_fraction"):
            if getattr(args, flag) > 0:
                problems.append(
                    f"--{flag.replace('_', '-')} splits only inputs given without a split name "
                    f"(--input PATH), but every --input names its split ({', '.join(args.input)}); "
                    f"drop the name (e.g. --input {parse_input_spec(args.input[0])[1]}) or the fraction"
                )
    return problems
