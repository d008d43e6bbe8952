"""Arbitrary text for the tokenizer and sentence-splitter properties, without Hypothesis's Unicode table.

``st.text()``'s default alphabet needs Hypothesis's table of every code point's category, which it
computes on first use in a fresh clone (3.2 s of CPU; cached under ``.hypothesis/`` afterwards). The
properties need every *kind* of character rather than every code point, so the alphabet here names
them: every whitespace character of the Basic Multilingual Plane (what ``str.split`` and ``str.strip``
act on), ASCII, controls and invisible characters, letters whose case mapping changes their length or
depends on context, decimal digits of other scripts and numerals that are not decimal, combining
marks, right-to-left and CJK text, typographic punctuation, an astral emoji and math digit, a private
use and an unassigned code point.
"""

from __future__ import annotations

import string

from hypothesis import strategies as st

WHITESPACE = [c for c in map(chr, range(0x10000)) if c.isspace()]
OTHERS = [
    *string.ascii_letters,
    *string.digits,
    *string.punctuation,
    *"\x00\x07\x1b\x7f\u00ad\u200b\u200d\u2060\ufeff",  # controls and invisible characters
    *"\u00df\u0130\ufb01\u03a3\u03c2\u01c4\u01c5\u0149",  # ß İ ﬁ Σ ς Ǆ ǅ ŉ: case maps change length or context
    *"\u0663\u096b\uff15\U0001d7d9\u2460\u00bd\u2167",  # ٣ ५ ５ 𝟙 (decimal) ① ½ Ⅷ (numeric, not decimal)
    *"\u0301\u0308\u20dd",  # combining marks
    *"\u05d0\u0628\u4e2d\u6587\u3002\uff01\u3001",  # Hebrew, Arabic, CJK and its punctuation
    *"\u201c\u201d\u2018\u2019\u2013\u2014\u2026\u00ab\u00bb\u00bf\u00a1",  # typographic punctuation
    *"\U0001f600\ue000\u0378",  # an astral emoji, a private use and an unassigned code point
]
ALPHABET = WHITESPACE + OTHERS


def unicode_text(max_size: int) -> st.SearchStrategy[str]:
    """Strings of up to ``max_size`` characters drawn from `ALPHABET`."""
    return st.text(alphabet=st.sampled_from(ALPHABET), max_size=max_size)
