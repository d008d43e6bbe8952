"""Preprocessing options (:class:`PrepOptions`) and their stable hash.

The options fully determine how raw text becomes token ids, so they are stored in the prepared
corpus's ``meta.json`` together with :func:`options_hash`; a training run can compare the hash
with the one it expects and refuse data prepared differently.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

from ..choices import LAYOUTS

__all__ = ["LAYOUTS", "TOKENIZERS", "PrepOptions", "options_hash"]

Layout = Literal["grid", "sentences"]
Tokenizer = Literal["ptb", "whitespace"]
TargetMode = Literal["first", "concat"]

TOKENIZERS: tuple[str, ...] = ("ptb", "whitespace")
TARGET_MODES: tuple[str, ...] = ("first", "concat")


@dataclass(frozen=True)
class PrepOptions:
    """How raw documents are turned into chunked token ids (the paper's preprocessing).

    Attributes:
        lowercase: lowercase all text before counting and encoding.
        digits_to_hash: replace every digit with ``#`` (``3.5`` -> ``#.#``).
        tokenizer: ``"ptb"`` (the regex PTB-style tokenizer) or ``"whitespace"`` for input
            that is already tokenized (e.g. the Gigaword "sumdata" files).
        split_sentences: run the rule-based sentence splitter on sources that do not come
            as a list of sentences.
        layout: ``"grid"`` (the first ``num_chunks * chunk_len`` words cut into equal chunks)
            or ``"sentences"`` (one sentence per chunk, padded/truncated to ``chunk_len``).
        num_chunks: M, the number of coarse chunks.
        chunk_len: N, the number of words per chunk.
        vocab_size: V, the number of most frequent words kept (specials come on top).
        min_freq: words seen fewer times in the vocabulary split are not kept.
        max_target_len: maximum number of target words (before ``<s>``/``</s>`` are added);
            ``0`` means no limit.
        target_mode: ``"first"`` trains on the first reference (the paper); ``"concat"`` on
            all references joined in order.
        max_line_chars: lines longer than this many characters are rejected as bad input.
        max_stored_sentences: how many raw source sentences to keep per example for
            baselines (``0`` keeps them all).
    """

    lowercase: bool = True
    digits_to_hash: bool = True
    tokenizer: Tokenizer = "ptb"
    split_sentences: bool = True
    layout: Layout = "grid"
    num_chunks: int = 10
    chunk_len: int = 40
    vocab_size: int = 50_000
    min_freq: int = 1
    max_target_len: int = 100
    target_mode: TargetMode = "first"
    max_line_chars: int = 1_000_000
    max_stored_sentences: int = 0

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {TOKENIZERS}, got {self.tokenizer!r}")
        if self.target_mode not in TARGET_MODES:
            raise ValueError(f"target_mode must be one of {TARGET_MODES}, got {self.target_mode!r}")
        positive = ("num_chunks", "chunk_len", "vocab_size", "min_freq", "max_line_chars")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("max_target_len", "max_stored_sentences"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable dict of all fields."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrepOptions:
        """Rebuild options from :meth:`to_dict` output; unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown preprocessing option(s): {', '.join(unknown)}")
        return cls(**data)

    def with_changes(self, **changes: Any) -> PrepOptions:
        """A copy with some fields replaced (validated again)."""
        return replace(self, **changes)


def options_hash(options: PrepOptions, *, extra: dict[str, Any] | None = None) -> str:
    """A short stable hex digest of the options (and of optional ``extra`` settings).

    The digest depends only on the field values, not on their order or the Python version,
    so two corpora prepared with the same settings have the same hash.
    """
    payload: dict[str, Any] = {"options": options.to_dict()}
    if extra:
        payload["extra"] = extra
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
