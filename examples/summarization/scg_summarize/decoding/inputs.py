"""Documents to summarize: raw text or a prepared split, encoded like the training data.

A :class:`SourceDocument` holds the model input (``src``/``src_mask`` ``(M, N)``) together with
the source *words* in the same grid (for ``<unk>`` replacement and for labelling attention
figures), the references when known, and the salient chunk for synthetic data.

* :func:`encode_text` applies a run's :class:`~scg_summarize.data.PrepOptions` (sentence
  splitting, tokenization, lowercasing, digit mapping, chunk layout) and vocabulary to raw
  sentences, exactly as ``prepare`` did for the training data;
* :func:`read_documents` reads raw input: plain text (one document per line, ``-`` for
  stdin) or JSON lines (a source field holding a string or a list of sentences, optional
  references);
* :func:`documents_from_split` wraps a prepared split;
* :func:`collate_documents` stacks documents into a batch for the decoders.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import torch

from ..data.batching import Batch, SourceBatch, pad_targets
from ..data.chunking import layout_chunks, pack_chunks
from ..data.dataset import SummarizationDataset
from ..data.errors import DataError
from ..data.options import PrepOptions
from ..data.rawtext import iter_lines, iter_stream_lines
from ..data.sentences import split_text
from ..data.tokenizer import make_tokenizer
from ..data.vocab import EOS, Vocab

__all__ = [
    "INPUT_FORMATS",
    "SourceDocument",
    "collate_documents",
    "documents_from_split",
    "encode_text",
    "read_documents",
    "regrid_document",
    "text_lines",
]

INPUT_FORMATS: tuple[str, ...] = ("text", "jsonl")


@dataclass
class SourceDocument:
    """One document ready for decoding.

    Attributes:
        id: an identifier (JSON ``id`` field, ``file:line`` or the prepared example id).
        src: long ``(M, N)`` source ids, 0 = ``<pad>``.
        src_mask: bool ``(M, N)``, True at real words.
        words: the source words in the same grid (``words[m][n]`` is the word at ``src[m, n]``).
        refs: reference summaries (empty when unknown).
        sentences: the source sentences as text (for baselines and display).
        salient: the salient chunk (synthetic data) or -1.
        tgt: the training target ids ``<s> ... </s>`` (prepared data only).
    """

    id: str
    src: torch.Tensor
    src_mask: torch.Tensor
    words: list[list[str]]
    refs: list[str] = field(default_factory=list)
    sentences: list[str] = field(default_factory=list)
    salient: int = -1
    tgt: torch.Tensor | None = None

    def chunk_labels(self, n_words: int = 3) -> list[str]:
        """A short label per chunk: its first ``n_words`` words (empty for padding chunks)."""
        return [" ".join(chunk[:n_words]) + (" ..." if len(chunk) > n_words else "") for chunk in self.words]


def encode_text(
    doc_id: str, paragraphs: Sequence[str], options: PrepOptions, vocab: Vocab, *, sentences_given: bool = False
) -> SourceDocument:
    """Preprocess raw text with a run's options; raises ``ValueError`` when it has no words."""
    sentences = [s.strip() for s in paragraphs if s.strip()] if sentences_given else []
    if not sentences_given:
        sentences = split_text(paragraphs, split=options.split_sentences)
    tokenize = make_tokenizer(options.tokenizer, lowercase=options.lowercase, digits_to_hash=options.digits_to_hash)
    tokens = [t for t in (tokenize(s) for s in sentences) if t]
    if not tokens:
        raise ValueError(f"{doc_id}: the document has no words")
    chunks = layout_chunks(tokens, options.layout, options.num_chunks, options.chunk_len, EOS)
    ids, mask = pack_chunks([vocab.encode(c) for c in chunks], options.num_chunks, options.chunk_len, vocab.pad_id)
    words = [list(c) for c in chunks] + [[] for _ in range(options.num_chunks - len(chunks))]
    return SourceDocument(doc_id, torch.from_numpy(ids).long(), torch.from_numpy(mask), words, sentences=sentences)


def text_lines(path: str) -> Iterator[tuple[str, int, str]]:
    """``(name, line number, text)`` of a file or stdin (``-``), with checked decoding."""
    if path == "-":  # the same checks as a file (binary garbage is refused, not summarized)
        stream = getattr(sys.stdin, "buffer", None) or io.BytesIO(sys.stdin.read().encode("utf-8"))  # (a text stub)
        for lineno, item in iter_stream_lines(stream, "<stdin>"):
            if isinstance(item, DataError):
                raise item
            yield "<stdin>", lineno, item
        return
    if not Path(path).is_file():
        raise DataError("no such file", path, reason="missing_input")
    for lineno, item in iter_lines(path):
        if isinstance(item, DataError):
            raise item
        yield path, lineno, item


def _json_document(text: str, name: str, lineno: int, source_field: str, refs_field: str) -> dict[str, Any]:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"invalid JSON ({err.msg} at column {err.colno})", name, lineno, "bad_json") from None
    if not isinstance(record, dict):
        raise DataError(f"expected a JSON object, got {type(record).__name__}", name, lineno, "bad_json")
    if source_field not in record:
        have = ", ".join(sorted(record)) or "none"
        raise DataError(f"missing field {source_field!r} (fields present: {have})", name, lineno, "missing_field")
    source, refs = record[source_field], record.get(refs_field, [])
    if isinstance(source, str):
        paragraphs, given = source.splitlines(), False
    elif isinstance(source, list) and all(isinstance(s, str) for s in source):
        paragraphs, given = source, True
    else:
        raise DataError(f"field {source_field!r} must be a string or a list of strings", name, lineno, "wrong_type")
    refs = [refs] if isinstance(refs, str) else refs
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        raise DataError(f"field {refs_field!r} must be a string or a list of strings", name, lineno, "wrong_type")
    raw_id = record.get("id")
    return {
        "id": str(raw_id) if raw_id is not None else f"{name}:{lineno}",
        "paragraphs": paragraphs,
        "given": given,
        "refs": refs,
    }


