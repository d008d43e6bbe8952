"""A rule-based, PTB-style word tokenizer (regular expressions only).

Conventions follow the Penn Treebank as used by the summarization literature:

* punctuation is split off (``word , word``), but commas, colons and periods inside numbers
  stay (``1,000.50``, ``10:30``, ``3.5``), hyphenated words stay whole (``39-year-old``);
* contractions are split: ``don't`` -> ``do n't``, ``it's`` -> ``it 's``, ``I'm`` -> ``I 'm``;
* double quotes become ````` (opening) and ``''`` (closing); brackets become ``-lrb-`` etc.;
* a final period is split off unless the word is an abbreviation (``Mr.``, ``U.S.``, ``Inc.``);
* optional lowercasing and digit mapping (every digit -> ``#``).

Only whitespace is ever removed: joining the tokens (after :func:`token_surface`) gives back
the non-space characters of :func:`normalize_chars` of the input.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

__all__ = [
    "ABBREVIATIONS",
    "detokenize",
    "is_abbreviation",
    "make_tokenizer",
    "map_digits",
    "normalize_chars",
    "token_surface",
    "tokenize",
    "whitespace_tokenize",
]

#: Words (lowercase, without the period) that keep their trailing period.
ABBREVIATIONS: frozenset[str] = frozenset(
    "mr mrs ms messrs dr prof st jr sr gen sen rep gov lt col sgt capt cmdr adm maj rev hon "
    "pres supt insp vs etc inc ltd co corp bros dept univ assn est approx ave blvd rd mt ft "
    "jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs fri sat "
    "sun cf al".split()
)
# Abbreviations only when a number follows ("No. 10"), otherwise ordinary words ("said no.").
_NUMBER_ABBREVIATIONS = frozenset({"no", "nos", "art", "vol", "p", "pp"})

_CHAR_MAP = {
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
    "\u00ab": '"', "\u00bb": '"',
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'", "`": "'",
    "\u2012": "--", "\u2013": "--", "\u2014": "--", "\u2015": "--",
    "\u2026": "...",
    "\u200b": "", "\u200c": "", "\u200d": "", "\u2060": "", "\ufeff": "", "\u00ad": "",
}  # fmt: skip
_CHAR_TABLE = str.maketrans(_CHAR_MAP)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

_OPEN_QUOTE_RE = re.compile(r'(^|(?<=[\s(\[{]))"')
# Set apart by spaces, in one pass: ellipses, runs of dashes, the symbols, and commas and colons that are not
# inside a number. The four never overlap, and spaces around one never change whether another matches (the
# number test looks at digits only), so one pass splits exactly as four passes in turn would. The lookahead names
# every character a match can start with: the engine skips the other positions at once instead of trying the
# five alternatives (and the digit lookbehind) at each (~3x faster over CNN/DM sentences, the same matches).
_SPLIT_OFF_RE = re.compile(r"(?=[.\-;@!?%$&()\[\]{},:])(?:\.{3,}|--+|[;@!?%$&()\[\]{}]|(?<!\d)[,:]|[,:](?!\d))")
_BRACKET_RE = re.compile(r"[()\[\]{}]")
_NT_RE = re.compile(r"(?i)(\w)(n't)\b")
_CLITIC_RE = re.compile(r"(?i)(\w)('(?:s|re|ve|ll|d|m))\b")
# A lone single quote; never one of the two characters of an inserted ``''`` token.
_TRAILING_QUOTE_RE = re.compile(r"([^\s'])'(?=\s|$)")
_LEADING_QUOTE_RE = re.compile(r"(?i)(^|\s)'(?!(?:s|re|ve|ll|d|m)\b)(?=[^\s'])")
_ACRONYM_RE = re.compile(r"^(?:[^\W\d_]\.)+$")
_TRAILING_DOTS_RE = re.compile(r"^(.*?[^.])(\.+)$")
_DIGIT_RE = re.compile(r"\d")

_BRACKETS = {
    "(": "-LRB-", ")": "-RRB-", "[": "-LSB-", "]": "-RSB-", "{": "-LCB-", "}": "-RCB-",
}  # fmt: skip
_UNBRACKETS = {v.lower(): k for k, v in _BRACKETS.items()}
_NO_SPACE_BEFORE = frozenset(
    {",", ".", "!", "?", ";", ":", "%", "''", "'", ")", "]", "}", "n't", "'s", "'re", "'ve"}
    | {"'ll", "'d", "'m", "..."}
)
_NO_SPACE_AFTER = frozenset({"``", "(", "[", "{", "$"})
_OPEN_BRACKETS = frozenset("([{")
_CLOSE_BRACKETS = frozenset(")]}")


def normalize_chars(text: str) -> str:
    """Map typographic quotes/dashes/ellipses to ASCII and drop invisible characters.

    Curly and angle double quotes (and ````` / ``''`` pairs) become ``"``; curly single quotes
    and backticks become ``'``; en/em dashes become ``--``; ``…`` becomes ``...``; zero-width
    characters and soft hyphens are removed; other control characters become spaces.
    """
    text = _CONTROL_RE.sub(" ", text.translate(_CHAR_TABLE))
    return text.replace("''", '"')


def is_abbreviation(word: str, next_word: str | None = None) -> bool:
    """Whether ``word`` (ending with a single ``.``) is an abbreviation, not a sentence end.

    True for letter-dot acronyms and initials (``U.S.``, ``e.g.``, ``J.``), for the words in
    :data:`ABBREVIATIONS` (``Mr.``, ``Inc.``), and for ``No.``/``Vol.``/``p.`` when the next
    word starts with a digit.
    """
    if not word.endswith(".") or word.endswith(".."):
        return False
    if _ACRONYM_RE.match(word):
        return True
    base = word[:-1].lower()
    if base in ABBREVIATIONS:
        return True
    return base in _NUMBER_ABBREVIATIONS and next_word is not None and next_word[:1].isdigit()


def map_digits(token: str) -> str:
    """Replace every (Unicode) digit with ``#``."""
    return _DIGIT_RE.sub("#", token)


def _split_periods(words: list[str]) -> list[str]:
    # only words with a trailing period can change (split() gives no empty word): the others are copied in slices
    out: list[str] = []
    start = 0
    for i in [i for i, word in enumerate(words) if word[-1] == "."]:
        word = words[i]
        match = _TRAILING_DOTS_RE.match(word)
        if match is None or word.startswith("..."):
            continue
        base, dots = match.groups()
        nxt = words[i + 1] if i + 1 < len(words) else None
        if len(dots) == 1 and is_abbreviation(word, nxt):
            continue
        out += words[start:i]
        out += (base, dots)
        start = i + 1
    if not start:
        return words
    out += words[start:]
    return out


def _finish(tokens: Iterable[str], lowercase: bool, digits_to_hash: bool) -> list[str]:
    out = list(tokens)
    if not out or not (lowercase or digits_to_hash):
        return out
    # tokens hold no whitespace, so the joined text splits back into them: one call each for the whole
    # sentence instead of one per token (str.lower's context rule, a final sigma, stops at a space as it
    # does at the end of a token)
    text = " ".join(out)
    if lowercase:
        text = text.lower()
    if digits_to_hash:
        text = map_digits(text)
    return text.split(" ")


def tokenize(text: str, *, lowercase: bool = False, digits_to_hash: bool = False) -> list[str]:
    """Split ``text`` into PTB-style tokens.

    Args:
        text: any string (one sentence or several; newlines are ordinary whitespace).
        lowercase: lowercase the tokens.
        digits_to_hash: replace every digit with ``#``.
    """
    text = normalize_chars(text)
    if '"' in text:  # (most sentences have no quotes: each rule is skipped where it cannot match)
        text = _OPEN_QUOTE_RE.sub(" `` ", text).replace('"', " '' ")
    text = _SPLIT_OFF_RE.sub(r" \g<0> ", text)
    if "'" in text:  # contractions and single quotes
        text = _NT_RE.sub(r"\1 \2", text)
        text = _CLITIC_RE.sub(r"\1 \2", text)
        text = _TRAILING_QUOTE_RE.sub(r"\1 '", text)
        text = _LEADING_QUOTE_RE.sub(r"\1' ", text)
    words = _split_periods(text.split())
    if _BRACKET_RE.search(text):  # (a bracket is always a token of its own: split off above)
        words = [_BRACKETS.get(w, w) for w in words]
    return _finish(words, lowercase, digits_to_hash)


def whitespace_tokenize(text: str, *, lowercase: bool = False, digits_to_hash: bool = False) -> list[str]:
    """Split already-tokenized text on whitespace (with the same optional normalization)."""
    return _finish(text.split(), lowercase, digits_to_hash)


def make_tokenizer(
    kind: str = "ptb", *, lowercase: bool = True, digits_to_hash: bool = True
) -> Callable[[str], list[str]]:
    """A ``text -> tokens`` function: ``kind`` is ``"ptb"`` or ``"whitespace"``."""
    if kind == "ptb":
        base = tokenize
    elif kind == "whitespace":
        base = whitespace_tokenize
    else:
        raise ValueError(f"unknown tokenizer {kind!r} (expected 'ptb' or 'whitespace')")

    def _tokenizer(text: str) -> list[str]:
        return base(text, lowercase=lowercase, digits_to_hash=digits_to_hash)

    return _tokenizer


def token_surface(token: str) -> str:
    """The characters a token stands for: ``-lrb-`` -> ``(``, ````` and ``''`` -> ``"``."""
    if token in ("``", "''"):
        return '"'
    return _UNBRACKETS.get(token.lower(), token)


def detokenize(tokens: Iterable[str]) -> str:
    """Join tokens into readable text (undoing quote/bracket escapes and spacing rules).

    Special tokens such as ``</s>`` are kept as words; strip them before calling if unwanted.
    """
    out: list[str] = []
    glue = True
    for token in tokens:
        surface = token_surface(token)
        if out and not glue and token not in _NO_SPACE_BEFORE and surface not in _CLOSE_BRACKETS:
            out.append(" ")
        out.append(surface)
        glue = token in _NO_SPACE_AFTER or surface in _OPEN_BRACKETS
    return "".join(out)
