"""Beam and greedy search against brute-force enumeration, and their options."""

from __future__ import annotations

import pytest
import torch
from scg_summarize.data import SummarizationDataset
from scg_summarize.data.batching import collate_examples
from scg_summarize.decoding import (
    DecodeOptions,
    Summarizer,
    beam_search,
    documents_from_split,
    greedy_search,
    load_run,
)
from scg_summarize.evaluation import teacher_forced

from ..eval_support import UNCONSTRAINED, ToySetup, dummy_batch, enumerate_sequences, make_toy_setup
from ..toy_decoders import PrefixTableDecoder

V = 7
WORDS = [1, 4, 5, 6]  # everything but <pad>, <s> (no mass) and </s>


pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> ToySetup:
    return make_toy_setup(tmp_path_factory.mktemp("beam"))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_finds_the_exact_argmax_sequence(seed: int) -> None:
    decoder = PrefixTableDecoder(V, seed=seed, temperature=0.5)
    options = DecodeOptions(beam_size=100, max_len=3, length_penalty=0.0, n_best=5, **UNCONSTRAINED)
    results = beam_search(decoder, dummy_batch(3), options)
    for example, hyps in enumerate(results):
        ranked = sorted(enumerate_sequences(decoder, example, 3, WORDS), key=lambda item: -item[1])
        assert tuple(hyps[0].tokens) == ranked[0][0]
        assert hyps[0].log_prob == pytest.approx(ranked[0][1], abs=1e-4)
        # the n-best list is the exact top 5, in order
        assert [tuple(h.tokens) for h in hyps] == [seq for seq, _ in ranked[:5]]
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def test_beam_with_length_normalization_is_exact_with_a_full_beam() -> None:
    decoder = PrefixTableDecoder(V, seed=4, temperature=0.8)
    options = DecodeOptions(beam_size=100, max_len=3, length_penalty=1.0, **UNCONSTRAINED)
    hyps = beam_search(decoder, dummy_batch(2), options)
    for example in range(2):
        best = max(enumerate_sequences(decoder, example, 3, WORDS), key=lambda item: item[1] / (len(item[0]) + 1))
        assert tuple(hyps[example][0].tokens) == best[0]
        assert hyps[example][0].score == pytest.approx(best[1] / (len(best[0]) + 1), abs=1e-5)


def test_small_beam_is_never_better_than_the_optimum_and_stops_early() -> None:
    decoder = PrefixTableDecoder(V, seed=7, temperature=0.5)
    opts = DecodeOptions(beam_size=2, max_len=3, length_penalty=0.0, **UNCONSTRAINED)
    hyps = beam_search(decoder, dummy_batch(1), opts)
    best = max(total for _, total in enumerate_sequences(decoder, 0, 3, WORDS))
    assert hyps[0][0].log_prob <= best + 1e-5
    assert len(hyps[0][0].tokens) <= 3


def test_greedy_equals_beam_of_one_and_follows_the_argmax() -> None:
    decoder = PrefixTableDecoder(V, seed=3)
    options = DecodeOptions(greedy=True, max_len=6, length_penalty=0.0, **UNCONSTRAINED)
    greedy = greedy_search(decoder, dummy_batch(4), options)
    opts = DecodeOptions(beam_size=1, max_len=6, length_penalty=0.0, **UNCONSTRAINED)
    beam1 = beam_search(decoder, dummy_batch(4), opts)
    for example in range(4):
        assert greedy[example][0].tokens == beam1[example][0].tokens
        assert greedy[example][0].log_prob == pytest.approx(beam1[example][0].log_prob, abs=1e-5)
        prefix: tuple[int, ...] = ()
        for token in [*greedy[example][0].tokens, 3]:
            probs = decoder.log_probs(example, prefix).clone()
            probs[0] = probs[2] = float("-inf")
            if len(prefix) == 6:
                assert token == 3
            else:
                assert token == int(probs.argmax())
            prefix = (*prefix, token)


@pytest.mark.parametrize("greedy", [False, True])
def test_length_limits_and_unk_forbidding(greedy: bool) -> None:
    decoder = PrefixTableDecoder(V, seed=11, temperature=2.0)
    options = DecodeOptions(beam_size=3, greedy=greedy, min_len=3, max_len=4, unk="forbid", no_repeat_ngram=0)
    for hyps in (greedy_search if greedy else beam_search)(decoder, dummy_batch(6), options):
        for hyp in hyps:
            assert 3 <= len(hyp.tokens) <= 4
            assert 1 not in hyp.tokens  # <unk>
            assert not {0, 2, 3} & set(hyp.tokens)


