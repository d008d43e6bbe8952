"""ABS's schedule (Rush et al. 2015, Section 7.3) in the one trainer: the learning rate halved at
the epochs that do not improve (``train.lr_schedule = "on_plateau"``), batches of similar input
length cut from the whole split (``train.pool_batches = 0``), both selected by ``configs/ABS.toml``,
and the embeddings renormalized to a maximum row norm after every epoch (the family's
``end_of_epoch``, ``model.abs_max_norm``; the renormalization itself: ``test_abs_model.py``)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch
from scg_summarize.data import SummarizationDataset
from scg_summarize.models.loading import read_checkpoint
from scg_summarize.train import Trainer, load_config
from scg_summarize.train.data import make_loader
from scg_summarize.train.optim import PlateauDecay
from torch import nn

#: a small ABS with the paper's schedule (SGD 0.05, halving on plateau, max-norm, length batches)
SMALL_ABS = ["model.emb_dim=8", "model.hidden=16", "model.abs_context=3", "train.batch_size=16", "train.log_every=1"]


def _lrs(schedule: str, scores: list[float]) -> list[float]:
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.05)
    decay = PlateauDecay(optimizer, 0.5, 0, schedule)
    out = []
    for score in scores:
        decay.step(score)
        out.append(decay.lr)
    return out


def test_on_plateau_halves_only_at_the_epochs_that_do_not_improve() -> None:
    scores = [3.0, 2.0, 2.5, 1.5, 1.6, 1.6]  # (lower is better) epochs 3, 5 and 6 do not improve
    assert _lrs("on_plateau", scores) == [0.05, 0.05, 0.025, 0.025, 0.0125, 0.00625]
    # the paper's C2F schedule (seq2seq-attn's) keeps decaying once it started: the twin differs at epoch 4
    assert _lrs("after_plateau", scores) == [0.05, 0.05, 0.025, 0.0125, 0.00625, 0.003125]
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.05)
    restored = PlateauDecay(optimizer, 0.5, 0, "after_plateau")
    first = PlateauDecay(optimizer, 0.5, 0, "on_plateau")
    first.step(1.0)
    restored.load_state_dict(first.state_dict())  # a checkpoint carries the schedule
    assert restored.schedule == "on_plateau" and restored.best == 1.0
    with pytest.raises(ValueError, match="schedule must be"):
        PlateauDecay(optimizer, 0.5, 0, "every_epoch")


def _sorted_by_length(batches: list[list[int]], lengths: list[int]) -> bool:
    """Whether the batches are cuts of one list sorted by length (each batch's lengths lie between
    the previous batch's and the next one's)."""
    spans = sorted((min(lengths[i] for i in b), max(lengths[i] for i in b)) for b in batches)
    return all(hi <= lo for (_, hi), (lo, _) in itertools.pairwise(spans))


def test_pool_batches_zero_cuts_the_whole_split_sorted_by_input_length(synthetic_corpus: Path) -> None:
    dataset = SummarizationDataset(synthetic_corpus, "train")
    lengths = dataset.source_lengths().tolist()
    config = load_config("ABS", ["train.batch_size=16"])
    assert (config.train.pool_batches, config.data.bucket_by) == (0, "src")
    sampler = make_loader(dataset, config, train=True).sampler
    first, second = sampler.batches(0), sampler.batches(1)
    assert sorted(i for b in first for i in b) == list(range(len(dataset)))
    assert _sorted_by_length(first, lengths) and _sorted_by_length(second, lengths)
    assert first != second  # each epoch shuffles the batch order (and the order within equal lengths)
    # the default pools (50 batches' worth here: larger than this split; 1: no sorting) are not one sorted list
    pooled = make_loader(dataset, load_config("ABS", ["train.batch_size=16", "train.pool_batches=1"]), train=True)
    assert not _sorted_by_length(pooled.sampler.batches(0), lengths)


def test_the_abs_configuration_trains_with_its_schedule(synthetic_corpus: Path, tmp_path: Path) -> None:
    config = load_config(
        "ABS", [*SMALL_ABS, "train.epochs=3", "train.max_steps_per_epoch=3", "model.abs_max_norm=0.05"]
    )
    assert (config.train.optimizer, config.train.lr, config.train.lr_schedule) == ("sgd", 0.05, "on_plateau")
    trainer = Trainer(config, synthetic_corpus, tmp_path / "run", quiet=True, log=lambda line: None)
    trainer.fit()
    valid = [x for x in map(json.loads, (tmp_path / "run" / "metrics.jsonl").read_text().splitlines())]
    valid = [x for x in valid if x["event"] == "valid"]
    assert len(valid) == 3
    tables = [m.weight.detach() for m in trainer.model.modules() if isinstance(m, nn.Embedding)]
    assert len(tables) == 3  # E, F, G: N(0, 0.05²) rows of 8 to 16 numbers start far above the bound
    assert max(float(t.norm(dim=1).max()) for t in tables) == pytest.approx(0.05)  # renormalized after the epoch
    best = read_checkpoint(tmp_path / "run" / "best.pt")["model"]
    assert all(float(best[k].norm(dim=1).max()) <= 0.05 + 1e-6 for k in best if k.endswith("embed.weight"))
    lr, best = 0.05, float("inf")
    for record in valid:  # halved exactly at the epochs whose perplexity is not a new best
        improved = record["ppl"] < best
        lr, best = (lr if improved else lr / 2), min(best, record["ppl"])
        assert record["lr"] == pytest.approx(lr) and record["decayed"] == (not improved)


def test_the_schedule_options_are_checked_by_key() -> None:
    with pytest.raises(ValueError) as caught:
        load_config("ABS", ["train.lr_schedule=every_epoch", "train.pool_batches=-1"])
    problems = str(caught.value)
    for key in ("train.lr_schedule", "train.pool_batches"):
        assert key in problems, problems
