"""A rule-based sentence splitter for sources that do not come pre-split.

Rules, applied to each line (a newline always ends a sentence, so paragraphs never merge):

* a sentence ends at a run of ``.``, ``!`` or ``?`` (optionally followed by closing quotes or
  brackets) that is followed by whitespace and then an uppercase letter, an opening quote or
  an opening bracket;
* a single ``.`` does not end a sentence when the word it ends is an abbreviation: titles
  (``Mr.``, ``Dr.``), letter-dot acronyms and initials (``U.S.``, ``J. K.``), month names,
  ``Inc.``/``Ltd.``, and ``No.`` before a number (see
  :func:`~scg_summarize.data.tokenizer.is_abbreviation`).

The splitter is deliberately conservative: "moved to the U.S. He then ..." stays one sentence.
Sentences are returned as the original text (stripped), so they can be shown or scored by
baselines such as LEAD-3 without being re-tokenized.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .tokenizer import is_abbreviation

__all__ = ["split_paragraphs", "split_sentences", "split_text"]

_END_RE = re.compile(r"([.!?]+)([\"'\u201d\u2019)\]]*)(\s+)(?=\S)")
_OPENERS = frozenset("\"'\u201c\u2018([")
_CLOSERS = "\"'\u201d\u2019)]"


def _starts_sentence(text: str) -> bool:
    first = text[0]
    return first.isupper() or first in _OPENERS


def _ends_with_abbreviation(before: str, punct: str, after: str) -> bool:
    """Whether the ``.`` ending ``before + punct`` belongs to an abbreviation."""
    if punct != ".":
        return False
    words = before.split()
    if not words:
        return False
    word = words[-1].lstrip(_CLOSERS + "\u201c\u2018(") + "."
    next_word = after.split(maxsplit=1)[0] if after.strip() else None
    return is_abbreviation(word, next_word)


def split_sentences(text: str) -> list[str]:
    """Split one paragraph (or any text; newlines are hard breaks) into sentences.

    Returns the stripped, non-empty sentence strings in order. Text without any sentence
    boundary comes back as a single sentence.
    """
    sentences: list[str] = []
    for line in text.splitlines():
        start = 0
        for match in _END_RE.finditer(line):
            after = line[match.end() :]
            if not _starts_sentence(after):
                continue
            punct = match.group(1)
            before = line[start : match.start(1)]
            if _ends_with_abbreviation(before, punct, after):
                continue
            sentence = line[start : match.end(2)].strip()
            if sentence:
                sentences.append(sentence)
            start = match.end()
        rest = line[start:].strip()
        if rest:
            sentences.append(rest)
    return sentences


def split_paragraphs(text: str) -> list[str]:
    """The non-blank lines of ``text``, stripped (one paragraph per line)."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def split_text(paragraphs: Iterable[str], *, split: bool = True) -> list[str]:
    """Sentences of several paragraphs: each split with :func:`split_sentences` when ``split``
    is True, otherwise each non-blank paragraph taken as one sentence."""
    out: list[str] = []
    for paragraph in paragraphs:
        if split:
            out.extend(split_sentences(paragraph))
        else:
            out.extend(split_paragraphs(paragraph))
    return out
