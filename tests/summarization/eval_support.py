"""Helpers for the decoding, evaluation and visualisation tests (no fixtures: each module wraps
these in its own, so the shared conftest stays untouched)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from scg_summarize.decoding.toy import PrefixTableDecoder

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


@dataclass
class ToySetup:
    """A small synthetic corpus and a randomly initialized toy C2F run directory on it."""

    data: Path
    run: Path


def make_toy_setup(root: Path, n_test: int = 10) -> ToySetup:
    """Prepare a tiny synthetic corpus under ``root/data`` and a toy run under ``root/run``."""
    from scg_summarize.data import make_synthetic_corpus
    from scg_summarize.decoding.toy import write_toy_run

    make_synthetic_corpus(root / "data", n_train=40, n_valid=8, n_test=n_test, seed=5)
    write_toy_run(root / "run", root / "data", hidden=8, seed=1)
    return ToySetup(root / "data", root / "run")


def dummy_batch(n: int) -> dict[str, torch.Tensor]:
    """A batch of ``n`` one-word documents (decoders under test ignore the source)."""
    return {"src": torch.full((n, 1, 1), 4), "src_mask": torch.ones(n, 1, 1, dtype=torch.bool)}


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
