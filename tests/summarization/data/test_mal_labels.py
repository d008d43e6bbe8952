"""MAL's word saliency labels (Li et al., Section 2.2) on hand-made pairs, and the stopword source."""

from __future__ import annotations

import pytest
import torch
from scg_summarize.data import Vocab, tokenize
from scg_summarize.data.saliency_labels import (
    ContentWords,
    is_content_word,
    is_punctuation,
    load_stopwords,
    saliency_labels,
)

stop_words = pytest.importorskip("stop_words")


def test_stopwords_come_from_the_package() -> None:
    words = load_stopwords("en")
    assert words == frozenset(w.lower() for w in stop_words.get_stop_words("en"))
    assert {"the", "of", "and"} <= words
    assert load_stopwords("english") == words  # the package's language names work too


def test_unknown_language_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="klingon"):
        load_stopwords("klingon")


def test_labels_on_a_hand_made_pair() -> None:
    stop = load_stopwords("en")
    source = tokenize("The Debian package provides a fast , portable compression library ( zlib ) .")
    reference = tokenize("portable compression library")
    labels = saliency_labels(source, reference, stop)
    salient = [w for w, r in zip(source, labels) if r]
    assert salient == ["portable", "compression", "library"]
    # stopwords that occur in the reference still get 0; so does punctuation
    labels = saliency_labels(["the", "library", ",", "."], ["the", "library", ",", "."], stop)
    assert labels == [0, 1, 0, 0]


def test_labels_ignore_case_and_repeat_for_every_occurrence() -> None:
    stop = load_stopwords("en")
    assert saliency_labels(["Zlib", "zlib", "ZLIB", "gzip"], ["zlib"], stop) == [1, 1, 1, 0]


@pytest.mark.parametrize(
    "token, punct", [(".", True), ("--", True), ("#.#", True), ("``", True), ("39-year-old", False), ("x86", False)]
)
def test_punctuation(token: str, punct: bool) -> None:
    assert is_punctuation(token) is punct


def test_specials_and_bracket_escapes_are_not_content() -> None:
    stop = load_stopwords("en")
    for token in ("<unk>", "</s>", "<s>", "<pad>", "-lrb-", "-RRB-"):
        assert not is_content_word(token, stop)
    assert is_content_word("compression", stop)


def test_id_level_labels_match_the_token_level_function() -> None:
    stop = load_stopwords("en")
    source = tokenize("the fast zlib library compresses data , the library is portable .")
    reference = tokenize("zlib : a portable data library")
    vocab = Vocab(sorted(set(source) | set(reference)))
    content = ContentWords(vocab, stop)
    src = torch.tensor([vocab.encode(source) + [0, 0]])  # padded
    src_mask = src != 0
    tgt = torch.tensor([vocab.encode(reference, bos=True, eos=True) + [0]])
    tgt_mask = tgt != 0
    got = content.labels(src, src_mask, tgt, tgt_mask)[0].tolist()
    assert got == [float(r) for r in saliency_labels(source, reference, stop)] + [0.0, 0.0]
    # a word present only in a masked (padding) target position does not count
    fast = vocab.encode(["fast"])[0]
    tgt[0, -1] = fast
    assert content.labels(src, src_mask, tgt, tgt_mask)[0].tolist() == got
    tgt_mask[0, -1] = True
    assert content.labels(src, src_mask, tgt, tgt_mask)[0, source.index("fast")] == 1.0


def test_unknown_words_never_match() -> None:
    stop = load_stopwords("en")
    vocab = Vocab(["zlib"])
    content = ContentWords(vocab, stop)
    src = torch.tensor([[vocab.unk_id, vocab.encode(["zlib"])[0]]])
    tgt = torch.tensor([[vocab.bos_id, vocab.unk_id, vocab.encode(["zlib"])[0], vocab.eos_id]])
    labels = content.labels(src, src != 0, tgt, tgt != 0)
    assert labels.tolist() == [[0.0, 1.0]]
