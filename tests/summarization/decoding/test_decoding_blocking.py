"""No-repeat n-gram blocking and the other per-step constraints."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scg_summarize.decoding import (
    DecodeOptions,
    SpecialIds,
    apply_constraints,
    banned_ngram_mask,
    beam_search,
    greedy_search,
)

from ..eval_support import UNCONSTRAINED, dummy_batch, has_repeated_ngram
from ..toy_decoders import PrefixTableDecoder


def test_banned_ngram_mask_on_a_known_history() -> None:
    history = torch.tensor([[5, 6, 7, 5, 6], [4, 4, 4, 4, 4], [5, 6, 8, 9, 4]])
    banned = banned_ngram_mask(history, 3, 10)
    assert banned[0].nonzero().flatten().tolist() == [7]  # "5 6" was followed by 7
    assert banned[1].nonzero().flatten().tolist() == [4]  # "4 4" was followed by 4
    assert not banned[2].any()  # "9 4" never occurred before
    assert not banned_ngram_mask(history[:, :2], 3, 10).any()  # no complete trigram yet


@settings(max_examples=30, deadline=None)  # histories of 0-12 words over five words, n = 2-4
@given(
    history=st.lists(st.integers(4, 8), min_size=0, max_size=12),
    n=st.integers(2, 4),
)
def test_a_word_is_banned_exactly_when_it_repeats_an_ngram(history: list[int], n: int) -> None:
    banned = banned_ngram_mask(torch.tensor([history], dtype=torch.long).reshape(1, -1), n, 9)[0]
    grams = {tuple(history[i : i + n]) for i in range(len(history) - n + 1)}
    for word in range(9):
        extended = [*history, word]
        new_gram = tuple(extended[-n:]) if len(extended) >= n else None
        assert bool(banned[word]) == (new_gram is not None and new_gram in grams)


@settings(max_examples=15, deadline=None)  # beams 1-4 and greedy, a seed each
@given(seed=st.integers(0, 10_000), beam=st.integers(1, 4), greedy=st.booleans())
def test_search_with_trigram_blocking_never_repeats_a_trigram(seed: int, beam: int, greedy: bool) -> None:
    # a peaky distribution over few words: unblocked search repeats itself
    decoder = PrefixTableDecoder(8, seed=seed, temperature=0.3)
    options = DecodeOptions(
        beam_size=beam, greedy=greedy, max_len=12, min_len=8, no_repeat_ngram=3, n_best=1, unk="allow"
    )
    search = greedy_search if greedy else beam_search
    for hyps in search(decoder, dummy_batch(2), options):
        assert not has_repeated_ngram(hyps[0].tokens, 3)


def test_without_blocking_the_peaky_decoder_does_repeat() -> None:
    """The property above is not vacuous: the same decoder repeats trigrams when allowed to."""
    opts = DecodeOptions(greedy=True, max_len=12, min_len=8, no_repeat_ngram=0, unk="allow")
    assert any(  # stops at the first seed that repeats
        has_repeated_ngram(
            greedy_search(PrefixTableDecoder(8, seed=seed, temperature=0.3), dummy_batch(1), opts)[0][0].tokens, 3
        )
        for seed in range(20)
    )


def test_constraints_force_and_forbid_end_of_summary() -> None:
    special = SpecialIds()
    log_probs = torch.log_softmax(torch.zeros(2, 6), dim=1)
    history = torch.tensor([[4, 5], [5, 4]])
    opts = DecodeOptions(min_len=3, max_len=5, beam_size=5, no_repeat_ngram=0, unk="allow")
    early = apply_constraints(log_probs, history, opts, special)
    assert torch.isneginf(early[:, special.eos]).all()
    assert torch.isneginf(early[:, [special.pad, special.bos]]).all()
    late = apply_constraints(log_probs, history, DecodeOptions(max_len=2, beam_size=5, **UNCONSTRAINED), special)
    assert torch.isfinite(late[:, special.eos]).all()
    assert torch.isneginf(late[:, [0, 1, 2, 4, 5]]).all()
    opts = DecodeOptions(unk="forbid", max_len=100, beam_size=5, min_len=0, no_repeat_ngram=0)
    no_unk = apply_constraints(log_probs, history, opts, special)
    assert torch.isneginf(no_unk[:, special.unk]).all()


def test_a_row_with_every_word_blocked_can_still_end() -> None:
    special = SpecialIds()
    log_probs = torch.full((1, 5), -1.0)
    log_probs[0, 4] = -0.1
    history = torch.tensor([[4, 4, 4]])  # the only word would repeat "4 4 4"
    opts = DecodeOptions(no_repeat_ngram=3, unk="forbid", max_len=100, beam_size=5, min_len=0)
    out = apply_constraints(log_probs, history, opts, special)
    assert torch.isneginf(out[0, 4])
    assert out[0, special.eos] == pytest.approx(-1.0)


def test_special_ids_that_are_negative_shared_or_outside_the_vocabulary_are_refused() -> None:
    """``eos=-1`` indexed the last word (it was "generated" as ``</s>``); ``eos=pad`` was accepted;
    an id past the decoder's vocabulary failed inside torch's indexing (``index 40 is out of bounds``)."""
    for bad, message in [
        ({"eos": -1}, r"SpecialIds\(eos=...\): expected an id \(an integer >= 0\), got -1"),
        ({"pad": 0.5}, r"SpecialIds\(pad=...\): expected an id \(an integer >= 0\), got 0.5"),
        ({"bos": True}, r"SpecialIds\(bos=...\): expected an id \(an integer >= 0\), got True"),
        ({"eos": 0}, r"SpecialIds: pad, eos share the id 0; each needs its own"),
        ({"blocked": (5, -2)}, r"SpecialIds\(blocked=...\): expected ids \(integers >= 0\), got -2"),
        ({"blocked": [5]}, r"SpecialIds\(blocked=...\): expected a tuple of ids, got list"),
    ]:
        with pytest.raises((ValueError, TypeError), match=message):
            SpecialIds(**bad)  # type: ignore[arg-type]
    opts = DecodeOptions(beam_size=2, max_len=3, min_len=0, no_repeat_ngram=0, unk="allow")
    decoder = PrefixTableDecoder(8)
    for special, name, top in [(SpecialIds(eos=8), "eos", 8), (SpecialIds(blocked=(4, 30)), "blocked", 30)]:
        for search in (beam_search, greedy_search):
            with pytest.raises(ValueError, match=rf"SpecialIds\({name}=...\): id {top} is not in the decoder's "):
                search(decoder, dummy_batch(1), opts, special)
    with pytest.raises(ValueError, match=r"vocabulary of 6 words \(ids 0-5\)"):
        apply_constraints(torch.zeros(1, 6), torch.zeros(1, 0, dtype=torch.long), opts, SpecialIds(unk=6))
    assert len(greedy_search(decoder, dummy_batch(2), opts, SpecialIds(blocked=(7,)))) == 2