def test_extras_are_recorded_per_generated_word(toy: ToySetup) -> None:
    run = load_run(toy.run)
    dataset = SummarizationDataset(toy.data, "test")
    batch = collate_examples(list(documents_from_split(dataset, range(3))))
    options = DecodeOptions(beam_size=3, max_len=5, extras=("coarse_attn", "chunk_read", "word_attn"), **UNCONSTRAINED)
    for hyp in [h[0] for h in beam_search(run.decoder, batch, options)]:
        steps = len(hyp.tokens) + 1
        m, n = dataset.num_chunks, dataset.chunk_len
        assert hyp.extras["coarse_attn"].shape == (steps, m)
        assert torch.allclose(hyp.extras["coarse_attn"].sum(-1), torch.ones(steps), atol=1e-5)
        assert hyp.extras["chunk_read"].dtype == torch.bool
        assert hyp.extras["chunk_read"].sum(-1).tolist() == [1] * steps  # argmax: one chunk per step
        assert hyp.extras["word_attn"].shape == (steps, m, n)


def test_an_extra_the_model_does_not_return_is_refused_before_decoding(toy: ToySetup) -> None:
    """A misspelt or unsupported name is refused, naming it and what the model returns (it was
    recorded nowhere, without a word); a decoder that declares no ``offered_extras`` keeps the
    protocol's leniency (it returns what it has)."""
    run = load_run(toy.run)
    batch = collate_examples(list(documents_from_split(SummarizationDataset(toy.data, "test"), range(2))))
    expected = r"DecodeOptions.extras \(--extras\) asks for 'coarse', .*they return: coarse_attn, chunk_read, word_attn"
    for search, greedy in ((beam_search, False), (greedy_search, True)):
        options = DecodeOptions(greedy=greedy, max_len=3, extras=("coarse_attn", "coarse"), **UNCONSTRAINED)
        with pytest.raises(ValueError, match=expected):
            search(run.decoder, batch, options)
    with pytest.raises(ValueError, match=r"teacher_forced\(keep_extras=...\) asks for 'attn'"):
        teacher_forced(run.decoder, batch, keep_extras=("attn",))
    with pytest.raises(ValueError, match="asks for 'word'"):
        Summarizer(run.decoder, run.vocab, DecodeOptions(extras=("word",))).summarize_batch(
            list(documents_from_split(SummarizationDataset(toy.data, "test"), range(1)))
        )
    undeclared = PrefixTableDecoder(V)
    assert not hasattr(undeclared, "offered_extras")
    hyps = beam_search(
        undeclared, dummy_batch(2), DecodeOptions(beam_size=2, max_len=3, extras=("coarse",), **UNCONSTRAINED)
    )
    assert all(h[0].extras == {} for h in hyps)


def test_batching_does_not_change_results(toy: ToySetup) -> None:
    """Examples decoded together (some finishing early and being dropped) or alone agree."""
    run = load_run(toy.run)
    docs = list(documents_from_split(SummarizationDataset(toy.data, "test"), range(6)))
    options = DecodeOptions(beam_size=4, max_len=7, no_repeat_ngram=3, min_len=0, unk="allow")
    together = beam_search(run.decoder, collate_examples(docs), options)
    for doc, hyps in zip(docs, together):
        alone = beam_search(run.decoder, collate_examples([doc]), options)[0]
        assert hyps[0].tokens == alone[0].tokens
        assert hyps[0].score == pytest.approx(alone[0].score, abs=1e-4)


class _BrokenDecoder(PrefixTableDecoder):
    def step(self, state, prev_tokens):  # type: ignore[no-untyped-def]
        log_probs, state, extras = super().step(state, prev_tokens)
        return log_probs[:1], state, extras


def test_a_decoder_returning_wrong_shapes_gets_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"decoder.step\(\): log_probs has 1 rows, expected 6"):
        beam_search(_BrokenDecoder(V), dummy_batch(2), DecodeOptions(beam_size=3, max_len=100, **UNCONSTRAINED))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"beam_size": 0}, "beam_size"),
        ({"min_len": 5, "max_len": 3}, "min_len"),
        ({"no_repeat_ngram": 1}, "no_repeat_ngram"),
        ({"unk": "drop"}, "unk"),
        ({"n_best": 3, "beam_size": 2}, "n_best"),
        ({"length_penalty": -1.0}, "length_penalty"),
    ],
)
def test_bad_options_are_rejected(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DecodeOptions(**kwargs)  # type: ignore[arg-type]
