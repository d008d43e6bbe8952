"""Beam search against searches written out here, on small vocabularies, with each constraint on
(issue 30).

* A full beam (as wide as every live prefix) finds the exact best constrained summary and n-best
  list, found by enumerating every allowed sequence.
* A small beam (k = 1, 2, 3) returns exactly what the textbook beam returns: at each step the k best
  allowed non-``</s>`` extensions stay live and every ``</s>`` extension ranked above the k-th of
  them is finished (so the search must scan 2k extensions: k can be ``</s>``); with recombination,
  the k best with distinct last-C-word windows (a unigram decoder, where every row wants the same
  words, needs k(k + 1) candidates scanned); through the top-k step too (which must ask for 2k
  words per row plus the ones the constraints can ban).

The constraints, as the reference applies them: ``<pad>``/``<s>`` never; ``<unk>`` not with
``unk="forbid"``; blocked (digit) words never; not the previous word with ``no_repeat_word``;
``</s>`` not before ``min_len`` words and nothing else at ``max_len``; no word completing an n-gram
already in the summary; ``</s>`` (at its own probability) if nothing else is left.
"""

from __future__ import annotations

import itertools
import math
from functools import cache

import pytest
import torch
from scg_summarize.decoding import DecodeOptions, beam_search
from scg_summarize.decoding.blocking import SpecialIds

from ..eval_support import dummy_batch
from ..toy_decoders import PrefixTableDecoder

NEG = float("-inf")
EOS = 3


def allowed(
    decoder: PrefixTableDecoder, example: int, prefix: tuple[int, ...], options: DecodeOptions, special: SpecialIds
) -> dict[int, float]:
    """The next words the constraints allow after ``prefix``, with their log-probabilities."""
    lp: list[float] = decoder.log_probs(example, prefix).tolist()
    n = options.no_repeat_ngram
    seen = {prefix[i : i + n] for i in range(len(prefix) - n + 1)} if n else set()
    out: dict[int, float] = {}
    for w, value in enumerate(lp):
        if value == NEG or w in (special.pad, special.bos) or w in special.blocked:
            continue
        if options.unk == "forbid" and w == special.unk:
            continue
        if options.no_repeat_word and prefix and w == prefix[-1]:
            continue
        if len(prefix) >= options.max_len and w != EOS:
            continue
        if w == EOS and len(prefix) < options.min_len and len(prefix) < options.max_len:
            continue
        if n and len(prefix) >= n - 1 and w != EOS and (*prefix[len(prefix) - n + 1 :], w) in seen:
            continue
        out[w] = value
    return out or {EOS: lp[EOS]}


def exhaustive(
    decoder: PrefixTableDecoder, example: int, options: DecodeOptions, special: SpecialIds
) -> list[tuple[tuple[int, ...], float, float]]:
    """Every allowed summary (words, log-probability, normalized score), best first."""
    found = []
    stack: list[tuple[tuple[int, ...], float]] = [((), 0.0)]
    while stack:
        prefix, total = stack.pop()
        for w, value in allowed(decoder, example, prefix, options, special).items():
            if w == EOS:
                found.append((prefix, total + value, options.normalize(total + value, len(prefix))))
            else:
                stack.append(((*prefix, w), total + value))
    return sorted(found, key=lambda item: -item[2])


def textbook_beam(
    decoder: PrefixTableDecoder, example: int, options: DecodeOptions, special: SpecialIds, window: int = 0
) -> list[tuple[tuple[int, ...], float, float]]:
    """The beam of the module docstring, run to ``max_len`` (no early stop), best first."""
    live: list[tuple[tuple[int, ...], float]] = [((), 0.0)]
    finished = []
    for _ in range(options.max_len + 1):
        candidates = [
            (total + value, prefix, w)
            for prefix, total in live
            for w, value in allowed(decoder, example, prefix, options, special).items()
        ]
        candidates.sort(key=lambda c: -c[0])
        keep: list[tuple[tuple[int, ...], float]] = []
        windows: set[tuple[int, ...]] = set()
        for total, prefix, w in candidates:
            if len(keep) == options.beam_size:
                break
            if w == EOS:
                finished.append((prefix, total, options.normalize(total, len(prefix))))
                continue
            key = (*prefix, w)[-window:] if window else ()
            if window and key in windows:
                continue  # recombined into the better hypothesis with the same last words
            windows.add(key)
            keep.append(((*prefix, w), total))
        live = keep
        if not live:
            break
    return sorted(finished, key=lambda item: -item[2])


