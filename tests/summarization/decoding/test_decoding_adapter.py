"""The trained models through the step protocol, and loading the trainer's run directories."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from scg_summarize.data import SummarizationDataset, make_synthetic_corpus
from scg_summarize.data.batching import collate_examples
from scg_summarize.decoding import (
    DecodeOptions,
    Summarizer,
    beam_search,
    documents_from_split,
    load_run,
)
from scg_summarize.decoding.inputs import regrid_document
from scg_summarize.evaluation import teacher_forced

from ..eval_support import UNCONSTRAINED
from ..models_helpers import V, make_model

model_init = pytest.importorskip("scg_summarize.train.model_init")
train_config = pytest.importorskip("scg_summarize.train.config_loading")


pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("adapter") / "data"
    make_synthetic_corpus(out, n_train=20, n_valid=4, n_test=6, seed=2)
    return out


def _write_run(root: Path, corpus: Path, name: str, overrides: tuple[str, ...] = ()) -> Path:
    """A run directory as the trainer writes it (config.json + best.pt), untrained weights."""
    config = train_config.load_config(name, list(overrides))
    dataset = SummarizationDataset(corpus, "train")
    torch.manual_seed(0)
    model = model_init.build_model(config, len(dataset.vocab), dataset.num_chunks)
    run = root / name
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(config.to_dict()), encoding="utf-8")
    torch.save({"config": config.to_dict(), "model": model.state_dict()}, run / "best.pt")
    return run


@pytest.mark.parametrize(
    "name", ["tiny-C2F", "tiny-HIER", "tiny-STANDARD", "tiny-STANDARD+COPY", "tiny-C2F+MULTI2+COPY"]
)
def test_teacher_forced_nll_matches_the_models_own(tmp_path: Path, corpus: Path, name: str) -> None:
    loaded = load_run(_write_run(tmp_path, corpus, name), data_dir=corpus)
    assert loaded.model == name and loaded.data_dir == corpus
    dataset = SummarizationDataset(corpus, "test")
    batch = collate_examples(list(documents_from_split(dataset)))
    scored = teacher_forced(loaded.decoder, batch)
    model = loaded.decoder.model  # type: ignore[attr-defined]
    with torch.no_grad():
        out = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="greedy")
    assert sum(scored.nll) == pytest.approx(float(out.total_nll()), rel=1e-5)
    assert sum(scored.tokens) == out.tokens()


def test_c2f_reads_its_top_k_chunks_and_exposes_attention(tmp_path: Path, corpus: Path) -> None:
    run = _write_run(tmp_path, corpus, "tiny-C2F")
    dataset = SummarizationDataset(corpus, "test")
    batch = collate_examples(list(documents_from_split(dataset, range(3))))
    for k in (1, 2):
        loaded = load_run(run, data_dir=corpus, coarse_topk=k)
        opts = DecodeOptions(beam_size=3, max_len=5, extras=("coarse_attn", "chunk_read", "word_attn"), **UNCONSTRAINED)
        options = opts
        summarizer = Summarizer(loaded.decoder, loaded.vocab, options)  # requests word_attn from the adapter
        hyps = beam_search(summarizer.decoder, batch, options)
        for example, (hyp,) in enumerate(hyps):
            read = hyp.extras["chunk_read"]
            real_chunks = int(batch.src_mask[example].any(-1).sum())
            assert read.sum(-1).tolist() == [min(k, real_chunks)] * (len(hyp.tokens) + 1)
            word = hyp.extras["word_attn"]
            assert torch.allclose(word.sum((1, 2)), torch.ones(len(word)), atol=1e-5)
            outside = word * (~read).unsqueeze(-1)
            assert float(outside.abs().max()) == 0.0  # C2F attends to words of the chunks read only


def test_soft_models_have_no_chunk_read(tmp_path: Path, corpus: Path) -> None:
    loaded = load_run(_write_run(tmp_path, corpus, "tiny-HIER"), data_dir=corpus)
    batch = collate_examples(list(documents_from_split(SummarizationDataset(corpus, "test"), range(2))))
    hyps = beam_search(loaded.decoder, batch, DecodeOptions(beam_size=2, max_len=4, extras=("*",), **UNCONSTRAINED))
    assert "chunk_read" not in hyps[0][0].extras and "coarse_attn" in hyps[0][0].extras


def test_a_run_without_data_directory_asks_for_one(tmp_path: Path, corpus: Path) -> None:
    run = _write_run(tmp_path, corpus, "tiny-C2F")
    with pytest.raises(ValueError, match="pass --data DIR"):
        load_run(run)
    (tmp_path / "other").mkdir()
    make_synthetic_corpus(tmp_path / "other" / "data", n_train=5, n_valid=0, n_test=2, seed=9, chunk_len=8)
    with pytest.raises(ValueError, match="vocabulary"):
        load_run(run, data_dir=tmp_path / "other" / "data")


def test_regrid_keeps_words_and_ids_aligned(corpus: Path) -> None:
    doc = next(documents_from_split(SummarizationDataset(corpus, "test"), [0]))
    new = regrid_document(doc, 3, 20)
    n_words = int(doc.src_mask.sum())
    assert int(new.src_mask.sum()) == min(n_words, 60) and new.salient == -1
    flat_words = [w for chunk in new.words for w in chunk]
    assert flat_words == [w for chunk in doc.words for w in chunk][:60]
    assert new.src[new.src_mask].tolist() == doc.src[doc.src_mask].tolist()[:60]


def test_the_python_api_names_input_it_cannot_use(tmp_path: Path, corpus: Path) -> None:
    """A document of padding only was summarized with invented words; a string of text for the
    list of paragraphs became one-character chunks; a missing ``data_dir`` was recorded as the
    run's corpus; ``max_target_len=-1`` cut the target to ``</s>``."""
    from dataclasses import replace

    from scg_summarize.decoding.inputs import encode_text

    run = _write_run(tmp_path, corpus, "tiny-C2F")
    loaded = load_run(run, data_dir=corpus)
    with pytest.raises(ValueError, match=r"load_run\(data_dir='.*nope'\): no such directory"):
        load_run(run, data_dir=tmp_path / "nope")
    with pytest.raises(TypeError, match=r"encode_text\('d', paragraphs\): expected a list of strings .* got a string"):
        encode_text("d", "hello world", loaded.prep_options, loaded.vocab)  # type: ignore[arg-type]
    doc = next(iter(documents_from_split(SummarizationDataset(corpus, "test"))))
    empty = replace(doc, id="empty", src_mask=torch.zeros_like(doc.src_mask))
    summarizer = Summarizer(loaded.decoder, loaded.vocab, DecodeOptions(greedy=True, min_len=1, max_len=3))
    with pytest.raises(ValueError, match=r"Summarizer: empty: the document has no words"):
        summarizer.summarize_batch([empty])
    assert len(summarizer.summarize_batch([doc])[0]) == 1
    with pytest.raises(ValueError, match=r"max_target_len: expected None or an int >= 2, got -1"):
        SummarizationDataset(corpus, "train", max_target_len=-1)
    batch = next(iter(summarizer.summarize(iter([doc]))))  # (a working call: the options below are the point)
    assert batch[0] is doc
    from scg_summarize.data.batching import collate_sources
    from scg_summarize.decoding.greedy import greedy_search

    sources = collate_sources([doc])
    for search in (beam_search, greedy_search):
        with pytest.raises(TypeError, match=rf"{search.__name__}\(options=...\): expected a DecodeOptions, got dict"):
            search(loaded.decoder, sources, {"beam_size": 2})  # type: ignore[arg-type]


