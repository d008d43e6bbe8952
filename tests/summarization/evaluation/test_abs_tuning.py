"""The ABS+ decode-tune loop: MERT over merged n-best lists never lowers the tuning metric."""

from __future__ import annotations

import random

import pytest
import torch
from scg_summarize.data import SourceBatch
from scg_summarize.decoding import DecodeOptions, beam_search
from scg_summarize.decoding.abs_features import LogLinearDecoder
from scg_summarize.evaluation.abs_tuning import tune_weights
from scg_summarize.evaluation.rouge import Rouge, RougeOptions

from ..eval_support import abs_decoder


def _words(ids: list[int]) -> str:
    return " ".join(f"w{i}" for i in ids)


def test_tuning_copies_input_words_when_references_do() -> None:
    vocab = 40
    inner = abs_decoder(vocab, 3, encoder="bow", hidden=8, seed=0)
    rng = random.Random(0)
    tuning = []
    for _ in range(3):
        rows = [[rng.randint(4, vocab - 1) for _ in range(6)] for _ in range(4)]
        src = torch.tensor(rows).unsqueeze(1)
        tuning.append((SourceBatch(src=src, src_mask=src != 0), [[_words(r[:4])] for r in rows]))
    options = DecodeOptions(
        beam_size=6, n_best=6, min_len=4, max_len=4, length_penalty=0, no_repeat_ngram=0, unk="allow"
    )
    rouge = Rouge(RougeOptions(metrics=("rouge1",), stemming=False))
    result = tune_weights(inner, tuning, _words, options, rouge=rouge, iterations=3)
    assert result.weights[0] == 1.0
    for record in result.history:
        assert record["metric"] >= record["metric_before"] - 1e-12
    assert result.history[0]["metric"] > result.history[0]["metric_before"]  # the features help here
    assert result.weights[1] > 0  # by rewarding input words

    def corpus_rouge(weights: list[float]) -> float:
        dec = LogLinearDecoder(inner, weights)
        outputs, refs = [], []
        for batch, references in tuning:
            outputs += [_words(h[0].tokens) for h in beam_search(dec, batch, options)]
            refs += references
        return rouge.corpus(outputs, refs).scores["rouge1"]

    assert corpus_rouge(result.weights) > corpus_rouge([1.0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="metric"):
        tune_weights(inner, tuning, _words, options, rouge=rouge, metric="rouge2")
