"""From documents to readable summaries: search, ``<unk>`` replacement and detokenization.

`decode_batch` picks greedy or beam search from the options. `Summarizer` runs it
over documents in batches and turns every hypothesis into a `Summary`: word ids become
words, ``<unk>`` is replaced by the most attended source word when asked (``unk="replace"``,
which needs the model's ``word_attn``; never by a marker such as ``</s>``), the words are split
into sentences after ``.``/``!``/``?`` and every sentence is detokenized. No special token
reaches a summary's text: ``<pad>``, ``<s>`` and ``</s>`` (a copying model can copy the source's
``</s>``) are dropped from it, and so is an ``<unk>`` that ``unk="replace"`` could not replace.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from ..data.batching import SourceBatch, collate_sources
from ..data.tokenizer import detokenize
from ..data.vocab import SPECIALS, UNK, Vocab
from ..decode_options import DecodeOptions, Hypothesis
from ..devices import checked_device
from .beam import beam_search
from .blocking import SpecialIds, number_token_ids
from .greedy import greedy_search
from .inputs import SourceDocument
from .protocol import StepDecoder, offered_extras

__all__ = ["Summarizer", "Summary", "decode_batch", "replace_unks", "split_token_sentences"]

_SENTENCE_END = frozenset({".", "!", "?"})
#: Tokens never shown in a summary's text (with ``unk="replace"``, an unreplaced ``<unk>`` too).
_NOT_SHOWN = frozenset(SPECIALS) - {UNK}
_NOT_SHOWN_REPLACE = frozenset(SPECIALS)


def decode_batch(
    decoder: StepDecoder[Any], batch: SourceBatch, options: DecodeOptions, special: SpecialIds | None = None
) -> list[list[Hypothesis]]:
    """Greedy search when ``options.greedy``, else beam search."""
    search = greedy_search if options.greedy else beam_search
    with torch.no_grad():
        return search(decoder, batch, options, special)


def split_token_sentences(tokens: list[str]) -> list[list[str]]:
    """Split a token list after sentence-final punctuation (no empty sentences)."""
    sentences: list[list[str]] = [[]]
    for token in tokens:
        sentences[-1].append(token)
        if token in _SENTENCE_END:
            sentences.append([])
    return [s for s in sentences if s]


def replace_unks(tokens: list[str], word_attn: torch.Tensor | None, words: list[list[str]]) -> tuple[list[str], int]:
    """Replace each ``<unk>`` at step ``t`` by the source word with the largest
    ``word_attn[t]`` (``(steps, M, N)``); returns the new tokens and the number replaced."""
    if word_attn is None or UNK not in tokens:
        return list(tokens), 0
    out, count = list(tokens), 0
    n = word_attn.shape[-1]
    # the source positions that hold a real word (not padding, not a marker such as </s>)
    usable = torch.zeros(word_attn.shape[-2:], dtype=torch.bool)
    for m, chunk in enumerate(words[: usable.shape[0]]):
        for j, word in enumerate(chunk[:n]):
            usable[m, j] = word not in SPECIALS
    for t, token in enumerate(tokens):
        if token != UNK or t >= word_attn.shape[0]:
            continue
        weights = word_attn[t].float().cpu().masked_fill(~usable, -1.0).reshape(-1)
        flat = int(weights.argmax())
        if float(weights[flat]) > 0:
            m, j = divmod(flat, n)
            out[t], count = words[m][j], count + 1
    return out, count


@dataclass
class Summary:
    """A decoded summary.

    Attributes:
        id: the document id.
        token_ids: the generated ids (no ``<s>``/``</s>``).
        tokens: the words, after ``<unk>`` replacement.
        sentences: the detokenized sentences.
        score: the ranking score (length-normalized log-probability).
        log_prob: the total log-probability (words and ``</s>``).
        extras: the recorded attention, each ``(len(tokens) + 1, ...)``.
        unks_replaced: how many ``<unk>`` were replaced.
    """

    id: str
    token_ids: list[int]
    tokens: list[str]
    sentences: list[str]
    score: float
    log_prob: float
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
    unks_replaced: int = 0

    @property
    def text(self) -> str:
        """The summary on one line."""
        return " ".join(self.sentences)

    @property
    def lines(self) -> str:
        """The summary with one sentence per line (for ROUGE-Lsum)."""
        return "\n".join(self.sentences)


class Summarizer:
    """Decode documents in batches into `Summary` objects.

    Args:
        decoder: the model.
        vocab: its vocabulary (as many words as the decoder's ``vocab_size``, where it declares one).
        options: search options (``word_attn`` is recorded automatically for
            ``unk="replace"``).
        batch_size: documents per batch.
        device: where batches are moved before decoding.
    """

    def __init__(
        self,
        decoder: StepDecoder[Any],
        vocab: Vocab,
        options: DecodeOptions,
        *,
        batch_size: int = 32,
        device: str | torch.device = "cpu",
    ) -> None:
        if not isinstance(options, DecodeOptions):
            raise TypeError(
                f"Summarizer(options=...): expected a DecodeOptions, got {type(options).__name__} "
                "(DecodeOptions(**settings) builds one and checks the settings)"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        size = getattr(decoder, "vocab_size", None)  # (a decoder that does not declare it is not checked)
        if size is not None and int(size) != len(vocab):  # (fewer words: ids with no word; more: ids the model lacks)
            raise ValueError(
                f"Summarizer(vocab): {len(vocab)} words, but the model's vocabulary (its embedding table) has "
                f"{int(size)}: use the vocabulary the model was trained with (load_run returns both)"
            )
        if options.unk == "replace" and not options.wants("word_attn"):  # (where the model has it)
            options = replace(options, extras=(*options.extras, *offered_extras(decoder, ("word_attn",))))
        self.decoder, self.vocab, self.options = decoder, vocab, options
        self.batch_size, self.device = batch_size, checked_device(device, "Summarizer")
        blocked = number_token_ids(vocab.tokens) if options.block_digits else ()
        self.special = SpecialIds(vocab.pad_id, vocab.unk_id, vocab.bos_id, vocab.eos_id, blocked)

    def to_summary(self, doc: SourceDocument, hyp: Hypothesis) -> Summary:
        """Words, ``<unk>`` replacement and sentences of one hypothesis."""
        tokens = [self.vocab.id_to_token(i) for i in hyp.tokens]
        replaced = 0
        if self.options.unk == "replace":
            tokens, replaced = replace_unks(tokens, hyp.extras.get("word_attn"), doc.words)
        hidden = _NOT_SHOWN_REPLACE if self.options.unk == "replace" else _NOT_SHOWN
        sentences = [detokenize(s) for s in split_token_sentences([t for t in tokens if t not in hidden])]
        return Summary(doc.id, list(hyp.tokens), tokens, sentences, hyp.score, hyp.log_prob, hyp.extras, replaced)

    def summarize_batch(self, docs: list[SourceDocument]) -> list[list[Summary]]:
        """The ``n_best`` summaries of each document of one batch."""
        for doc in docs:
            if not isinstance(doc, SourceDocument):
                raise TypeError(
                    f"Summarizer: expected SourceDocument objects (read_documents, encode_text or "
                    f"documents_from_split make them from text or a prepared split), got {type(doc).__name__}"
                )
            if not bool(doc.src_mask.any()):  # (a model decodes a summary of nothing: invented words)
                raise ValueError(f"Summarizer: {doc.id}: the document has no words (its every position is padding)")
        batch = collate_sources(docs).to(self.device)
        hyps = decode_batch(self.decoder, batch, self.options, self.special)
        return [[self.to_summary(doc, h) for h in doc_hyps] for doc, doc_hyps in zip(docs, hyps)]

    def summarize(self, docs: Iterable[SourceDocument]) -> Iterator[tuple[SourceDocument, list[Summary]]]:
        """Yield ``(document, n_best summaries)`` in input order."""
        pending: list[SourceDocument] = []
        for doc in docs:
            pending.append(doc)
            if len(pending) == self.batch_size:
                yield from zip(pending, self.summarize_batch(pending))
                pending = []
        if pending:
            yield from zip(pending, self.summarize_batch(pending))
