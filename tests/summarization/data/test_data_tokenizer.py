"""The PTB-style tokenizer: conventions, normalization and a character round-trip property."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scg_summarize.data.tokenizer import (
    detokenize,
    is_abbreviation,
    make_tokenizer,
    map_digits,
    normalize_chars,
    token_surface,
    tokenize,
    whitespace_tokenize,
)

from .unicode_text import unicode_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I don't know.", ["I", "do", "n't", "know", "."]),
        ("It's John's; they're sure we'll go, I'd say I'm in.",
         ["It", "'s", "John", "'s", ";", "they", "'re", "sure", "we", "'ll", "go", ",", "I",
          "'d", "say", "I", "'m", "in", "."]),
        ("We can't stop", ["We", "ca", "n't", "stop"]),
        ('He said "hello" twice.', ["He", "said", "``", "hello", "''", "twice", "."]),
        ("\u201cCurly,\u201d he wrote.", ["``", "Curly", ",", "''", "he", "wrote", "."]),
        ("It cost $1,000.50 (about 3.5%).",
         ["It", "cost", "$", "1,000.50", "-LRB-", "about", "3.5", "%", "-RRB-", "."]),
        ("Mr. Smith of the U.S. met Dr. Who at 10:30 a.m. today.",
         ["Mr.", "Smith", "of", "the", "U.S.", "met", "Dr.", "Who", "at", "10:30", "a.m.",
          "today", "."]),
        ("The 39-year-old won -- again... Really?!",
         ["The", "39-year-old", "won", "--", "again", "...", "Really", "?", "!"]),
        ("the players' coach O'Neill", ["the", "players", "'", "coach", "O'Neill"]),
        ("No. 10 said no.", ["No.", "10", "said", "no", "."]),
        ("wait,what:now", ["wait", ",", "what", ":", "now"]),
        ("an en\u2013dash and an em\u2014dash", ["an", "en", "--", "dash", "and", "an", "em", "--",
                                                 "dash"]),
        ("", []),
        ("   \n\t ", []),
    ],
)  # fmt: skip
def test_ptb_conventions(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_lowercase_and_digit_mapping() -> None:
    tokens = tokenize("Apple sold 1,234 units in Q3 2015 (up 7.5%).", lowercase=True, digits_to_hash=True)
    assert tokens == ["apple", "sold", "#,###", "units", "in", "q#", "####", "-lrb-", "up", "#.#", "%", "-rrb-", "."]
    assert map_digits("a1b22\u0663") == "a#b###"  # Arabic-Indic digit three counts too


def test_pretokenized_input_stays_intact_with_whitespace_tokenizer() -> None:
    line = "australia 's deficit shrunk by #.## billion -lrb- us -rrb- `` quote '' <unk> ."
    assert whitespace_tokenize(line) == line.split()
    assert whitespace_tokenize("A 1", lowercase=True, digits_to_hash=True) == ["a", "#"]


def test_make_tokenizer_selects_and_configures() -> None:
    assert make_tokenizer("ptb")("Don't 5") == ["do", "n't", "#"]
    assert make_tokenizer("whitespace", lowercase=False)("Don't 5") == ["Don't", "#"]
    with pytest.raises(ValueError, match="unknown tokenizer"):
        make_tokenizer("bpe")


def test_abbreviations() -> None:
    assert is_abbreviation("Mr.")
    assert is_abbreviation("U.S.")
    assert is_abbreviation("J.")
    assert is_abbreviation("No.", "10")
    assert not is_abbreviation("no.", "Then")
    assert not is_abbreviation("house.")
    assert not is_abbreviation("wait..")


def test_normalize_chars() -> None:
    assert normalize_chars("\u2018a\u2019 \u201cb\u201d ``c'' d\u2026") == '\'a\' "b" "c" d...'
    assert normalize_chars("zero\u200bwidth soft\u00adhyphen") == "zerowidth softhyphen"
    assert normalize_chars("bell\x07tab\tnl\n") == "bell tab\tnl\n"


def test_detokenize_is_readable() -> None:
    tokens = tokenize('He said "I can\'t (really) go," then left.')
    assert detokenize(tokens) == 'He said "I can\'t (really) go," then left.'
    assert token_surface("-lrb-") == "(" and token_surface("''") == '"'


_ESCAPES = {"-lrb-": "(", "-rrb-": ")", "-lsb-": "[", "-rsb-": "]", "-lcb-": "{", "-rcb-": "}"}


def _canonical(text: str) -> str:
    """Lowercase (final sigma folded), digits -> #, whitespace removed, bracket escapes undone
    (so a literal ``-LRB-`` in the input and a tokenized ``(`` compare equal)."""
    text = "".join(text.lower().replace("\u03c2", "\u03c3").split())
    for escape, bracket in _ESCAPES.items():
        text = text.replace(escape, bracket)
    return map_digits(text)


_PIECES = [
    *"abcXYZ019 .,;:!?'\"`()[]{}$%&-@#/\n\t",
    *"\u201c\u201d\u2018\u2019\u2013\u2026\u00e9\u00a0\u200b\u03a3",
    "n't", "'s", "Mr.", "U.S.", "3.5", "1,000", "...", "--", "''", "``",
]  # fmt: skip
_PUNCT_HEAVY = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)


# the two properties of the tokenizer on each generated text (one search, one tokenization)
@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.one_of(unicode_text(80), _PUNCT_HEAVY))
def test_tokens_keep_every_non_space_character_and_the_flags_only_normalize(text: str) -> None:
    tokens = tokenize(text, lowercase=True, digits_to_hash=True)
    # every non-space character is kept, in order
    assert all(tok and not any(ch.isspace() for ch in tok) for tok in tokens)
    joined = "".join(token_surface(tok) for tok in tokens)
    assert _canonical(joined) == _canonical(normalize_chars(text))
    # lowercase and digits_to_hash normalize the tokens, never the segmentation
    assert not any(ch.isdecimal() for tok in tokens for ch in tok)
    assert all(tok == tok.lower() for tok in tokens)
    raw = tokenize(text)
    assert len(raw) == len(tokens)  # the flags never change the segmentation
    assert [map_digits(t.lower()) for t in raw] == tokens