def test_summarizer_refuses_a_vocabulary_of_another_size_than_the_models() -> None:
    """A vocabulary smaller than the model's embedding table was accepted (generated ids past its
    end had no word: ``id_to_token`` failed after the search), a larger one too (its ids past the
    table failed inside the embedding)."""
    from scg_summarize.data import Vocab
    from scg_summarize.decoding import ModelStepDecoder

    decoder = ModelStepDecoder(make_model("standard"))
    for words in (V - 14, V + 6):
        vocab = Vocab([f"w{i}" for i in range(words - 4)])  # (+ the 4 specials)
        with pytest.raises(
            ValueError,
            match=rf"Summarizer\(vocab\): {words} words, but the model's vocabulary "
            rf"\(its embedding table\) has {V}: use the vocabulary the model was trained with",
        ):
            Summarizer(decoder, vocab, DecodeOptions())
    assert Summarizer(decoder, Vocab([f"w{i}" for i in range(V - 4)]), DecodeOptions()).vocab.tokens[-1] == f"w{V - 5}"


def test_every_device_argument_of_the_python_api_is_named_alike(tmp_path: Path, corpus: Path) -> None:
    """``Summarizer(device="gpu")``, ``evaluate_model``, ``evaluate_run`` and ``run_saliency_top_k``
    failed inside torch (``Expected one of cpu, cuda, ... device type``, ``Invalid device string``) or at
    the first batch; ``load_model(device="cuda")`` without a GPU blamed the checkpoint. One check
    (``devices.checked_device``) names the entry point for each."""
    from scg_summarize.evaluation import RougeOptions, evaluate_model, evaluate_run
    from scg_summarize.evaluation.saliency_topk import run_saliency_top_k
    from scg_summarize.models.loading import load_model

    run = _write_run(tmp_path, corpus, "tiny-C2F")
    loaded = load_run(run, data_dir=corpus)
    dataset = SummarizationDataset(corpus, "test", with_text=True)
    calls: dict[str, Callable[[Any], object]] = {
        "load_model": lambda device: load_model(run / "best.pt", device=device),
        "load_run": lambda device: load_run(run, data_dir=corpus, device=device),
        "Summarizer": lambda device: Summarizer(loaded.decoder, loaded.vocab, DecodeOptions(), device=device),
        "evaluate_model": lambda device: evaluate_model(
            loaded, dataset, DecodeOptions(), RougeOptions(), limit=1, device=device
        ),
        "evaluate_run": lambda device: evaluate_run(run, corpus, limit=1, device=device),
        "run_saliency_top_k": lambda device: run_saliency_top_k(loaded, dataset, 1, limit=1, device=device),
    }
    for where, call in calls.items():
        for bad in ("gpu", "cuda:x", "meta"):
            with pytest.raises(ValueError, match=rf"{where}\(device='{bad}'\): expected 'cpu', 'cuda' or 'cuda:N'"):
                call(bad)
        if not torch.cuda.is_available():
            with pytest.raises(ValueError, match=rf"{where}\(device=...\): 'cuda', but no CUDA GPU is available here"):
                call("cuda")
    assert Summarizer(loaded.decoder, loaded.vocab, DecodeOptions(), device=torch.device("cpu")).device.type == "cpu"


