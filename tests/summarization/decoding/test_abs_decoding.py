"""ABS decoding: hypothesis recombination, the early-stop bound with positive bonuses, ABS+
features, the extractive mode and fixed output length."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
import torch
from scg_summarize.data import SourceBatch
from scg_summarize.decoding import DecodeOptions, beam_search, greedy_search
from scg_summarize.decoding.abs_features import (
    LogLinearDecoder,
    feature_totals,
    input_indicators,
    word_features,
)
from scg_summarize.decoding.beam import _bound

from ..eval_support import abs_decoder
from ..toy_decoders import PrefixTableDecoder

EOS = 3


def _opts(**options: Any) -> DecodeOptions:
    """The paper's search: no n-gram blocking, <unk> allowed (the library's defaults differ)."""
    return DecodeOptions(no_repeat_ngram=0, unk="allow", **options)


def _batch(rows: list[list[int]]) -> SourceBatch:
    width = max(len(r) for r in rows)
    src = torch.zeros(len(rows), 1, width, dtype=torch.long)
    for b, r in enumerate(rows):
        src[b, 0, : len(r)] = torch.tensor(r)
    return SourceBatch(src=src, src_mask=src != 0)


def _sequence_scores(decoder: Any, batch: SourceBatch, example: int, tokens: torch.Tensor) -> torch.Tensor:
    """Σ of the decoder's step scores along each row of ``tokens`` (k, n) then ``</s>``: (k,), the
    k sequences scored as k rows of one batch (one decoder step per position, not per sequence)."""
    k, n = tokens.shape
    state = decoder.reorder(decoder.init_state(batch), torch.full((k,), example))
    prev, total = torch.full((k,), 2), torch.zeros(k, dtype=torch.float64)
    for w in [*tokens.T, torch.full((k,), EOS)]:
        scores, state, _ = decoder.step(state, prev)
        total += scores.gather(1, w[:, None]).squeeze(1).double()
        prev = w
    return total


def _brute_force(decoder: Any, batch: SourceBatch, example: int, words: list[int], lengths: range) -> float:
    """The best score over every sequence of ``words`` of a length in ``lengths``."""
    best = float("-inf")
    for n in lengths:
        sequences = list(itertools.product(words, repeat=n))
        tokens = torch.tensor(sequences, dtype=torch.long).reshape(len(sequences), n)
        best = max(best, float(_sequence_scores(decoder, batch, example, tokens).max()))
    return best


# --------------------------------------------------------------------------- recombination


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recombined_beam_over_all_windows_is_exact_viterbi(seed: int) -> None:
    """With one beam slot per window (K = |words|^C), recombination makes beam search exact."""
    vocab, context, n = 7, 2, 4  # words 1 (unk), 4, 5, 6: 4^2 = 16 windows
    dec = abs_decoder(vocab, context, scale=3.0, seed=seed)
    batch = _batch([[4, 5, 6, 5], [6, 6, 4]])
    words = [1, 4, 5, 6]
    opts = _opts(beam_size=16, max_len=n, min_len=n, length_penalty=0, recombine=True)
    plain = _opts(beam_size=16, max_len=n, min_len=n, length_penalty=0)
    for example, (best, plain_best) in enumerate(zip(beam_search(dec, batch, opts), beam_search(dec, batch, plain))):
        exact = _brute_force(dec, batch, example, words, range(n, n + 1))
        assert best[0].score == pytest.approx(exact, abs=1e-4)
        assert plain_best[0].score <= exact + 1e-4
        assert len(best[0].tokens) == n


def test_recombination_never_changes_the_exact_one_best() -> None:
    """Free length, exhaustive beam with and without recombination: the same 1-best."""
    vocab, context = 7, 2
    dec = abs_decoder(vocab, context, scale=3.0, seed=5)
    batch = _batch([[4, 5, 6], [5, 5, 4, 6]])
    words = [1, 4, 5, 6]
    for max_len in (1, 2, 3):
        exhaustive = _opts(beam_size=4**max_len, max_len=max_len, min_len=0, length_penalty=0)
        recombined = _opts(beam_size=16, max_len=max_len, min_len=0, length_penalty=0, recombine=True)
        a, b = beam_search(dec, batch, exhaustive), beam_search(dec, batch, recombined)
        for example in range(2):
            exact = _brute_force(dec, batch, example, words, range(0, max_len + 1))
            assert a[example][0].tokens == b[example][0].tokens
            assert b[example][0].score == pytest.approx(exact, abs=1e-4)


def test_recombined_hypotheses_have_distinct_windows() -> None:
    vocab, context, n = 9, 2, 5
    dec = abs_decoder(vocab, context, scale=3.0, seed=3)
    batch = _batch([[4, 5, 6, 7, 8]])
    opts = _opts(beam_size=6, n_best=6, max_len=n, min_len=n, length_penalty=0, recombine=True)
    hyps = beam_search(dec, batch, opts)[0]
    tails = [tuple(h.tokens[-context:]) for h in hyps]
    assert len(hyps) == 6 and len(set(tails)) == len(tails)
    plain = beam_search(dec, batch, _opts(beam_size=6, n_best=6, max_len=n, min_len=n, length_penalty=0))[0]
    assert len({tuple(h.tokens[-context:]) for h in plain}) < 6  # without it, the beam holds duplicates


def test_recombine_needs_a_markov_decoder() -> None:
    with pytest.raises(TypeError, match="markov_window"):
        beam_search(PrefixTableDecoder(8), _batch([[4, 5]]), _opts(beam_size=2, max_len=3, recombine=True))


# --------------------------------------------------------------------------- positive bonuses


class _BonusDecoder:
    """``</s>`` is cheap at once; after one costly word, every word earns +1 (a positive bonus)."""

    vocab_size = 5

    def __init__(self, declared_bonus: float) -> None:
        self.max_step_bonus = declared_bonus

    def init_state(self, batch: SourceBatch) -> torch.Tensor:
        return torch.zeros(int(batch.src.shape[0]), dtype=torch.long)

    def step(self, state: torch.Tensor, prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        out = torch.full((len(state), 5), float("-inf"))
        first = state == 0
        out[:, EOS] = torch.where(first, torch.tensor(-0.1), torch.tensor(-0.5))
        out[:, 4] = torch.where(first, torch.tensor(-1.0), torch.tensor(1.0))
        return out, state + 1, {}

    def reorder(self, state: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        return state[indices]


@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_bound_with_positive_bonuses_keeps_search_exact(length_penalty: float) -> None:
    batch = _batch([[4]])
    opts = _opts(beam_size=2, max_len=3, min_len=0, length_penalty=length_penalty)
    best = beam_search(_BonusDecoder(1.0), batch, opts)[0][0]
    assert best.tokens == [4, 4, 4]  # -1 + 1 + 1 - 0.5 = 0.5 beats </s> alone (-0.1)
    assert best.log_prob == pytest.approx(0.5)
    # the same search told the scores are <= 0 stops after the first </s> and misses it
    assert beam_search(_BonusDecoder(0.0), batch, opts)[0][0].tokens == []


def test_bound_is_an_upper_bound_of_every_completion() -> None:
    rng = random.Random(0)
    for _ in range(500):
        opts = _opts(max_len=rng.randint(1, 12), length_penalty=rng.choice([0.0, 0.5, 1.0, 2.0]))
        length = rng.randint(0, opts.max_len)
        raw, bonus = rng.uniform(-20, 5), rng.choice([0.0, rng.uniform(0, 3)])
        finals = range(length, opts.max_len + 1)
        best = max(opts.normalize(raw + bonus * (final - length + 1), final) for final in finals)
        assert _bound(raw, length, opts, bonus) >= best - 1e-9


# --------------------------------------------------------------------------- ABS+ features


def test_batched_indicators_match_the_python_reference() -> None:
    rng = random.Random(1)
    vocab = 9
    for _ in range(30):
        source = [rng.randint(4, vocab - 1) for _ in range(rng.randint(1, 8))]
        tokens = [rng.randint(4, vocab - 1) for _ in range(4)]
        ref = word_features(source, tokens)
        padded = [2, 2, *tokens]
        words = torch.tensor([source + [-1] * 3])
        for i, w in enumerate(tokens):
            feats = input_indicators(words, torch.tensor([[padded[i], padded[i + 1]]]), vocab)
            assert feats[0, :, w].tolist() == ref[i]


def test_word_features_by_hand() -> None:
    source = [4, 5, 6, 7]
    # 5 6 (bigram), 4 5 6 (trigram), then 4 after 7: 4 occurs before 7 in the input (out of order)
    assert word_features(source, [4, 5, 6, 8, 7, 4]) == [
        [1, 0, 0, 0],
        [1, 1, 0, 0],
        [1, 1, 1, 0],
        [0, 0, 0, 0],
        [1, 0, 0, 0],
        [1, 0, 0, 1],
    ]


def test_plain_weights_give_the_model_scores_and_abs_plus_totals_are_consistent() -> None:
    inner = abs_decoder(11, 3, scale=3.0, seed=7)
    batch = _batch([[4, 5, 6, 7, 8], [9, 10, 4]])
    plain = LogLinearDecoder(inner)
    s0, s1 = plain.init_state(batch), inner.init_state(batch)
    a, _, _ = plain.step(s0, torch.tensor([2, 2]))
    b, _, _ = inner.step(s1, torch.tensor([2, 2]))
    torch.testing.assert_close(a, b)

    alpha = (0.8, 1.5, 0.7, 0.4, -0.3)
    dec = LogLinearDecoder(inner, alpha)
    assert dec.max_step_bonus == pytest.approx(2.6) and dec.markov_window == 3
    opts = _opts(beam_size=4, n_best=4, max_len=6, min_len=0, length_penalty=0)
    nbest = beam_search(dec, batch, opts)
    totals = feature_totals(inner, batch, [[h.tokens for h in hyps] for hyps in nbest])
    for hyps, feats in zip(nbest, totals):
        for h, f in zip(hyps, feats):
            assert float(torch.tensor(alpha, dtype=torch.float64) @ f) == pytest.approx(h.log_prob, abs=1e-4)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_extractive_mode_never_emits_a_non_input_word(seed: int) -> None:
    inner = abs_decoder(30, 5, scale=3.0, seed=seed)
    rng = random.Random(seed)
    rows = [[rng.randint(4, 29) for _ in range(rng.randint(1, 6))] for _ in range(3)]
    batch = _batch(rows)
    for alpha in ((1, 0, 0, 0, 0), (1, 0.5, 0.5, 0.2, -0.1)):
        dec = LogLinearDecoder(inner, alpha, extractive=True)
        results = beam_search(dec, batch, _opts(beam_size=4, n_best=4, max_len=8, min_len=3))
        results += greedy_search(dec, batch, _opts(greedy=True, max_len=8, min_len=3))
        for example, hyps in enumerate(results):
            for h in hyps:
                assert len(h.tokens) >= 3
                assert set(h.tokens) <= set(rows[example % 3])


def test_fixed_output_length() -> None:
    inner = abs_decoder(15, 5, scale=3.0, seed=9)
    batch = _batch([[4, 5, 6], [7, 8, 9, 10, 11]])
    for n in (1, 4, 7):
        for hyps in beam_search(inner, batch, _opts(beam_size=3, n_best=3, max_len=n, min_len=n)):
            assert [len(h.tokens) for h in hyps] == [n, n, n]


def test_bad_weights_are_rejected() -> None:
    inner = abs_decoder(7, 2, scale=3.0)
    with pytest.raises(ValueError, match="positive"):
        LogLinearDecoder(inner, (0.0, 1, 1, 1, 1))
    with pytest.raises(ValueError, match="5 entries"):
        LogLinearDecoder(inner, (1.0, 1))
