"""The ``scg-summarize prepare`` subcommand (registered through :data:`COMMAND`); its options and
their checks are ``._prepare_args``.

Examples::

    scg-summarize prepare --format cnndm --input train=cnn/stories --output data/cnndm
    scg-summarize prepare --format jsonl --input train=train.jsonl --input valid=dev.jsonl \\
        --source-field document --target-field summary --output data/xsum
    scg-summarize prepare --format parallel --input train=sumdata/train --output data/giga
    scg-summarize prepare --format synthetic --output data/synthetic
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..dirlock import DirLock, LockedError
from . import Command
from ._prepare_args import add_arguments, parse_input_spec, usage_problems

if TYPE_CHECKING:
    from ..data.options import PrepOptions
    from ..data.prepare import InputSource
    from ..data.readers import ReaderConfig
    from ..data.vocab import Vocab


__all__ = ["COMMAND", "run"]

_DEFAULT_GRID = {"real": (10, 40), "synthetic": (8, 16)}


def _unescape(text: str | None) -> str | None:
    if text is None:
        return None
    return text.replace("\\n", "\n").replace("\\t", "\t")


def _options(args: argparse.Namespace) -> PrepOptions:
    from ..data.options import PrepOptions

    default_m, default_n = _DEFAULT_GRID["real"]
    tokenizer = args.tokenizer
    if tokenizer == "auto":
        tokenizer = "whitespace" if args.format == "parallel" else "ptb"
    return PrepOptions(
        lowercase=not args.no_lowercase,
        digits_to_hash=not args.no_digit_map,
        tokenizer=tokenizer,
        split_sentences=not args.no_sentence_split,
        layout=args.layout,
        num_chunks=args.chunks or default_m,
        chunk_len=args.chunk_len or default_n,
        vocab_size=args.vocab_size,
        min_freq=args.min_freq,
        max_target_len=args.max_target_len,
        target_mode=args.target_mode,
        max_line_chars=args.max_line_chars,
        max_stored_sentences=args.max_stored_sentences,
    )


def _inputs(args: argparse.Namespace, config: ReaderConfig) -> list[InputSource]:
    from ..data.errors import BadInputReport, DataError
    from ..data.prepare import InputSource
    from ..data.readers import read_input

    sources = []
    for spec in args.input:
        split, path = parse_input_spec(spec)
        if not path.exists() and args.format != "parallel":
            raise DataError("no such file or directory", path, reason="missing_input")

        def opener(report: BadInputReport, path: Path = path) -> Any:
            stream: Any = read_input(args.format, path, config, report=report)
            return stream

        sources.append(InputSource(name=str(path), split=split, open=opener))
    return sources


def _field_vocabs(args: argparse.Namespace) -> None:
    """``--field-vocab-min-freq N``: the separate article and title vocabularies (:mod:`.field_vocabs`)."""
    from ..data.field_vocabs import write_field_vocabs

    if args.field_vocab_min_freq:
        fields = write_field_vocabs(args.output, args.field_vocab_min_freq)
        _log(
            f"field vocabularies (words seen >= {args.field_vocab_min_freq} times in train): "
            f"{len(fields.src_ids)} article words (src_vocab.txt), {len(fields.tgt_ids)} title words (tgt_vocab.txt)"
        )


def _log(line: str) -> None:
    print(line, file=sys.stderr)


def _run_synthetic(args: argparse.Namespace, show: bool) -> dict[str, Any]:
    from ..data.synthetic import SyntheticConfig, make_synthetic_corpus

    m, n = _DEFAULT_GRID["synthetic"]
    return make_synthetic_corpus(
        args.output,
        args.n_train,
        args.n_valid,
        args.n_test,
        num_chunks=args.chunks or m,
        chunk_len=args.chunk_len or n,
        seed=args.seed,
        config=SyntheticConfig(),
        overwrite=args.overwrite,
        show_progress=show,
        log=_log,
    )


def _given_vocab(path: str | None) -> Vocab | None:
    """``--vocab``'s vocabulary (None: built from the corpus); a missing file named as the option's."""
    from ..data.vocab import Vocab

    if not path:
        return None
    if not Path(path).is_file():
        raise FileNotFoundError(f"--vocab {path}: no such file")
    return Vocab.load(path)


def run(args: argparse.Namespace) -> int:
    """Execute ``prepare``; returns 0 on success, 1 on an error, 2 on bad usage (or an output
    directory that another process is writing: the lock names its pid)."""
    problems = usage_problems(args)
    if problems:
        for line in problems:
            print(f"prepare: error: {line}", file=sys.stderr)
        return 2
    try:
        lock = DirLock(args.output, "scg-summarize prepare").acquire()
    except LockedError as err:
        print(f"prepare: error: {err}", file=sys.stderr)
        return 2
    try:
        return _run_locked(args)
    finally:
        lock.release()


def _run_locked(args: argparse.Namespace) -> int:
    from ..data.errors import DataError
    from ..data.prepare import prepare_corpus
    from ..data.progress import progress_enabled
    from ..data.readers import ReaderConfig
    from ..data.storage import META_FILE

    show = progress_enabled(args.quiet)
    try:
        if args.format == "synthetic":
            _run_synthetic(args, show)
            _field_vocabs(args)
            return 0
        config = ReaderConfig(
            source_field=args.source_field,
            target_field=args.target_field,
            id_field=args.id_field,
            target_sep=_unescape(args.target_sep),
            max_line_chars=args.max_line_chars,
            gigaword_filters=tuple(args.gigaword_filter or ()),
        )
        fractions = {"valid": args.valid_fraction, "test": args.test_fraction}
        prepare_corpus(
            _inputs(args, config),
            args.output,
            _options(args),
            vocab=_given_vocab(args.vocab),
            split_fractions={k: v for k, v in fractions.items() if v > 0},
            skip_bad=args.skip_bad,
            overwrite=args.overwrite,
            limit=args.limit,
            show_progress=show,
            extra_meta={"source_format": args.format},
            log=_log,
        )
        _field_vocabs(args)
    except DataError as err:
        print(f"prepare: error: {err}", file=sys.stderr)
        if not args.skip_bad and err.skippable:
            print("prepare: (use --skip-bad to skip and count bad records)", file=sys.stderr)
        return 2
    except (FileExistsError, FileNotFoundError, ValueError) as err:
        print(f"prepare: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a full disk, a read-only folder...: one line, and what is left behind
        state = (
            f"{args.output} holds an incomplete corpus (no {META_FILE}: it is never taken for a prepared one)"
            if not (args.output / META_FILE).exists()
            else f"the corpus in {args.output} is complete, the field vocabularies are not"
        )
        print(
            f"prepare: error: {err.strerror or err} while writing {err.filename or args.output}: {state}; nothing "
            f"else was changed; make room and run prepare again with --overwrite",
            file=sys.stderr,
        )
        return 1
    return 0


COMMAND = Command(
    name="prepare",
    help="read a corpus (CNN/DM, JSON lines, parallel text or synthetic) and preprocess it",
    add_arguments=add_arguments,
    run=run,
)