def test_evaluate_run_scores_a_run_as_the_evaluate_command_does(tmp_path: Path, corpus: Path) -> None:
    """``evaluate_run`` (``train --rouge``, the demo) scored with ``RougeOptions()`` whatever the run:
    digits not mapped, where ``scg-summarize evaluate`` maps digits and ``#`` for a run trained with
    digit mapping (``--hash-digits auto``), so a model's ``#`` could not match a reference's digits there
    and the two records of one run, documented as the same, differed in their ROUGE settings."""
    from scg_summarize import cli
    from scg_summarize.evaluation import evaluate_run

    run = _write_run(tmp_path, corpus, "tiny-C2F")
    assert load_run(run, data_dir=corpus).prep_options.digits_to_hash  # prepared with digit mapping
    result, _ = evaluate_run(run, corpus, limit=2)
    output = tmp_path / "evaluate.json"
    argv = ["evaluate", "--run", str(run), "--data", str(corpus), "--limit", "2", "--output", str(output)]
    assert cli.main(argv) == 0
    command = json.loads(output.read_text(encoding="utf-8"))
    assert result["rouge_options"] == command["rouge_options"]
    assert result["rouge_options"]["hash_digits"] is True
    assert result["decode_options"] == command["decode_options"] and result["metrics"] == command["metrics"]
