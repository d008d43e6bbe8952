"""The heuristic filters of Rush, Chopra & Weston (2015, Section 7.1) for Gigaword title-article pairs.

Gigaword holds many spurious headline-article pairs; the paper drops a pair when

1. ``no_overlap``: title and article share no non-stop word;
2. ``byline``: the title holds a byline or another editing mark;
3. ``question_colon``: the title has a question mark or a colon.

Words are compared lowercased; a *non-stop word* is a token with a letter or digit (``#`` counts
as a digit, as in the digit-mapped sumdata files) that is not in :data:`STOP_WORDS`, a short
list of English function words. A byline is ``by`` followed by exactly two words at the end of
the title (a name: lowercased data cannot tell ``by julie bradford`` from ``by car bomb``, so the
latter is dropped too), or a title starting with ``by``; editing marks are wire-service annotations:
``urgent``, ``corrected``, ``eds``, ``advisory``, ``sidebar``, ``embargoed`` (:data:`EDIT_MARKS`),
``adv##``, ``update#`` and ``@``. These are this implementation's reading of the paper's one-line
descriptions, not the original scripts.

:class:`GigawordFilter` is applied by :func:`scg_summarize.data.readers.read_parallel` when a
``ReaderConfig.gigaword_filters`` is set (``prepare --format parallel --gigaword-filter ...``);
every dropped pair is counted under ``filtered_<name>`` in the bad-input report (stored in the
prepared corpus's ``meta.json``), never dropped silently.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["EDIT_MARKS", "FILTERS", "STOP_WORDS", "GigawordFilter"]

#: The filter names, in the order they are checked.
FILTERS: tuple[str, ...] = ("question_colon", "byline", "no_overlap")

STOP_WORDS = frozenset(
    """a an the and or but nor so yet of in on at to for from by with about as into onto over under
    after before between through during without within against among per via up down out off than
    then there here this that these those it its it's he him his she her hers they them their we us
    our you your i me my is are was were be been being am has have had do does did will would shall
    should can could may might must not no who whom whose which what when where why how all any
    each both some such more most other own same only very just also 's 't said says say new""".split()
)

EDIT_MARKS = frozenset("urgent corrected eds advisory sidebar embargoed".split())
_EDIT_PATTERNS = (re.compile(r"^adv#+$"), re.compile(r"^update#+$"), re.compile(r"@"))
_CONTENT = re.compile(r"[^\W_]|#")


def _content_words(tokens: Sequence[str]) -> set[str]:
    return {t for t in (w.lower() for w in tokens) if t not in STOP_WORDS and _CONTENT.search(t)}


@dataclass(frozen=True)
class GigawordFilter:
    """Which of the paper's filters to apply (see the module docstring)."""

    no_overlap: bool = True
    byline: bool = True
    question_colon: bool = True

    @classmethod
    def from_names(cls, names: Sequence[str]) -> GigawordFilter:
        """A filter with exactly the named checks on (``all`` turns every one on)."""
        chosen = set(FILTERS) if "all" in names else set(names)
        unknown = chosen - set(FILTERS)
        if unknown:
            raise ValueError(f"unknown Gigaword filter(s) {sorted(unknown)}; expected {FILTERS} or 'all'")
        return cls(**{name: name in chosen for name in FILTERS})

    @property
    def active(self) -> bool:
        return self.no_overlap or self.byline or self.question_colon

    def reason(self, article: str, title: str) -> str | None:
        """The name of the first filter that drops the pair, or None to keep it."""
        words = title.lower().split()
        if self.question_colon and ("?" in title or ":" in title):
            return "question_colon"
        if self.byline and _has_byline(words):
            return "byline"
        if self.no_overlap and not (_content_words(words) & _content_words(article.split())):
            return "no_overlap"
        return None


def _has_byline(words: Sequence[str]) -> bool:
    if not words:
        return False
    if words[0] == "by":
        return True
    if len(words) >= 4 and words[-3] == "by":  # "... by john smith" at the end
        return True
    return any(w in EDIT_MARKS or any(p.search(w) for p in _EDIT_PATTERNS) for w in words)
