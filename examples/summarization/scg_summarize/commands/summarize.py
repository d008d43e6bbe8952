"""The ``scg-summarize summarize`` subcommand: decode documents with a trained run.

Examples::

    scg-summarize summarize --run runs/c2f --input articles.txt            # one document a line
    scg-summarize summarize --run runs/c2f --input article.txt --format document  # the file is one
    scg-summarize summarize --run runs/c2f --input articles.txt --data data/cnndm   # run without vocab
    cat article.txt | tr '\\n' ' ' | scg-summarize summarize --run runs/c2f --input -
    scg-summarize summarize --run runs/c2f --input docs.jsonl --format jsonl --source-field document
    scg-summarize summarize --run runs/c2f --data data/cnndm --split test --limit 100 \\
        --jsonl --attention --output c2f-test.jsonl                       # for `visualize`

Output: one summary per line (text), or with ``--jsonl`` one JSON object per document:
``id``, ``summary``, ``sentences``, ``tokens``, ``score``, ``log_prob`` (and ``n_best`` with
``--n-best K``). A ``text`` input whose line breaks mostly fall inside sentences (an article
wrapped at a fixed width) is summarized line by line with a warning that points to
``--format document`` (the whole input is one document, blank lines separate paragraphs). A file
of JSON lines given without ``--format`` is refused (the default, text, would summarize each line's
braces and keys as words): ``--format jsonl`` reads it, ``--format text`` takes the lines as text.
``--attention`` adds ``attention``: ``steps`` (the generated words then
``</s>``), ``source`` (the source words per chunk), ``coarse`` (steps x M), ``chunk_read``
(steps x M) and ``word`` (steps x M x N) when the model returns them; ``--jsonl --extras NAMES``
adds the named ones only (``coarse_attn``, ``chunk_read``, ``word_attn``; a name the model does
not return is refused).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from . import Command
from ._common import (
    CORPUS_DIR,
    RUN_DIR,
    USER_ERRORS,
    add_overwrite_argument,
    error,
    positive_int,
    refuse_existing,
    require_dirs,
    same_file,
    set_threads,
)

if TYPE_CHECKING:
    from ..decoding.inputs import SourceDocument
    from ..decoding.summarizer import Summarizer, Summary


__all__ = ["COMMAND", "attention_record", "summary_record"]

ATTENTION_KEYS = ("coarse_attn", "chunk_read", "word_attn")
_JSON_NAMES = {"coarse_attn": "coarse", "chunk_read": "chunk_read", "word_attn": "word"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``summarize``."""
    from ..choices import INPUT_FORMATS
    from ._decoding_args import add_decode_arguments

    parser.add_argument("--run", required=True, type=Path, metavar="RUN_DIR", help="a trained run directory")
    source = parser.add_argument_group("input (one of --input / --data)")
    source.add_argument("--input", default=None, metavar="FILE", help="raw documents ('-' = stdin)")
    source.add_argument(
        "--format",
        choices=(*INPUT_FORMATS, "document"),
        default=None,
        help="of --input: text (default): one document per line; jsonl: JSON objects; document: the whole "
        "input is one document",
    )
    source.add_argument(
        "--source-field", default=None, help="--format jsonl: the document field (string or sentences; default source)"
    )
    source.add_argument(
        "--data",
        type=Path,
        default=None,
        metavar="DIR",
        help="a prepared corpus: summarize its --split, or (with --input, for a run without its own "
        "vocab.txt) take the vocabulary from it",
    )
    source.add_argument("--split", default=None, help="the split of --data (default test)")
    source.add_argument(
        "--limit",
        type=positive_int,
        default=None,
        help="summarize only the first N documents (of a split: in its stored order, not a sample)",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--output", type=Path, default=None, help="write here instead of stdout")
    add_overwrite_argument(out, "--output")
    out.add_argument("--jsonl", action="store_true", help="one JSON object per document")
    out.add_argument("--attention", action="store_true", help="include attention in the JSON (implies --jsonl)")
    out.add_argument("--quiet", action="store_true", help="no progress bar")
    add_decode_arguments(parser)


def _round(value: Any, digits: int = 4) -> Any:
    if isinstance(value, list):
        return [_round(v, digits) for v in value]
    if isinstance(value, bool):
        return value
    return round(float(value), digits)


def attention_record(doc: SourceDocument, summary: Summary, names: tuple[str, ...] = ATTENTION_KEYS) -> dict[str, Any]:
    """The ``attention`` object of a JSON line (see the module docstring): the extras ``names``
    that ``summary`` recorded."""
    record: dict[str, Any] = {"steps": [*summary.tokens, "</s>"], "source": doc.words}
    for key in ATTENTION_KEYS:
        if key in names and key in summary.extras:
            value = summary.extras[key]
            record[_JSON_NAMES[key]] = value.tolist() if key == "chunk_read" else _round(value.tolist())
    return record


def summary_record(doc: SourceDocument, summaries: list[Summary], attention: tuple[str, ...] = ()) -> dict[str, Any]:
    """One JSON line: the best summary (and the n-best list when there are several), with the
    ``attention`` extras named (none: no ``attention`` object)."""
    best = summaries[0]
    record: dict[str, Any] = {
        "id": doc.id,
        "summary": best.text,
        "sentences": best.sentences,
        "tokens": best.tokens,
        "score": best.score,
        "log_prob": best.log_prob,
    }
    if best.unks_replaced:
        record["unks_replaced"] = best.unks_replaced
    if len(summaries) > 1:
        record["n_best"] = [{"summary": s.text, "score": s.score, "log_prob": s.log_prob} for s in summaries]
    if doc.refs:
        record["refs"] = doc.refs
    if attention:
        record["attention"] = attention_record(doc, best, attention)
    return record


def _unread_input_options(args: argparse.Namespace) -> str | None:
    """An input option that the input given does not read (it would be ignored), said as such."""
    if args.input is not None and args.split is not None:
        return "--split selects a split of --data; with --input it reads nothing (leave it out)"
    if args.input is None and args.data is not None:
        for flag, value in (("--format", args.format), ("--source-field", args.source_field)):
            if value is not None:
                return f"{flag} describes --input; a --data split is read as prepared (leave it out)"
    if args.source_field is not None and (args.format or "text") != "jsonl":
        return f"--source-field names a field of --format jsonl, not of {args.format or 'text'} input"
    return None


def _json_read_as_text(args: argparse.Namespace) -> str | None:
    """The refusal of an ``--input`` file of JSON lines read as text because ``--format`` was left
    out (its default, text, summarized each line's braces, keys and quotes as words): the first
    non-blank line is a JSON object. None when ``--format`` was given, or for standard input
    (which cannot be read twice)."""
    if args.format is not None or args.input in (None, "-") or not Path(args.input).is_file():
        return None
    with open(args.input, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError:
                return None
            if not isinstance(value, dict):
                return None
            keys = ", ".join(repr(k) for k in list(value)[:5])
            return (
                f"--input {args.input}:{number}: a JSON object ({keys}), which the default --format text would "
                "summarize as words, braces and quotes; pass --format jsonl to read its 'source' field "
                "(--source-field for another), or --format text to summarize each line as it is"
            )
    return None


def _documents(args: argparse.Namespace, run: Any) -> Iterator[SourceDocument]:
    from ..data.dataset import SummarizationDataset
    from ..data.storage import VOCAB_FILE
    from ..data.vocab import Vocab, require_same_vocab
    from ..decoding.inputs import documents_from_split, read_documents
    from ..decoding.wrapped import read_document

    if args.input is None and args.data is None:
        raise ValueError("give --input FILE (raw documents) or --data DIR (a prepared split)")
    if args.input is None:
        dataset = SummarizationDataset(args.data, args.split or "test")
        require_same_vocab(run.vocab, dataset.vocab, args.data, run.run_dir)
        n = len(dataset) if args.limit is None else min(args.limit, len(dataset))
        yield from documents_from_split(dataset, range(n))
        return
    if args.data is not None:  # (the run's own vocabulary is read: --data must agree with it)
        require_same_vocab(run.vocab, Vocab.load(Path(args.data) / VOCAB_FILE), args.data, run.run_dir)
    fmt = args.format or "text"
    if fmt == "document":
        yield read_document(args.input, run.prep_options, run.vocab)
        return
    if fmt == "text":
        _warn_if_wrapped(args.input)
    docs = read_documents(
        args.input, run.prep_options, run.vocab, fmt=fmt, source_field=args.source_field or "source", keep_empty=True
    )
    for i, doc in enumerate(docs):
        if args.limit is not None and i >= args.limit:
            return
        yield doc


def _warn_if_wrapped(path: str) -> None:
    """Warn when a text file looks like one document wrapped over many lines (not for stdin,
    which cannot be read twice)."""
    from ..decoding.wrapped import looks_wrapped

    if path == "-" or not Path(path).is_file():
        return
    with open(path, encoding="utf-8", errors="replace") as handle:
        verdict = looks_wrapped(line.rstrip("\n") for line in handle)
    if verdict.wrapped:
        print(
            f"summarize: warning: {path}:{verdict.first_line}: {verdict.inside} of {verdict.breaks} line breaks "
            "fall inside a sentence: this looks like one document wrapped over several lines, but every line "
            "is summarized as its own document; use --format document to read the file as one document",
            file=sys.stderr,
        )


def _total(args: argparse.Namespace, run: Any) -> int | None:
    """The number of documents when known in advance (a prepared split, one document)."""
    from ..data.dataset import SummarizationDataset

    if args.format == "document":
        return 1
    limit: int | None = args.limit
    if args.input is None and args.data is not None:
        n = len(SummarizationDataset(args.data, args.split or "test", vocab=run.vocab))
        return n if limit is None else min(limit, n)
    return limit


def _write(
    args: argparse.Namespace,
    handle: IO[str],
    summarizer: Summarizer,
    docs: Iterator[SourceDocument],
    progress: Any = None,
    attention: tuple[str, ...] = (),
) -> int:
    """Write one output line per input document, in input order; an empty document (a blank
    input line) gets an empty summary and a warning, so output line i answers input line i.
    ``attention``: the extras the JSON lines get (``--attention``: all; ``--extras``: the named)."""

    count = 0
    as_json = args.jsonl or args.attention
    empties_before: deque[list[str]] = deque()  # ids of the empty documents before each real one
    trailing: list[str] = []
    longer: list[SourceDocument] = []  # documents with words beyond the model's grid

    def real(documents: Iterator[SourceDocument]) -> Iterator[SourceDocument]:
        empties: list[str] = []
        for doc in documents:
            if doc.words_left_out:
                longer.append(doc)
            if not bool(doc.src_mask.any()):
                print(f"summarize: warning: {doc.id}: empty document, writing an empty summary", file=sys.stderr)
                empties.append(doc.id)
                continue
            empties_before.append(empties)
            empties = []
            yield doc
        trailing.extend(empties)

    def empty(doc_id: str) -> None:
        handle.write(json.dumps({"id": doc_id, "summary": "", "empty": True}) + "\n" if as_json else "\n")

    for doc, summaries in summarizer.summarize(real(docs)):
        for doc_id in empties_before.popleft():
            empty(doc_id)
        if as_json:
            handle.write(json.dumps(summary_record(doc, summaries, attention), ensure_ascii=False) + "\n")
        else:
            handle.write(summaries[0].text + "\n")
        handle.flush()
        count += 1
        if progress is not None:
            progress(1)
    for doc_id in trailing:
        empty(doc_id)
    handle.flush()
    if longer:  # (not silent: the model reads the first M x N words, as in training)
        m, n = longer[0].src.shape
        first = longer[0]
        print(
            f"summarize: note: {len(longer)} document(s) are longer than the {m} chunks of {n} words the model "
            f"reads (as in training); the rest is left out (e.g. {first.id}: {first.words_left_out} words)",
            file=sys.stderr,
        )
    return count


def run(args: argparse.Namespace) -> int:
    """Execute ``summarize``; returns 0 on success, 1 on an error."""
    from ..data.errors import DataError
    from ..data.progress import Progress, progress_enabled
    from ..decode_options import DecodeOptions
    from ..decoding.loading import load_run
    from ..decoding.protocol import offered_extras
    from ..decoding.summarizer import Summarizer
    from ._decoding_args import check_recombine, decode_options, given_options

    set_threads(args)
    unread = _unread_input_options(args) or _json_read_as_text(args)
    if unread:
        return error("summarize", unread)
    given = given_options(args)
    named: tuple[str, ...] = given.get("extras", ())  # (the extras the command line asks for)
    if "extras" in given and not (args.jsonl or args.attention):
        return error(
            "summarize",
            "--extras records model outputs per generated word, which only the JSON lines write: add --jsonl",
        )
    if args.output is not None and args.input not in (None, "-") and same_file(args.input, args.output):
        return error(
            "summarize",
            f"--output {args.output} is the --input file: writing the summaries there would "
            "erase the documents before they are read; choose another --output",
        )
    try:
        refuse_existing("--output", [args.output], args.overwrite)
        require_dirs(args, {"--run": RUN_DIR, "--data": CORPUS_DIR})
        loaded = load_run(
            args.run, checkpoint=args.checkpoint, coarse_topk=args.coarse_topk, device=args.device, data_dir=args.data
        )
        options = decode_options(args, loaded.run_options or DecodeOptions())
        if args.attention:
            wanted = offered_extras(loaded.decoder, ATTENTION_KEYS)
            options = options.updated({"extras": tuple(dict.fromkeys((*options.extras, *wanted)))})
        check_recombine(options, loaded.decoder, args.run)
        attention = ATTENTION_KEYS if args.attention or "*" in named else tuple(named)
        summarizer = Summarizer(loaded.decoder, loaded.vocab, options, batch_size=args.batch_size, device=args.device)
        docs = loaded.prepare(_documents(args, loaded))
        # a bar on stderr only when the summaries do not go to the same terminal
        show = progress_enabled(args.quiet) and (args.output is not None or not sys.stdout.isatty())
        with Progress("summarize", _total(args, loaded) if show else None, enabled=show) as bar:
            if args.output is None:
                count = _write(args, sys.stdout, summarizer, docs, bar.update, attention)
            else:
                args.output.parent.mkdir(parents=True, exist_ok=True)
                with args.output.open("w", encoding="utf-8") as handle:
                    count = _write(args, handle, summarizer, docs, bar.update, attention)
        if args.output is not None:
            print(f"summarize: wrote {count} summaries to {args.output}", file=sys.stderr)
        elif count == 0:  # (an empty --input: say so, rather than print nothing)
            print("summarize: note: no documents in the input; nothing to summarize", file=sys.stderr)
    except BrokenPipeError:  # `summarize ... | head -1`: the reader has gone; stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout at exit
        return 128 + signal.SIGPIPE
    except DataError as err:
        return error("summarize", err)
    except USER_ERRORS as err:
        return error("summarize", err)
    return 0


COMMAND = Command(
    name="summarize",
    help="summarize raw documents or a prepared split with a trained run (beam or greedy search)",
    add_arguments=add_arguments,
    run=run,
)
