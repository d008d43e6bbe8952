"""Teacher-forced perplexity stays finite: a reference word the model can neither generate nor copy
is scored as ``<unk>`` (as in training), and such words are counted and reported (issue 31)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from scg_summarize.data import SummarizationDataset, make_synthetic_corpus
from scg_summarize.data.batching import Batch, collate_examples
from scg_summarize.decoding import documents_from_split, load_run
from scg_summarize.evaluation import teacher_forced
from scg_summarize.evaluation.perplexity import Perplexity
from scg_summarize.evaluation.report import make_result, markdown_report

model_init = pytest.importorskip("scg_summarize.train.model_init")
train_config = pytest.importorskip("scg_summarize.train.config_loading")

V_T = 8  # an output vocabulary of the 4 specials and 4 words: most reference words are outside it


pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ppl") / "data"
    make_synthetic_corpus(out, n_train=16, n_valid=4, n_test=8, seed=3)
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> Path:
    """A tiny Paulus run folder (untrained weights) with an output vocabulary of V_T words."""
    config = train_config.load_config("tiny-PAULUS-ML", [f"model.tgt_vocab_size={V_T}"])
    dataset = SummarizationDataset(corpus, "train")
    torch.manual_seed(0)
    model = model_init.build_model(config, len(dataset.vocab), dataset.num_chunks)
    folder = tmp_path_factory.mktemp("ppl") / "run"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config.to_dict()), encoding="utf-8")
    torch.save({"config": config.to_dict(), "model": model.state_dict()}, folder / "best.pt")
    return folder


def _uncopyable(batch: Batch) -> int:
    """Reference tokens outside V_T and absent from their own source (counted by brute force)."""
    count = 0
    for row in range(batch.tgt.shape[0]):
        source = set(batch.src[row][batch.src_mask[row]].tolist())
        for pos in range(1, batch.tgt.shape[1]):
            word = int(batch.tgt[row, pos])
            count += bool(batch.tgt_mask[row, pos]) and word >= V_T and word not in source
    return count


def test_pointer_perplexity_scores_unknown_reference_words_as_unk(run: Path, corpus: Path) -> None:
    loaded = load_run(run, data_dir=corpus)
    batch = collate_examples(list(documents_from_split(SummarizationDataset(corpus, "test"))))
    expected = _uncopyable(batch)
    assert expected > 0  # the corpus has words the model can neither generate nor copy
    scored = teacher_forced(loaded.decoder, batch)
    assert all(math.isfinite(x) for x in scored.nll)
    assert sum(scored.unk_scored) == expected
    # the same number as the model's own training loss (which scores those words as <unk>)
    model = loaded.decoder.model  # type: ignore[attr-defined]
    with torch.no_grad():
        out = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="greedy")
    assert sum(scored.nll) == pytest.approx(float(out.total_nll()), rel=1e-5)
    ppl = Perplexity()
    ppl.add(scored)
    assert math.isfinite(ppl.value) and ppl.unk_scored == expected


def test_without_the_unk_rule_the_perplexity_is_infinite(run: Path, corpus: Path) -> None:
    """The twin without the rule: the pointer gives those words probability 0 over corpus ids."""
    loaded = load_run(run, data_dir=corpus)
    del loaded.decoder.scored_targets  # type: ignore[attr-defined]
    batch = collate_examples(list(documents_from_split(SummarizationDataset(corpus, "test"))))
    scored = teacher_forced(loaded.decoder, batch)
    assert math.inf in scored.nll and sum(scored.unk_scored) == 0


def test_the_count_is_reported_beside_the_perplexity() -> None:
    metrics = {"ppl": 12.5, "ppl_tokens": 40, "ppl_unk_scored": 3, "rouge1": 10.0}
    text = markdown_report([make_result("model", "tiny-PAULUS-ML", metrics, data="d", split="test", examples=2)])
    assert "PPL scores 3 of 40 reference tokens as <unk>" in text
    quiet = markdown_report(
        [make_result("model", "tiny-PAULUS-ML", {**metrics, "ppl_unk_scored": 0}, data="d", split="test", examples=2)]
    )
    assert "as <unk>" not in quiet
