"""Issue 28, items 9 and 13: report rows scored on different examples say so (an ``n`` column and
a note), ``compare`` offers the shared examples, and the chunk-attention block leaves out the
families that do not attend over chunks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scg_summarize.cli import main
from scg_summarize.evaluation.report import make_result, markdown_report

METRICS = {
    "ppl": 5.0,
    "rouge1": 30.0,
    "rouge2": 10.0,
    "rougeL": 25.0,
    "coarse_entropy": 0.5,
    "fraction_read": 0.2,
    "coarse_accuracy": 0.9,
}


def _result(name: str, examples: int, family: str) -> dict[str, object]:
    return make_result(
        "model",
        name,
        METRICS,
        data="data/d",
        split="test",
        examples=examples,
        run=f"runs/{name}",
        run_info={"family": family},
    )


def test_report_shows_n_and_notes_rows_scored_on_different_examples() -> None:
    text = markdown_report([_result("C2F", 100, "c2f"), _result("STANDARD", 1981, "c2f")])
    assert "| Model | n | PPL |" in text and "| C2F | 100 |" in text and "| STANDARD | 1981 |" in text
    assert "scored on different examples (n = 100, 1981" in text and "not a sample" in text
    same = markdown_report([_result("C2F", 100, "c2f"), _result("STANDARD", 100, "c2f")])
    assert "different examples" not in same


def test_chunk_attention_block_lists_only_models_that_attend_over_chunks() -> None:
    text = markdown_report([_result("C2F", 100, "c2f"), _result("PAULUS-ML", 100, "paulus")])
    block = text[text.index("Coarse attention") :]
    assert "| C2F |" in block and "PAULUS-ML" not in block
    assert "Coarse attention" not in markdown_report([_result("MAL", 100, "mal")])


def _scores(path: Path, ids: list[str], value: float) -> Path:
    lines = [
        json.dumps({"id": i, "rouge": {"rouge1": value + k / 100, "rouge2": value, "rougeL": value}})
        for k, i in enumerate(ids)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_compare_offers_the_shared_examples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _scores(tmp_path / "a.jsonl", [f"d{i}" for i in range(30)], 0.4)
    b = _scores(tmp_path / "b.jsonl", [f"d{i}" for i in range(10, 40)], 0.3)
    assert main(["compare", str(a), str(b), "--samples", "200"]) == 2
    err = capsys.readouterr().err
    assert "A scores 30 examples, B 30, 20 of them both" in err and "--shared" in err
    assert main(["compare", str(a), str(b), "--samples", "200", "--shared"]) == 0
    captured = capsys.readouterr()
    assert "on the 20 examples both files score" in captured.err
    assert "| rouge1 |" in captured.out and captured.out.rstrip().endswith("| 20 |")
    c = _scores(tmp_path / "c.jsonl", ["x1", "x2"], 0.3)
    assert main(["compare", str(a), str(c), "--shared"]) == 2
    assert "none in common" in capsys.readouterr().err
    missing = tmp_path / "missing.jsonl"  # (an OSError said as the file and what is wrong, not "[Errno 2] ...")
    assert main(["compare", str(a), str(missing)]) == 2
    assert capsys.readouterr().err.strip() == f"scg-summarize compare: error: {missing}: no such file or directory"