class Unigram(PrefixTableDecoder):
    """p(w) of the example only: every row wants the same words, and recombination is exact."""

    markov_window = 1

    @cache  # noqa: B019 (a few dozen test instances)
    def log_probs(self, example: int, prefix: tuple[int, ...]) -> torch.Tensor:
        return super().log_probs(example, ())


class SharedTaste(PrefixTableDecoder):
    """The first word nearly uniform (the live rows score alike), then every row wants the same
    words in the same order: the best 2k extensions end in only two different words, so k distinct
    windows need k(k + 1) candidates scanned. The state is the last word (``markov_window = 1``)."""

    markov_window = 1

    @cache  # noqa: B019
    def log_probs(self, example: int, prefix: tuple[int, ...]) -> torch.Tensor:
        base = super().log_probs(example, ())
        if prefix:
            return base
        flat = torch.where(torch.isinf(base), base, torch.zeros_like(base)) + 0.01 * base.clamp(min=-50)
        return torch.log_softmax(flat, dim=0)


class Banned(PrefixTableDecoder):
    """The words the constraints ban are the likeliest (``<unk>``, the blocked word 5, the previous
    word), then ``</s>``: the top-k step must ask for the banned ones on top of its 2k."""

    @cache  # noqa: B019
    def log_probs(self, example: int, prefix: tuple[int, ...]) -> torch.Tensor:
        logits = super().log_probs(example, prefix).double()
        for rank, w in enumerate((1, 5, *prefix[-1:], EOS)):
            logits[w] = 2.5 - 0.25 * rank
        return torch.log_softmax(logits, dim=0).float()


class LateBloomer(PrefixTableDecoder):
    """``</s>`` first is likely (−0.69), but word 4 then almost surely 4, 4, ``</s>``: with length
    normalisation the long summary wins, although its first word alone scores worse than ``</s>``."""

    def log_probs(self, example: int, prefix: tuple[int, ...]) -> torch.Tensor:
        probs = torch.full((self.vocab_size,), 1e-6, dtype=torch.float64)
        probs[0] = probs[2] = 0.0
        if not prefix:
            probs[EOS], probs[4] = 0.5, 0.2
            probs[[1, 5, 6, 7]] = 0.3 / 4
        else:
            probs[4 if len(prefix) < 3 else EOS] = 1.0
        return (probs / probs.sum()).log().float()


class Cached(PrefixTableDecoder):
    @cache  # noqa: B019
    def log_probs(self, example: int, prefix: tuple[int, ...]) -> torch.Tensor:
        return super().log_probs(example, prefix)


CONSTRAINTS = {
    "none": dict(min_len=0, no_repeat_ngram=0, unk="allow"),
    "min_len": dict(min_len=2, no_repeat_ngram=0, unk="allow"),
    "bigram": dict(min_len=0, no_repeat_ngram=2, unk="allow"),
    "trigram": dict(min_len=0, no_repeat_ngram=3, unk="allow"),
    "repeat_word": dict(min_len=0, no_repeat_ngram=0, unk="allow", no_repeat_word=True),
    "unk": dict(min_len=0, no_repeat_ngram=0, unk="forbid"),
    "blocked": dict(min_len=0, no_repeat_ngram=0, unk="allow"),
}


def _special(name: str) -> SpecialIds:
    return SpecialIds(blocked=(5,)) if name == "blocked" else SpecialIds()


def _same(got: list, want: list) -> None:
    assert [tuple(h.tokens) for h in got] == [w[0] for w in want]
    for h, (_, total, score) in zip(got, want):
        assert h.log_prob == pytest.approx(total, abs=1e-4) and h.score == pytest.approx(score, abs=1e-4)


@pytest.mark.parametrize("name", sorted(CONSTRAINTS))
def test_full_beam_is_the_exhaustive_optimum_under_each_constraint(name: str) -> None:
    decoder = Cached(7, seed=3, temperature=0.7)  # words 1, 4, 5, 6 and </s>
    special = _special(name)
    options = DecodeOptions(beam_size=64, max_len=3, length_penalty=1.0, n_best=4, **CONSTRAINTS[name])
    results = beam_search(decoder, dummy_batch(3), options, special)
    for example, hyps in enumerate(results):
        _same(hyps, exhaustive(decoder, example, options, special)[:4])


