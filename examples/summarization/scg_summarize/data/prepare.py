"""The preparation pipeline: raw inputs -> preprocessed, encoded splits on disk.

:func:`prepare_corpus` streams every input once (pass 1: preprocess, count the vocabulary,
queue words on disk), builds the vocabulary, then encodes each split (pass 2). Memory holds
the word counter and a few per-example numbers, never the documents, so the full CNN/DM
training set (287k articles) prepares in bounded memory.

Inputs are :class:`InputSource` objects: a name (shown in messages and stored in the metadata),
the split it feeds (or ``None`` to assign each example to ``train``/``valid``/``test`` by a
stable hash of its id, see :func:`assign_split`) and a function opening the example stream
given a :class:`~scg_summarize.data.errors.BadInputReport`.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import BadInputReport, DataError
from .options import PrepOptions, options_hash
from .preprocess import Preprocessor
from .progress import Progress
from .rawtext import RawExample
from .storage import (
    FORMAT_NAME,
    FORMAT_VERSION,
    META_FILE,
    SPLIT_FILES,
    VOCAB_FILE,
    ExampleText,
    SplitWriter,
    write_meta,
)
from .vocab import SPECIALS, Vocab

__all__ = ["InputSource", "assign_split", "prepare_corpus"]

_SPLIT_NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class InputSource:
    """One input stream of raw examples.

    Attributes:
        name: a label for messages and metadata (usually the input path).
        split: the split every example goes to, or ``None`` to assign by hash.
        open: called once with the input's bad-input report; returns the examples.
    """

    name: str
    split: str | None
    open: Callable[[BadInputReport], Iterable[RawExample]]


def assign_split(example_id: str, fractions: Mapping[str, float]) -> str:
    """A deterministic split for ``example_id``: ``test``/``valid`` by hash, else ``train``.

    ``fractions`` maps split names to the share of examples they get (e.g.
    ``{"valid": 0.05, "test": 0.05}``); the remaining share goes to ``train``. The choice
    depends only on the id, so it is stable across runs and input orders.
    """
    digest = hashlib.sha1(example_id.encode("utf-8")).digest()
    u = int.from_bytes(digest[:8], "big") / 2.0**64
    edge = 0.0
    for name in sorted(fractions):
        edge += fractions[name]
        if u < edge:
            return name
    return "train"


def _check_fractions(fractions: Mapping[str, float]) -> None:
    if any(f < 0 for f in fractions.values()) or sum(fractions.values()) >= 1.0:
        raise ValueError(f"split fractions must be >= 0 and sum to < 1, got {dict(fractions)}")


def _close(stream: Iterator[Any]) -> None:
    close = getattr(stream, "close", None)
    if callable(close):
        close()


#: Files of a training run's folder (``scg-summarize train --out``): never a corpus to replace.
_RUN_FILES: tuple[str, ...] = ("config.json", "checkpoint.pt", "best.pt")


def _prepare_output(out_dir: Path, overwrite: bool, splits: Iterable[str]) -> None:
    """Make room for a corpus in ``out_dir``: a training run's folder is refused; a prepared corpus
    (``meta.json``) is replaced with ``overwrite``; without one, a file prepare would write
    (``vocab.txt``, a split's files, ``splits`` the names it may write) is the user's and is
    replaced only with ``overwrite``."""
    run_files = [name for name in _RUN_FILES if (out_dir / name).exists()]
    if run_files:
        raise FileExistsError(
            f"{out_dir} is a training run's folder ({', '.join(run_files)}), not a corpus: preparing "
            f"there would replace the {VOCAB_FILE} the run needs to summarize; choose another "
            f"output folder"
        )
    if not (out_dir / META_FILE).exists() and not overwrite:
        written = [out_dir / VOCAB_FILE] + [out_dir / split / name for split in sorted(splits) for name in SPLIT_FILES]
        mine = next((path for path in written if path.exists()), None)
        if mine is not None:
            raise FileExistsError(
                f"{mine} exists (and {out_dir} holds no prepared corpus); pass "
                f"overwrite=True (--overwrite) to replace it, or choose another output folder"
            )
    if (out_dir / META_FILE).exists():
        if not overwrite:
            raise FileExistsError(f"{out_dir} already holds a prepared corpus; pass overwrite=True (--overwrite)")
        (out_dir / META_FILE).unlink()
        for child in out_dir.iterdir():  # only directories that are our splits
            if child.is_dir() and (child / SPLIT_FILES[0]).is_file():
                shutil.rmtree(child)
    out_dir.mkdir(parents=True, exist_ok=True)


def prepare_corpus(
    inputs: Sequence[InputSource],
    out_dir: str | Path,
    options: PrepOptions | None = None,
    *,
    vocab: Vocab | None = None,
    split_fractions: Mapping[str, float] | None = None,
    skip_bad: bool = False,
    overwrite: bool = False,
    limit: int | None = None,
    show_progress: bool = False,
    extra_meta: Mapping[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Preprocess ``inputs`` into a prepared corpus under ``out_dir``; returns the metadata.

    Args:
        inputs: the input streams (see :class:`InputSource`).
        out_dir: the output directory (created).
        options: preprocessing options (defaults: the paper's).
        vocab: a fixed vocabulary (e.g. the training corpus's ``vocab.txt``); otherwise the
            vocabulary is counted on the ``train`` split (or on everything when there is no
            ``train`` split).
        split_fractions: shares for hash-assigned inputs (``split=None``), e.g.
            ``{"valid": 0.1, "test": 0.1}``.
        skip_bad: skip and count malformed records instead of raising ``DataError``.
        overwrite: replace an existing prepared corpus in ``out_dir``.
        limit: read at most this many examples per input (for quick experiments).
        show_progress: display progress counters.
        extra_meta: additional JSON-serializable entries for ``meta.json``.
        log: where to send human-readable summary lines (e.g. ``print``).

    Raises:
        DataError: for the first malformed record when ``skip_bad`` is False.
        ValueError: when no example at all survives.
    """
    options = options or PrepOptions()
    fractions = dict(split_fractions or {})
    _check_fractions(fractions)
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    _prepare_output(out_dir, overwrite, {"train", *(s.split for s in inputs if s.split), *fractions})
    vocab_written = False
    preprocessor = Preprocessor(options)
    writers: dict[str, SplitWriter] = {}
    counters: dict[str, Counter[str]] = {}
    input_meta: list[dict[str, Any]] = []
    total_report = BadInputReport(skip_bad=skip_bad)
    first_seen: dict[str, str] = {}  # example id -> where it was first read (ids must be unique)
    try:
        with Progress("pass 1/2 (tokenize)", enabled=show_progress) as bar:
            for source in inputs:
                report = BadInputReport(skip_bad=skip_bad)
                read = kept = 0
                stream = iter(source.open(report))
                for raw in stream:
                    if limit is not None and read >= limit:
                        _close(stream)
                        break
                    read += 1
                    split = source.split or assign_split(raw.id, fractions)
                    if not _SPLIT_NAME_RE.match(split):
                        raise ValueError(f"invalid split name {split!r}")
                    try:
                        if raw.id in first_seen:
                            raise DataError(
                                f"duplicate example id {raw.id!r} (first seen at {first_seen[raw.id]})",
                                raw.origin or source.name,
                                reason="duplicate_id",
                            )
                        example = preprocessor(raw)
                    except DataError as err:
                        report.handle(err)
                        continue
                    first_seen[raw.id] = raw.origin or source.name
                    if split not in writers:
                        writers[split] = SplitWriter(out_dir / split, options.num_chunks, options.chunk_len)
                        counters[split] = Counter()
                    counter = counters[split]
                    for sentence in example.sentence_tokens:
                        counter.update(sentence)
                    counter.update(example.target_tokens)
                    text = ExampleText(
                        id=example.id,
                        origin=example.origin,
                        refs=example.references,
                        src_sentences=example.sentences,
                    )
                    writers[split].add(preprocessor.chunks(example), example.target_tokens, text, example.salient)
                    kept += 1
                    bar.update()
                input_meta.append(
                    {
                        "name": source.name,
                        "split": source.split,
                        # every record is kept or skipped, also those the reader skipped before handing on
                        # (invalid JSON, a Gigaword filter's pairs), which `read` (the --limit count) misses
                        "records_read": kept + report.total_skipped,
                        "examples_kept": kept,
                        "bad_input": report.to_dict(),
                    }
                )
                total_report.merge(report)
                if log is not None:
                    for line in report.summary_lines(source.name):
                        log(line)
        if not writers:
            raise ValueError(f"no usable examples in {', '.join(source.name for source in inputs) or 'the inputs'}")
        for name, fraction in sorted(fractions.items()):
            if name not in writers and log is not None:  # (a fraction too small for the corpus: not silent)
                kept_total = sum(w.count for w in writers.values())
                log(
                    f"note: no example fell in split {name!r} (a fraction {fraction} of {kept_total} examples, "
                    "assigned by a hash of the id); raise the fraction or add examples"
                )
        if vocab is not None:
            vocab_from = "given"
        else:
            vocab_from = "train" if "train" in counters else "all splits"
            counts: Counter[str] = Counter()
            for name, counter in counters.items():
                if vocab_from != "train" or name == "train":
                    counts.update(counter)
            vocab = Vocab.from_counter(counts, options.vocab_size, options.min_freq)
            if len(vocab) == len(SPECIALS):  # (every later command refuses a corpus without words)
                most = max(counts.values(), default=0)
                raise ValueError(
                    f"--min-freq {options.min_freq}: no word of {vocab_from} occurs that often (the most "
                    f"frequent occurs {most} times), so the vocabulary would hold the special tokens alone; "
                    "lower --min-freq"
                )
        counters.clear()
        vocab.save(out_dir / VOCAB_FILE)
        vocab_written = True
        split_meta: dict[str, Any] = {}
        total = sum(w.count for w in writers.values())
        with Progress("pass 2/2 (encode)", total, enabled=show_progress) as bar:
            for name in sorted(writers):
                split_meta[name] = writers[name].finish(vocab, bar)
    except BaseException:  # (leave nothing half-written: the next prepare would take it for the user's)
        for writer in writers.values():
            writer.abort()
        if vocab_written:
            (out_dir / VOCAB_FILE).unlink(missing_ok=True)
        if created:
            try:
                out_dir.rmdir()
            except OSError:
                pass
        raise
    meta: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "options": options.to_dict(),
        "options_hash": options_hash(options),
        "vocab_size": len(vocab),
        "vocab_from": vocab_from,
        "splits": split_meta,
        "inputs": input_meta,
        "split_fractions": fractions,
        "limit": limit,
        "bad_input": total_report.to_dict(),
        "skip_bad": skip_bad,
    }
    meta.update(extra_meta or {})
    write_meta(out_dir, meta)
    if log is not None:
        for name, info in split_meta.items():
            log(
                f"{name}: {info['examples']} examples, {info['src_tokens']} source / "
                f"{info['tgt_tokens']} target tokens, unk {info['src_unk_rate']:.2%} / "
                f"{info['tgt_unk_rate']:.2%}"
            )
        log(f"vocabulary: {len(vocab)} tokens (from {vocab_from}); wrote {out_dir}")
    return meta
