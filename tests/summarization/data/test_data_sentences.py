"""The rule-based sentence splitter."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scg_summarize.data.sentences import split_paragraphs, split_sentences, split_text

from .unicode_text import unicode_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One here. Two there! Three? Four",
         ["One here.", "Two there!", "Three?", "Four"]),
        ("Mr. Pell met Dr. J. K. Arlo. They talked.",
         ["Mr. Pell met Dr. J. K. Arlo.", "They talked."]),
        ("Prices rose in the U.S. Economy grew.", ["Prices rose in the U.S. Economy grew."]),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ("\u201cWe won.\u201d \u201cReally?\u201d", ["\u201cWe won.\u201d", "\u201cReally?\u201d"]),
        ("(It rained.) (It stopped.)", ["(It rained.)", "(It stopped.)"]),
        ("Room No. 5 is free. Go now.", ["Room No. 5 is free.", "Go now."]),
        ("He said no. Then left.", ["He said no.", "Then left."]),
        ("version 2.5 is out. lower case goes on.", ["version 2.5 is out. lower case goes on."]),
        ("Tokenized text ends here . The next one starts .",
         ["Tokenized text ends here .", "The next one starts ."]),
        ("Line one\nLine two. Still two", ["Line one", "Line two.", "Still two"]),
        ("Wait... What now?", ["Wait...", "What now?"]),
        ("", []),
        ("  \n \n", []),
    ],
)  # fmt: skip
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_paragraph_helpers() -> None:
    assert split_paragraphs(" a \n\n b\n") == ["a", "b"]
    assert split_text(["One. Two.", "Three."]) == ["One.", "Two.", "Three."]
    assert split_text(["One. Two.", "Three."], split=False) == ["One. Two.", "Three."]


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    st.one_of(
        unicode_text(100),
        st.lists(st.sampled_from(["Mr.", "A", "b", ".", "!", "?", " ", "\n", '"', "U.S.", "x"]),
                 max_size=40).map("".join),
    )
)  # fmt: skip
def test_splitting_only_removes_whitespace(text: str) -> None:
    sentences = split_sentences(text)
    assert all(s and s == s.strip() for s in sentences)
    assert "".join("".join(s.split()) for s in sentences) == "".join(text.split())