@pytest.mark.parametrize("name", sorted(CONSTRAINTS))
@pytest.mark.parametrize("k", [1, 2, 3])
def test_small_beam_is_the_textbook_beam_under_each_constraint(name: str, k: int) -> None:
    decoder = Cached(8, seed=10 + k, temperature=0.6)
    special = _special(name)
    options = DecodeOptions(beam_size=k, max_len=4, length_penalty=0.5, n_best=k, **CONSTRAINTS[name])
    results = beam_search(decoder, dummy_batch(6), options, special)
    for example, hyps in enumerate(results):
        _same(hyps, textbook_beam(decoder, example, options, special)[:k])


@pytest.mark.parametrize("name", ["none", "min_len", "bigram", "trigram", "repeat_word", "unk"])
def test_top_k_step_gives_the_textbook_beam(name: str) -> None:
    decoder = Cached(40, seed=4, temperature=0.4)  # peaky: one row can hold most of the best extensions
    options = DecodeOptions(beam_size=3, max_len=4, length_penalty=1.0, n_best=3, **CONSTRAINTS[name])
    results = beam_search(decoder, dummy_batch(8), options, SpecialIds(), topk=True)
    for example, hyps in enumerate(results):
        _same(hyps, textbook_beam(decoder, example, options, SpecialIds())[:3])


@pytest.mark.parametrize("k", [2, 3])
def test_recombining_beam_keeps_k_distinct_windows(k: int) -> None:
    decoder = Unigram(9, seed=1, temperature=0.5)
    options = DecodeOptions(
        beam_size=k, max_len=3, length_penalty=0.0, n_best=k, recombine=True, min_len=0, no_repeat_ngram=0, unk="allow"
    )
    results = beam_search(decoder, dummy_batch(5), options)
    for example, hyps in enumerate(results):
        _same(hyps, textbook_beam(decoder, example, options, SpecialIds(), window=1)[:k])


@pytest.mark.parametrize("k", [3, 4])
def test_recombining_beam_scans_enough_candidates_for_k_windows(k: int) -> None:
    decoder = SharedTaste(9, seed=2, temperature=0.3)
    options = DecodeOptions(
        beam_size=k, max_len=3, length_penalty=0.0, n_best=k, recombine=True, min_len=0, no_repeat_ngram=0, unk="allow"
    )
    for example, hyps in enumerate(beam_search(decoder, dummy_batch(4), options)):
        _same(hyps, textbook_beam(decoder, example, options, SpecialIds(), window=1)[:k])


@pytest.mark.parametrize("k", [2, 3])
def test_top_k_step_asks_for_the_words_the_constraints_ban(k: int) -> None:
    decoder = Banned(40, seed=6, temperature=2.0)
    special = SpecialIds(blocked=(5,))
    options = DecodeOptions(
        beam_size=k,
        max_len=3,
        length_penalty=2.0,
        n_best=k,
        min_len=0,
        no_repeat_ngram=0,
        unk="forbid",
        no_repeat_word=True,
    )
    for example, hyps in enumerate(beam_search(decoder, dummy_batch(6), options, special, topk=True)):
        _same(hyps, textbook_beam(decoder, example, options, special)[:k])


def test_early_stop_bound_lets_a_longer_summary_win() -> None:
    decoder = LateBloomer(8)
    options = DecodeOptions(beam_size=1, max_len=3, length_penalty=1.0, min_len=0, no_repeat_ngram=0, unk="allow")
    hyps = beam_search(decoder, dummy_batch(1), options)[0]
    best = exhaustive(decoder, 0, options, SpecialIds())[0]
    assert best[0] == (4, 4, 4) and best[2] > options.normalize(math.log(0.5), 0)  # it beats the empty summary
    _same(hyps, [best])


def test_the_textbook_beam_is_a_real_restriction() -> None:
    """Not vacuous: on these instances small beams miss the optimum and </s> is among the top k."""
    decoder = Cached(8, seed=11, temperature=0.6)
    options = DecodeOptions(beam_size=1, max_len=4, length_penalty=0.5, min_len=0, no_repeat_ngram=0, unk="allow")
    assert any(  # stops at the first miss (the last examples first: each enumeration costs ~0.1 s)
        textbook_beam(decoder, e, options, SpecialIds())[0][0] != exhaustive(decoder, e, options, SpecialIds())[0][0]
        for e in reversed(range(6))
    )
    assert any(
        max(allowed(decoder, e, (), options, SpecialIds()).items(), key=lambda kv: kv[1])[0] == EOS for e in range(40)
    )
    assert len(list(itertools.islice(exhaustive(decoder, 0, options, SpecialIds()), 5))) == 5
