"""The zoo's training path end to end on the tiny synthetic corpus: Paulus ML, then ML+RL from its
checkpoint with selection by validation ROUGE-L; C2F + self-critical; the objective registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scg_summarize.decoding import load_run
from scg_summarize.models.loading import read_checkpoint
from scg_summarize.models.paulus.model import PaulusSummarizer
from scg_summarize.train import Trainer, load_config
from scg_summarize.train.objective import OBJECTIVES, objective_names

FAST = [
    "train.max_steps_per_epoch=3",
    "train.epochs=2",
    "train.log_every=1",
    "data.regrid=[1, 40]",
    "model.tgt_vocab_size=20",
]


def _fit(name: str, data: Path, out: Path, *overrides: str) -> Trainer:
    trainer = Trainer(load_config(name, [*FAST, *overrides]), data, out, quiet=True, log=lambda line: None)
    trainer.fit()
    return trainer


def _lines(out: Path, event: str) -> list[dict]:
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return [x for x in rows if x["event"] == event]


def test_objectives_are_registered_and_validated() -> None:
    assert {"auto", "mle", "c2f_reinforce", "self_critical", "mixed"} <= set(objective_names())
    assert set(objective_names()) == set(OBJECTIVES)
    with pytest.raises(ValueError, match=r"train.objective must be one of .*'nope'"):
        load_config("tiny-PAULUS-ML", ["train.objective=nope"])
    with pytest.raises(ValueError, match="train.select_metric"):
        load_config("tiny-PAULUS-ML", ["train.select_metric=bleu"])


def test_paulus_ml_then_mixed_rl_from_its_checkpoint(synthetic_corpus: Path, tmp_path: Path) -> None:
    # 1 step per epoch, best.pt picked by decoding 8 validation examples: the path, not the learning
    short = ("train.select_examples=8", "train.max_steps_per_epoch=1")
    ml = _fit("tiny-PAULUS-ML", synthetic_corpus, tmp_path / "ml", *short)
    assert isinstance(ml.model, PaulusSummarizer) and ml.model.target_vocab == 20
    valid = _lines(tmp_path / "ml", "valid")
    assert len(valid) == 2 and all({"rouge1", "rouge2", "rougeL", "ppl"} <= set(v) for v in valid)
    best = read_checkpoint(tmp_path / "ml" / "best.pt")
    assert best["valid"]["rougeL"] == max(v["rougeL"] for v in valid)  # selected by ROUGE-L, not perplexity
    assert _lines(tmp_path / "ml", "end")[-1]["best_step"] == best["step"]  # the end record names best.pt's step
    assert all("ml_loss" in x for x in _lines(tmp_path / "ml", "train"))

    _fit(
        "tiny-PAULUS-ML+RL",
        synthetic_corpus,
        tmp_path / "rl",
        *short,
        "train.rollout_len=8",
        f"train.init_from={tmp_path / 'ml' / 'best.pt'}",
    )
    train = _lines(tmp_path / "rl", "train")
    assert train and all({"ml_loss", "rl_loss", "reward", "greedy_reward"} <= set(x) for x in train)
    assert all(0.0 <= x["reward"] <= 1.0 for x in train)
    run = load_run(tmp_path / "rl", data_dir=synthetic_corpus)  # decoding sees the family through the adapter
    assert isinstance(run.decoder.model, PaulusSummarizer)


def test_c2f_with_self_critical_trains(synthetic_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "c2f"
    trainer = Trainer(
        load_config(
            "tiny-C2F+SCST",
            [
                "train.max_steps_per_epoch=1",
                "train.epochs=1",
                "train.log_every=1",
                "train.rollout_len=6",
                "train.select_examples=4",
            ],
        ),
        synthetic_corpus,
        out,
        quiet=True,
        log=lambda line: None,
    )
    trainer.fit()
    train = _lines(out, "train")
    assert train and all({"ml_loss", "rl_loss", "reward"} <= set(x) for x in train)
    assert all(x["soft_frac"] == 0.0 for x in train)  # the ML half is C2F's scg surrogate
