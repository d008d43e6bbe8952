"""ABS training: length-grouped batches, the learning-rate schedule, and the pipeline end to end."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from scg_summarize.models.abs import AbsConfig, AbsModel
from scg_summarize.train.abs.loop import AbsTrainConfig, Example, batches, evaluate_nll, main, next_lr, train


def _examples(n: int, seed: int) -> list[Example]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        src = [rng.randint(4, 11) for _ in range(rng.randint(2, 9))]
        out.append(Example(src, [2, *src[:3], 3]))  # the title copies the first three words
    return out


def test_batches_group_inputs_of_similar_length() -> None:
    examples = _examples(50, 0)
    groups = batches(examples, 8, random.Random(1))
    assert sorted(i for g in groups for i in g) == list(range(50))
    spans = [max(len(examples[i].src) for i in g) - min(len(examples[i].src) for i in g) for g in groups]
    assert max(spans) <= 2  # lengths 2..9 in 7 batches of 8: consecutive lengths only
    assert groups != batches(examples, 8)  # the batch order is shuffled


def test_learning_rate_halves_without_improvement() -> None:
    assert next_lr(0.05, -3.0, -3.5) == 0.05
    assert next_lr(0.05, -3.5, -3.0) == 0.025
    assert next_lr(0.05, -3.0, -3.0) == 0.025


def test_training_lowers_validation_perplexity() -> None:
    torch.manual_seed(0)
    train_set, valid_set = _examples(200, 1), _examples(40, 2)
    model = AbsModel(AbsConfig(12, 12, encoder="attention", embed=8, hidden=16, context=3, init_std=0.1))
    before = evaluate_nll(model, valid_set)
    records = train(model, train_set, valid_set, AbsTrainConfig(lr=0.5, batch_size=16, epochs=4, max_norm=3.0))
    after = evaluate_nll(model, valid_set)
    assert len(records) == 4 and records[-1]["steps"] == 4 * 13
    assert after[1] == before[1] == sum(len(e.tgt) - 1 for e in valid_set)
    assert after[0] < 0.8 * before[0]
    assert max(float(e.weight.detach().norm(dim=1).max()) for e in model.embeddings()) <= 3.0 + 1e-5


def test_command_line_pipeline(synthetic_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    code = main(
        [
            "--data",
            str(synthetic_corpus),
            "--out",
            str(out),
            "--embed",
            "8",
            "--hidden",
            "16",
            "--epochs",
            "1",
            "--max-steps",
            "2",
            "--decode",
            "5",
            "--length",
            "3",
            "--batch-size",
            "32",
        ]
    )
    assert code == 0
    summary = json.loads((out / "abs.json").read_text())
    assert summary["steps"] == 2 and summary["decode"]["examples"] == 5
    lines = (out / "summaries.txt").read_text().splitlines()
    assert len(lines) == 5 and all(len(line.split()) == 3 for line in lines)
    state = torch.load(out / "abs.pt", weights_only=True)
    model = AbsModel(AbsConfig(**{k: v for k, v in summary["model"].items()}))
    model.load_state_dict(state)

    from scg_summarize.train.abs.variants import main as variants_main

    assert (
        variants_main(
            [
                "--run",
                str(out),
                "--data",
                str(synthetic_corpus),
                "--length",
                "3",
                "--beam",
                "2",
                "--iterations",
                "1",
                "--out",
                str(tmp_path / "v.json"),
            ]
        )
        == 0
    )
    result = json.loads((tmp_path / "v.json").read_text())
    assert result["tune"] == 20 and result["test"] == 20
    for name in ("abs", "abs_recombine", "abs_greedy", "extractive", "abs_plus"):
        assert set(result[name]["rouge_f1"]) == {"rouge1", "rouge2", "rougeL"}
    assert result["extractive"]["ext_percent"] == 100.0

    # α tuned on another split, IR added, per-example files that `scg-summarize compare` reads
    from scg_summarize.cli import main as cli

    assert (
        variants_main(
            [
                "--run",
                str(out),
                "--data",
                str(synthetic_corpus),
                "--split",
                "test",
                "--tune-split",
                "valid",
                "--tune-limit",
                "8",
                "--limit",
                "12",
                "--length",
                "3",
                "--beam",
                "2",
                "--iterations",
                "1",
                "--ir",
                "--summaries",
                str(tmp_path / "s"),
                "--out",
                str(tmp_path / "t.json"),
            ]
        )
        == 0
    )
    result = json.loads((tmp_path / "t.json").read_text())
    assert (result["tune_split"], result["tune"], result["test"]) == ("valid", 8, 12)
    assert set(result["ir"]["rouge_recall_75b"]) == {"rouge1", "rouge2", "rougeL"}
    rows = [json.loads(x) for x in (tmp_path / "s" / "abs_plus.summaries.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and all(len(r["summary"].split()) == 3 for r in rows)
    assert sum(r["rouge"]["rouge1"] for r in rows) / 12 == pytest.approx(
        result["abs_plus"]["rouge_f1"]["rouge1"] / 100, abs=1e-6
    )
    s = tmp_path / "s"
    for a, b in (("abs_plus", "abs"), ("ir-75b", "abs-75b")):
        code = cli(["compare", str(s / f"{a}.summaries.jsonl"), str(s / f"{b}.summaries.jsonl"), "--samples", "50"])
        assert code == 0


def test_count_baselines_on_a_prepared_corpus(synthetic_corpus: Path) -> None:
    from scg_summarize.train.abs.count_baselines import count_baselines

    result = count_baselines(synthetic_corpus, "train", "valid", order=3)
    assert result["examples"] == 40
    assert 1.0 < result["kn_perplexity"] < 1e4
    assert 0.0 <= result["ir_ext_percent"] <= 100.0 and 0.0 <= result["reference_ext_percent"] <= 100.0
    assert set(result["ir_rouge_f1"]) == {"rouge1", "rouge2", "rougeL"}
