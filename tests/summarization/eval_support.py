"""Helpers for the decoding, evaluation and visualisation tests (no fixtures: each module wraps
these in its own, so the shared conftest stays untouched)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from scg_summarize.data import SourceBatch
from scg_summarize.decoding import ModelStepDecoder

from .toy_decoders import PrefixTableDecoder

REPO_ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread (tiny models are many times slower with oversubscribed threads
    on shared CPUs), restoring the previous setting afterwards."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def shared_data_dir() -> Path:
    """The folder of real third-party samples (``SCG_SHARED_DATA`` or ``../shared/data``); skips
    the calling test when it is absent."""
    root = Path(os.environ.get("SCG_SHARED_DATA", REPO_ROOT / ".." / "shared" / "data"))
    if not (root / "README.md").is_file():
        pytest.skip(f"shared data not found at {root}")
    return root.resolve()


def write_run(
    run_dir: Path, data_dir: Path, name: str = "tiny-C2F", overrides: Sequence[str] = (), *, seed: int = 0
) -> Path:
    """A run directory as ``scg-summarize train`` writes it (``config.json``, ``best.pt``,
    ``vocab.txt``, ``data.json``) for the configuration ``name`` on the corpus ``data_dir``, with
    the untrained weights of seed ``seed`` (any family: the model is built as the trainer builds it)."""
    from scg_summarize.data import SummarizationDataset
    from scg_summarize.data.storage import VOCAB_FILE, read_meta
    from scg_summarize.train.config_loading import load_config
    from scg_summarize.train.model_init import build_model

    config = load_config(name, list(overrides))
    dataset = SummarizationDataset(data_dir, "train")
    torch.manual_seed(seed)
    model = build_model(config, len(dataset.vocab), dataset.num_chunks, data_dir)
    model.bind_vocab(dataset.vocab)
    run_dir.mkdir(parents=True, exist_ok=True)
    raw = config.to_dict()
    (run_dir / "config.json").write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
    record = {"data_dir": str(data_dir), "prep_options": read_meta(data_dir)["options"]}
    (run_dir / "data.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    shutil.copyfile(data_dir / VOCAB_FILE, run_dir / VOCAB_FILE)
    torch.save({"config": raw, "model": model.state_dict()}, run_dir / "best.pt")
    return run_dir


@dataclass
class ToySetup:
    """A small synthetic corpus and an untrained tiny C2F run directory on it."""

    data: Path
    run: Path


def make_toy_setup(root: Path, n_test: int = 10) -> ToySetup:
    """Prepare a tiny synthetic corpus under ``root/data`` and an untrained ``tiny-C2F`` run under
    ``root/run`` (its ``[eval]`` table left out: the library's decoding defaults apply)."""
    from scg_summarize.data import make_synthetic_corpus

    make_synthetic_corpus(root / "data", n_train=40, n_valid=8, n_test=n_test, seed=5)
    run = write_run(root / "run", root / "data", "tiny-C2F", ["model.hidden=8", "model.emb_dim=8"], seed=1)
    raw = json.loads((run / "config.json").read_text(encoding="utf-8"))
    del raw["eval"]
    (run / "config.json").write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
    return ToySetup(root / "data", run)


def abs_decoder(
    vocab: int, context: int, *, encoder: str = "attention", hidden: int = 6, scale: float = 1.0, seed: int = 0
) -> ModelStepDecoder:
    """An untrained ABS model (embedding size 4, the input and output vocabularies the corpus's
    ``vocab`` words) through the one step adapter; embeddings drawn N(0, 1), then every parameter
    times ``scale`` (peakier distributions, so that beams disagree)."""
    from scg_summarize.models.abs.config import AbsFamilyConfig
    from scg_summarize.models.abs.family import AbsSummarizer
    from scg_summarize.models.abs.nnlm import EMBEDDING_STD

    torch.manual_seed(seed)
    config = AbsFamilyConfig(vocab_size=vocab, emb_dim=4, hidden=hidden, abs_context=context, abs_encoder=encoder)
    model = AbsSummarizer(config)
    with torch.no_grad():
        for table in model.abs.embeddings():
            table.weight.div_(EMBEDDING_STD)  # the same draws, N(0, 1)
        for p in model.parameters():
            p.mul_(scale)
    return ModelStepDecoder(model)


def dummy_batch(n: int) -> SourceBatch:
    """A batch of ``n`` one-word documents (decoders under test ignore the source)."""
    return SourceBatch(src=torch.full((n, 1, 1), 4), src_mask=torch.ones(n, 1, 1, dtype=torch.bool))


def enumerate_sequences(
    decoder: PrefixTableDecoder, example: int, max_len: int, words: list[int]
) -> Iterator[tuple[tuple[int, ...], float]]:
    """Every summary of at most ``max_len`` words over ``words`` with its total log-probability
    (the words and ``</s>``), by brute force."""
    for n in range(max_len + 1):
        for seq in itertools.product(words, repeat=n):
            total = sum(float(decoder.log_probs(example, seq[:i])[seq[i]]) for i in range(n))
            yield seq, total + float(decoder.log_probs(example, seq)[3])


def has_repeated_ngram(tokens: list[int], n: int) -> bool:
    """Whether some n-gram occurs twice in ``tokens``."""
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


#: The search constraints off (no minimum length, no n-gram blocking, ``<unk>`` allowed): the
#: search tests compare against brute-force enumeration of the unconstrained model.
UNCONSTRAINED: dict[str, object] = {"min_len": 0, "no_repeat_ngram": 0, "unk": "allow"}
