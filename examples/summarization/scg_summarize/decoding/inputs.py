"""Documents to summarize: raw text or a prepared split, encoded like the training data.

A :class:`SourceDocument` is a :class:`~scg_summarize.data.Example` (the model input
``src``/``src_mask`` ``(M, N)``, the references when known, the salient chunk for synthetic
data, the target for prepared data) with the source *words* in the same grid (for ``<unk>``
replacement and for labelling attention figures). Records, batches and the regrid come from
``data/``: :func:`~scg_summarize.data.readers.parse_json_record`,
:func:`~scg_summarize.data.collate_sources` / :func:`~scg_summarize.data.collate_examples` and
:func:`~scg_summarize.data.chunking.regrid`.

* :func:`encode_text` applies a run's :class:`~scg_summarize.data.PrepOptions` (sentence
  splitting, tokenization, lowercasing, digit mapping, chunk layout) and vocabulary to raw
  sentences, exactly as ``prepare`` did for the training data;
* :func:`read_documents` reads raw input: plain text (one document per line, ``-`` for
  stdin) or JSON lines (a source field holding a string or a list of sentences, optional
  references);
* :func:`documents_from_split` wraps a prepared split;
* :func:`regrid_document` re-cuts a document (ids and words) into a run's ``data.regrid``.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields, replace

import torch

from ..choices import INPUT_FORMATS
from ..data.chunking import layout_chunks, pack_chunks, regrid
from ..data.dataset import Example, SummarizationDataset
from ..data.errors import DataError, require_file
from ..data.options import PrepOptions
from ..data.rawtext import RawExample, iter_lines, iter_stream_lines
from ..data.readers import parse_json_record
from ..data.sentences import split_text
from ..data.tokenizer import make_tokenizer
from ..data.vocab import EOS, Vocab

__all__ = [
    "INPUT_FORMATS",
    "SourceDocument",
    "documents_from_split",
    "encode_text",
    "read_documents",
    "regrid_document",
    "text_lines",
]


@dataclass(kw_only=True, slots=True)
class SourceDocument(Example):
    """One document ready for decoding: an :class:`~scg_summarize.data.Example` (its ``id`` is
    the JSON ``id`` field, ``file:line`` or the prepared example id) with its source words.

    Attributes:
        words: the source words in the same grid (``words[m][n]`` is the word at ``src[m, n]``).
        words_left_out: the words of raw text beyond the grid (the model reads the first M·N, as
            in training); 0 for a prepared example.
    """

    words: list[list[str]]
    words_left_out: int = 0


def encode_text(
    doc_id: str, paragraphs: Sequence[str], options: PrepOptions, vocab: Vocab, *, sentences_given: bool = False
) -> SourceDocument:
    """Preprocess raw text with a run's options; raises ``ValueError`` when it has no words."""
    if isinstance(paragraphs, str) or not all(isinstance(p, str) for p in paragraphs):
        got = "a string" if isinstance(paragraphs, str) else f"{type(paragraphs).__name__} of other items"
        raise TypeError(f"encode_text({doc_id!r}, paragraphs): expected a list of strings (paragraphs), got {got}")
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
    kept = sum(1 for chunk in chunks for word in chunk if word != EOS)
    return SourceDocument(
        id=doc_id,
        src=torch.from_numpy(ids).long(),
        src_mask=torch.from_numpy(mask),
        words=words,
        src_sentences=sentences,
        words_left_out=max(0, sum(map(len, tokens)) - kept),
    )


def text_lines(path: str) -> Iterator[tuple[str, int, str]]:
    """``(name, line number, text)`` of a file or stdin (``-``), with checked decoding."""
    if path == "-":  # the same checks as a file (binary garbage is refused, not summarized)
        stream = getattr(sys.stdin, "buffer", None) or io.BytesIO(sys.stdin.read().encode("utf-8"))  # (a text stub)
        for lineno, item in iter_stream_lines(stream, "<stdin>"):
            if isinstance(item, DataError):
                raise item
            yield "<stdin>", lineno, item
        return
    require_file(path)
    for lineno, item in iter_lines(path):
        if isinstance(item, DataError):
            raise item
        yield path, lineno, item


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
            record = RawExample(id=f"{name}:{lineno}", source=text.split("\\n"), references=[], sentences_given=False)
        else:
            record = parse_json_record(
                text,
                name,
                lineno,
                source=source_field,
                target=refs_field,
                default_id=f"{name}:{lineno}",
                target_required=False,
            )
        try:
            doc = encode_text(record.id, record.source, options, vocab, sentences_given=record.sentences_given)
        except ValueError:
            if keep_empty and fmt == "text":
                yield _empty_document(record.id, options)
                continue
            raise DataError("the document has no words", name, lineno, "empty_source") from None
        doc.refs = list(record.references)
        yield doc


def _empty_document(doc_id: str, options: PrepOptions) -> SourceDocument:
    """A document without words (an empty input line), for callers that keep line alignment."""
    m, n = options.num_chunks, options.chunk_len
    return SourceDocument(
        id=doc_id,
        src=torch.zeros(m, n, dtype=torch.long),
        src_mask=torch.zeros(m, n, dtype=torch.bool),
        words=[[] for _ in range(m)],
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
        example = dataset[index]
        words = _grid_words(dataset, example.src, example.src_sentences)
        yield SourceDocument(**{f.name: getattr(example, f.name) for f in fields(example)}, words=words)


def regrid_document(doc: SourceDocument, num_chunks: int, chunk_len: int) -> SourceDocument:
    """``doc`` re-cut by :func:`~scg_summarize.data.chunking.regrid` (the trainer's ``data.regrid``),
    its words with it; the salient chunk no longer applies (-1)."""
    src, mask = regrid(doc.src.unsqueeze(0), doc.src_mask.unsqueeze(0), num_chunks, chunk_len)
    words = [w for chunk in doc.words for w in chunk][: num_chunks * chunk_len]
    if len(words) != int(mask.sum()):
        raise ValueError(f"{doc.id}: {len(words)} source words for {int(mask.sum())} ids")
    grid = [words[i : i + chunk_len] for i in range(0, num_chunks * chunk_len, chunk_len)]
    return replace(doc, src=src[0], src_mask=mask[0], words=grid, salient=-1)
