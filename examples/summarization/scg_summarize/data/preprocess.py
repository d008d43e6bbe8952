"""Per-example preprocessing: sentences, tokens and the training target of a raw example.

:class:`Preprocessor` applies :class:`~scg_summarize.data.options.PrepOptions` to a
:class:`~scg_summarize.data.rawtext.RawExample`: sentence splitting (when the input has no
sentences), tokenization with lowercasing and digit mapping, selection and truncation of the
training target, and the chunk layout. Examples whose source or target ends up without a
single word raise :class:`~scg_summarize.data.errors.DataError` (reasons ``empty_source`` /
``empty_target``), so they are reported, never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass

from .chunking import layout_chunks
from .errors import DataError
from .options import PrepOptions
from .rawtext import RawExample
from .sentences import split_text
from .tokenizer import make_tokenizer
from .vocab import EOS

__all__ = ["Preprocessor", "ProcessedExample"]


@dataclass
class ProcessedExample:
    """A preprocessed example, still as words (ids come once the vocabulary is known).

    Attributes:
        id: the raw example's id.
        origin: ``file:line`` of the raw example.
        sentences: the source sentences as (stripped) original text, for baselines; at most
            ``options.max_stored_sentences`` when that is set.
        sentence_tokens: every source sentence tokenized (sentences with no tokens removed).
        target_tokens: the training target's words, truncated to ``max_target_len``,
            without ``<s>``/``</s>``.
        references: all reference summaries as original text, for evaluation.
        salient: the salient chunk index (synthetic data) or -1.
    """

    id: str
    origin: str
    sentences: list[str]
    sentence_tokens: list[list[str]]
    target_tokens: list[str]
    references: list[str]
    salient: int = -1

    @property
    def source_tokens(self) -> int:
        """The number of source words (without sentence ends)."""
        return sum(len(s) for s in self.sentence_tokens)


class Preprocessor:
    """Callable turning :class:`RawExample` into :class:`ProcessedExample` under ``options``."""

    def __init__(self, options: PrepOptions) -> None:
        self.options = options
        self.tokenize = make_tokenizer(
            options.tokenizer, lowercase=options.lowercase, digits_to_hash=options.digits_to_hash
        )

    def sentences(self, raw: RawExample) -> list[str]:
        """The raw source sentences of ``raw`` (split here unless the input provides them)."""
        if raw.sentences_given:
            return [s.strip() for s in raw.source if s.strip()]
        return split_text(raw.source, split=self.options.split_sentences)

    def target_text(self, raw: RawExample) -> str:
        """The reference text the model is trained on (see ``options.target_mode``)."""
        if not raw.references:
            return ""
        if self.options.target_mode == "concat":
            return "\n".join(raw.references)
        return raw.references[0]

    def __call__(self, raw: RawExample) -> ProcessedExample:
        """Preprocess one example; raises ``DataError`` for an empty source or target."""
        kept_sentences: list[str] = []
        sentence_tokens: list[list[str]] = []
        for sentence in self.sentences(raw):
            tokens = self.tokenize(sentence)
            if tokens:
                kept_sentences.append(sentence)
                sentence_tokens.append(tokens)
        origin = raw.origin or raw.id
        if not sentence_tokens:
            raise DataError("source has no words", origin, reason="empty_source")
        target = self.tokenize(self.target_text(raw))
        if not target:
            raise DataError("training target has no words", origin, reason="empty_target")
        if self.options.max_target_len:
            target = target[: self.options.max_target_len]
        limit = self.options.max_stored_sentences
        return ProcessedExample(
            id=raw.id,
            origin=origin,
            sentences=kept_sentences[:limit] if limit else kept_sentences,
            sentence_tokens=sentence_tokens,
            target_tokens=target,
            references=list(raw.references),
            salient=raw.salient,
        )

    def chunks(self, example: ProcessedExample) -> list[list[str]]:
        """The words of ``example`` arranged in the configured layout (<= M chunks of <= N)."""
        opts = self.options
        return layout_chunks(example.sentence_tokens, opts.layout, opts.num_chunks, opts.chunk_len, EOS)
