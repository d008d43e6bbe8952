"""Perplexity, attention metrics, result tables, and the evaluate/report commands."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from scg_summarize import cli
from scg_summarize.data import Batch, SourceBatch
from scg_summarize.evaluation import (
    AttentionMetrics,
    Perplexity,
    coarse_entropy,
    collect_results,
    fraction_read,
    make_result,
    markdown_report,
    teacher_forced,
    write_result,
)

from ..eval_support import ToySetup, make_toy_setup
from ..toy_decoders import PrefixTableDecoder

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> ToySetup:
    return make_toy_setup(tmp_path_factory.mktemp("metrics"), n_test=8)


def test_coarse_entropy_values() -> None:
    probs = torch.tensor([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]])
    assert coarse_entropy(probs).tolist() == pytest.approx([math.log(4), 0.0, math.log(2)])


def test_fraction_read_counts_real_words_of_chunks_read() -> None:
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    read = torch.tensor([[True, False, False, False], [True, False, True, False]])  # chunks 0 and 2
    assert fraction_read(read, mask) == pytest.approx(4 / 6)
    assert fraction_read(None, mask) == 1.0  # soft attention reads everything
    with pytest.raises(ValueError, match="no source words"):
        fraction_read(read, torch.zeros(4, 4, dtype=torch.bool))


def test_attention_metrics_accumulate_over_words_and_summaries() -> None:
    metrics = AttentionMetrics()
    mask = torch.ones(3, 2, dtype=torch.bool)
    first = {
        "coarse_attn": torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]),  # 2 words + </s>
        "chunk_read": torch.tensor([[True, False, False], [True, False, False], [False, False, True]]),
    }
    second = {"coarse_attn": torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])}  # 1 word + </s>, soft
    metrics.add(first, 2, mask, salient=0)
    metrics.add(second, 1, mask, salient=2)
    out = metrics.result()
    assert out["coarse_entropy"] == pytest.approx((0 + math.log(2) + 0) / 3)
    assert out["fraction_read"] == pytest.approx((4 / 6 + 1.0) / 2)  # </s> step reads chunk 2 too
    assert out["coarse_accuracy"] == pytest.approx(2 / 3)  # argmax of [.5,.5] is chunk 0
    assert out["coarse_accuracy_doc"] == pytest.approx(1 / 2)
    assert AttentionMetrics().result()["coarse_entropy"] is None


def test_teacher_forced_perplexity_matches_the_distributions() -> None:
    decoder = PrefixTableDecoder(7, seed=2)
    tgt = torch.tensor([[2, 4, 5, 3], [2, 6, 3, 0]])
    batch = Batch(
        src=torch.zeros(2, 1, 1, dtype=torch.long),
        src_mask=torch.ones(2, 1, 1, dtype=torch.bool),
        tgt=tgt,
        tgt_mask=tgt != 0,
    )
    scored = teacher_forced(decoder, batch)
    expected = [
        -sum(float(decoder.log_probs(0, p)[w]) for p, w in [((), 4), ((4,), 5), ((4, 5), 3)]),
        -sum(float(decoder.log_probs(1, p)[w]) for p, w in [((), 6), ((6,), 3)]),
    ]
    assert scored.nll == pytest.approx(expected, abs=1e-5)
    assert scored.tokens == [3, 2]
    ppl = Perplexity()
    ppl.add(scored)
    assert ppl.value == pytest.approx(math.exp(sum(expected) / 5), rel=1e-6)
    with pytest.raises(ValueError, match="needs batch"):
        teacher_forced(decoder, SourceBatch(src=batch.src, src_mask=batch.src_mask))


def _result(name: str, kind: str, r1: float, run: str = "", **metrics: float) -> dict[str, object]:
    return make_result(
        kind,
        name,
        {"rouge1": r1, "rouge2": r1 / 2, "rougeL": r1 - 1, **metrics},
        data="/d/cnndm",
        split="test",
        examples=10,
        run=run,
    )


def test_markdown_report_has_the_paper_layout() -> None:
    results = [
        _result("C2F", "model", 30.0, ppl=20.5, coarse_entropy=0.4, fraction_read=0.3),
        _result("LEAD-3", "baseline", 35.0),
        _result("STANDARD", "model", 31.0, ppl=18.0),
        _result("FIRST", "baseline", 33.0),
        _result("HIER", "model", 29.5, ppl=19.0, coarse_entropy=1.2),
    ]
    text = markdown_report(results, title="T")
    rows = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ") and "Model" not in line]
    assert rows[:5] == ["FIRST", "LEAD-3", "STANDARD", "HIER", "C2F"]  # baselines, then the paper's order
    assert "| Model | n | PPL | ROUGE-1 | ROUGE-2 | ROUGE-L | ROUGE-Lsum |" in text
    assert "| FIRST | 10 | – | 33.00 | 16.50 | 32.00 | – |" in text
    assert "| C2F | 0.400 | 0.300 | – | – |" in text  # attention block: entropy, read, read/word, coarse acc.


def test_collect_results_finds_nested_files_and_ignores_other_json(tmp_path: Path) -> None:
    write_result(_result("C2F", "model", 30.0, run=str(tmp_path / "a")), tmp_path / "a" / "eval" / "x.json")
    write_result(_result("C2F", "model", 31.0, run=str(tmp_path / "b")), tmp_path / "b" / "eval" / "x.json")
    (tmp_path / "a" / "config.json").write_text('{"model": {}}')
    (tmp_path / "broken.json").write_text("{nope")
    found = collect_results(tmp_path)
    assert len(found) == 2
    text = markdown_report(found)
    assert "| C2F (a) |" in text and "| C2F (b) |" in text  # same model twice: told apart by run


def test_evaluate_and_report_commands(toy: ToySetup, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    args = ["evaluate", "--run", str(toy.run), "--split", "test", "--beam", "2", "--max-len", "6", "--quiet"]
    assert cli.main([*args, "--limit", "5"]) == 0
    out = capsys.readouterr().out
    assert "| Model | n | PPL | ROUGE-1 | ROUGE-2 | ROUGE-L | ROUGE-Lsum |" in out
    # beam 2, max 6 words (the default minimum: a quarter of that), trigram blocking, <unk> replaced
    result_path = toy.run / "eval" / "data-test.beam2-len1-6-ngram3-unkreplace-first5.json"
    result = json.loads(result_path.read_text())
    metrics = result["metrics"]
    assert result["examples"] == 5 and result["name"] == "tiny-C2F"
    assert metrics["ppl"] > 1.0 and 0.0 <= metrics["rouge1"] <= 100.0
    assert 0.0 < metrics["fraction_read"] < 1.0  # argmax chunks only
    assert 0.0 <= metrics["coarse_accuracy"] <= 1.0 and metrics["coarse_entropy"] > 0.0
    summaries = result_path.with_suffix(".summaries.jsonl").read_text().splitlines()
    assert len(summaries) == 5 and "rouge" in json.loads(summaries[0])
    assert cli.main(["baseline", "--method", "all", "--data", str(toy.data), "--output-dir", str(toy.run.parent)]) == 0
    capsys.readouterr()
    assert cli.main(["report", str(toy.run.parent), "--output", str(tmp_path / "r.md")]) == 0
    table = (tmp_path / "r.md").read_text()
    assert table.index("| FIRST |") < table.index("| TEXTRANK-3 |") < table.index("| tiny-C2F |")


def test_command_errors_are_one_line(toy: ToySetup, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert cli.main(["evaluate", "--run", str(toy.run), "--split", "nope", "--quiet"]) == 2
    assert "no split 'nope'" in capsys.readouterr().err
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "no result files" in capsys.readouterr().err
    assert cli.main(["baseline", "--method", "first", "--data", str(tmp_path)]) == 2
    assert "not a prepared corpus" in capsys.readouterr().err
    assert cli.main(["evaluate", "--run", str(toy.run), "--metrics", "rouge9x", "--quiet"]) == 2
    assert "unknown ROUGE metric" in capsys.readouterr().err
