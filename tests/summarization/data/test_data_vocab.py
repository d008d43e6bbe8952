"""The vocabulary: specials, frequency order, encode/decode and the file format."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
import torch
from scg_summarize.data.vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocab


def test_specials_have_fixed_ids() -> None:
    vocab = Vocab(["a", "b"])
    assert [vocab.token_to_id(t) for t in (PAD, UNK, BOS, EOS)] == [0, 1, 2, 3]
    assert (vocab.pad_id, vocab.unk_id, vocab.bos_id, vocab.eos_id) == (0, 1, 2, 3)
    assert vocab.tokens == [*SPECIALS, "a", "b"]
    assert len(vocab) == 6


def test_from_counter_keeps_the_most_frequent_with_alphabetical_ties() -> None:
    counter = Counter({"the": 10, "cat": 3, "bat": 3, "rare": 1, "<unk>": 99, "</s>": 50})
    vocab = Vocab.from_counter(counter, max_size=3)
    assert vocab.tokens[4:] == ["the", "bat", "cat"]  # specials in the counter are ignored
    assert "rare" not in vocab
    assert Vocab.from_counter(counter, max_size=10, min_freq=3).tokens[4:] == ["the", "bat", "cat"]
    assert Vocab.build([["x", "y"], ["y"]], max_size=5).tokens[4:] == ["y", "x"]


def test_encode_maps_unknown_words_and_decode_inverts() -> None:
    vocab = Vocab(["a", "b"])
    ids = vocab.encode(["a", "zzz", "b"], bos=True, eos=True)
    assert ids == [2, 4, 1, 5, 3]
    assert vocab.decode(ids) == ["a", UNK, "b"]
    assert vocab.decode(ids, keep_unk=False) == ["a", "b"]
    assert vocab.decode(torch.tensor([4, 3, 5, 0])) == ["a"]  # stops at </s>
    assert vocab.decode([4, 3, 5, 0], stop_at_eos=False) == ["a", "b"]
    assert vocab.decode([4, 3, 0], strip_specials=False, stop_at_eos=False) == ["a", EOS, PAD]
    assert vocab.unk_rate(["a", "q", "r", "b"]) == 0.5
    with pytest.raises(IndexError):
        vocab.id_to_token(99)


def test_invalid_tokens_are_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        Vocab(["a", "a"])
    with pytest.raises(ValueError, match="no spaces"):
        Vocab(["a b"])
    with pytest.raises(ValueError, match="duplicate"):
        Vocab(["<unk>"])


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    vocab = Vocab.from_counter(Counter({"\u00e9t\u00e9": 4, "#.#": 2, "-lrb-": 1}), 10)
    vocab.save(tmp_path / "vocab.txt")
    lines = (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert lines[:5] == ["<pad>\t0", "<unk>\t0", "<s>\t0", "</s>\t0", "\u00e9t\u00e9\t4"]
    loaded = Vocab.load(tmp_path / "vocab.txt")
    assert loaded == vocab and loaded.counts["#.#"] == 2
    (tmp_path / "bad.txt").write_text("<unk>\n<pad>\n", encoding="utf-8")
    with pytest.raises(ValueError, match="expected special token"):
        Vocab.load(tmp_path / "bad.txt")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"no words \(an empty vocabulary file"),
        (b"<pad>\n<unk>\n<s>\n</s>\n", r"no words"),
        (b"\xff\xfe", r"not UTF-8 text \(byte 0xff at offset 0\)"),
        (b"<pad>\n<unk>\n<s>\n</s>\nword\tmany\n", r":5: the count 'many' of 'word' is not an integer"),
    ],
)
def test_a_vocabulary_file_without_words_or_text_is_refused_naming_it(
    tmp_path: Path, content: bytes, message: str
) -> None:
    """An empty vocabulary file was accepted (4 specials, every word <unk>); bad bytes and counts
    raised Python's own errors, naming no file."""
    path = tmp_path / "v.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*" + message):
        Vocab.load(path)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: Vocab("abc"), TypeError, r"expected a list of words, got a string 'abc'"),  # (its characters)
        (lambda: Vocab(["a", 1]), TypeError, r"expected words \(strings\), got int 1"),
        (lambda: Vocab(["a", "b"]).encode("a b"), TypeError, r"expected a list of words \(split the text\)"),
        (lambda: Vocab(["a", "b"]).decode([4.9]), TypeError, r"id 0 is 4.9, not an integer"),  # (was cut to 4)
        (lambda: Vocab(["a", "b"]).decode([99]), IndexError, r"token id 99 is not in the vocabulary \(ids 0-5\)"),
        (lambda: Vocab.from_counter(Counter(a=2, b=1), -1), ValueError, r"max_size=...\): expected an int >= 0"),
    ],
)
def test_a_wrong_argument_is_named_not_taken_apart(call, error, message) -> None:  # type: ignore[no-untyped-def]
    """A string for a list of words was split into characters, a float id cut, a negative size
    dropped the last word through slicing: each is refused naming what it got."""
    with pytest.raises(error, match=message):
        call()
    assert Vocab(["a", "b"]).decode([4, torch.tensor(5)]) == ["a", "b"]  # (integer ids of any kind)


def test_a_bad_token_in_a_vocabulary_file_is_named_with_its_line(tmp_path: Path) -> None:
    """A duplicate or a token with a space was named, but not where it is in the file."""
    specials = "".join(f"{t}\t0\n" for t in SPECIALS)
    for body, line, message in (
        ("a\t1\nb\t1\na\t2\n", 7, "duplicate vocabulary token 'a'"),
        ("a\t1\nb c\t1\n", 6, "no spaces: 'b c'"),
    ):
        path = tmp_path / "vocab.txt"
        path.write_text(specials + body, encoding="utf-8")
        with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:{line}: .*{re.escape(message)}"):
            Vocab.load(path)