def read_documents(
    path: str,
    options: PrepOptions,
    vocab: Vocab,
    *,
    fmt: str = "text",
    source_field: str = "source",
    refs_field: str = "target",
    keep_empty: bool = False,
) -> Iterator[SourceDocument]:
    """Yield encoded documents from raw input (see the module docstring).

    In the ``text`` format every non-blank line is one document (sentences are split by the
    run's options); a literal ``\\n`` inside a line separates paragraphs. Problems raise
    :class:`~scg_summarize.data.DataError` naming the file and line. With ``keep_empty``, a
    blank line or one without words yields an *empty* document (``src_mask`` all False) instead
    of being skipped or refused, so that outputs can stay aligned with input lines.
    """
    if fmt not in INPUT_FORMATS:
        raise ValueError(f"input format must be one of {INPUT_FORMATS}, got {fmt!r}")
    for name, lineno, text in text_lines(path):
        if not text.strip():
            if keep_empty and fmt == "text":
                yield _empty_document(f"{name}:{lineno}", options)
            continue
        if fmt == "text":
            record: dict[str, Any] = {"id": f"{name}:{lineno}", "paragraphs": text.split("\\n"), "given": False}
        else:
            record = _json_document(text, name, lineno, source_field, refs_field)
        try:
            doc = encode_text(record["id"], record["paragraphs"], options, vocab, sentences_given=record["given"])
        except ValueError:
            if keep_empty and fmt == "text":
                yield _empty_document(record["id"], options)
                continue
            raise DataError("the document has no words", name, lineno, "empty_source") from None
        doc.refs = list(record.get("refs", []))
        yield doc


def _empty_document(doc_id: str, options: PrepOptions) -> SourceDocument:
    """A document without words (an empty input line), for callers that keep line alignment."""
    m, n = options.num_chunks, options.chunk_len
    return SourceDocument(
        doc_id, torch.zeros(m, n, dtype=torch.long), torch.zeros(m, n, dtype=torch.bool), [[] for _ in range(m)]
    )


def _grid_words(dataset: SummarizationDataset, src: torch.Tensor, sentences: list[str]) -> list[list[str]]:
    """The source words of a prepared example: re-tokenized from the stored sentences when
    that reproduces the stored ids (so ``<unk>`` positions get their real word), else decoded."""
    opts = dataset.options
    m, n = src.shape
    try:
        doc = encode_text("", sentences, opts, dataset.vocab, sentences_given=True)
        if torch.equal(doc.src, src):
            return doc.words
    except ValueError:
        pass
    vocab = dataset.vocab
    return [[vocab.id_to_token(int(i)) for i in src[row] if int(i) != vocab.pad_id] for row in range(m)]


def documents_from_split(
    dataset: SummarizationDataset, indices: Iterable[int] | None = None
) -> Iterator[SourceDocument]:
    """Yield the examples of a prepared split (all of them, or ``indices``) as documents."""
    for index in range(len(dataset)) if indices is None else indices:
        item = dataset[index]
        sentences = list(item.get("src_sentences", []))
        yield SourceDocument(
            id=str(item.get("id", index)),
            src=item["src"],
            src_mask=item["src_mask"],
            words=_grid_words(dataset, item["src"], sentences),
            refs=list(item.get("refs", [])),
            sentences=sentences,
            salient=int(item["salient"]),
            tgt=item["tgt"],
        )


def regrid_document(doc: SourceDocument, num_chunks: int, chunk_len: int) -> SourceDocument:
    """``doc`` re-cut into ``num_chunks`` chunks of ``chunk_len``: its real words in order, padded
    or truncated (the trainer's ``data.regrid``); the salient chunk no longer applies (-1)."""
    keep = doc.src_mask.reshape(-1)
    ids = doc.src.reshape(-1)[keep].tolist()[: num_chunks * chunk_len]
    words = [w for chunk in doc.words for w in chunk][: num_chunks * chunk_len]
    if len(words) != len(ids):
        raise ValueError(f"{doc.id}: {len(words)} source words for {len(ids)} ids")
    chunks = [ids[i : i + chunk_len] for i in range(0, len(ids), chunk_len)]
    grid, mask = pack_chunks(chunks, num_chunks, chunk_len)
    word_grid = [words[i : i + chunk_len] for i in range(0, len(words), chunk_len)]
    word_grid += [[] for _ in range(num_chunks - len(word_grid))]
    return replace(doc, src=torch.from_numpy(grid).long(), src_mask=torch.from_numpy(mask), words=word_grid, salient=-1)


def collate_documents(docs: Sequence[SourceDocument], pad_id: int = 0) -> SourceBatch:
    """The documents as a :class:`~scg_summarize.data.Batch` when every one has a target, else as
    a :class:`~scg_summarize.data.SourceBatch`."""
    if not docs:
        raise ValueError("cannot collate an empty batch")
    source = SourceBatch(
        src=torch.stack([d.src for d in docs]),
        src_mask=torch.stack([d.src_mask for d in docs]),
        salient=torch.tensor([d.salient for d in docs], dtype=torch.long),
        refs=[d.refs for d in docs],
        src_sentences=[d.sentences for d in docs],
        ids=[d.id for d in docs],
    )
    targets = [d.tgt for d in docs if d.tgt is not None]
    if len(targets) < len(docs):
        return source
    tgt, tgt_mask = pad_targets(targets, pad_id)
    return Batch(**{f.name: getattr(source, f.name) for f in fields(source)}, tgt=tgt, tgt_mask=tgt_mask)
