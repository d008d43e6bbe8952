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


def test_compare_report_and_baseline_arguments_that_would_mislead_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], synthetic_corpus: Path
) -> None:
    """An unknown metric was reported as a malformed line; a result .json as invalid JSON; one
    resample gave an interval; report FILE said "no such folder"; a split no result is on said "no
    result files found"; a misspelt column was a column of dashes; baseline took --bytes for a
    method that reads none, and a file for --output-dir."""
    a = _scores(tmp_path / "a.jsonl", [f"d{i}" for i in range(5)], 0.4)
    cases: list[tuple[list[str], str]] = [
        (
            ["compare", str(a), str(a), "--metrics", "bogus"],
            "no metric 'bogus' in 'rouge' (it has rouge1, rouge2, rougeL",
        ),
        (["compare", str(tmp_path / "r.json"), str(a)], "r.json: a result file (.json) holds the averages"),
        (["compare", str(a), str(a), "--samples", "1"], "--samples: expected at least 100 resamples, got 1"),
        (["report", str(a)], "a.jsonl: a file; report reads a folder"),
        (["baseline", "--method", "first", "--data", str(synthetic_corpus), "--bytes", "10"], "--bytes sets prefix"),
        (
            ["baseline", "--method", "first", "--data", str(synthetic_corpus), "--output-dir", str(a)],
            "a file; expected",
        ),
    ]
    (tmp_path / "r.json").write_text("{}\n")
    for argv, said in cases:
        assert main(argv) == 2, argv
        assert said in capsys.readouterr().err, argv
    runs = tmp_path / "runs"
    assert main(["baseline", "--method", "first", "--data", str(synthetic_corpus), "--output-dir", str(runs)]) == 0
    capsys.readouterr()
    assert main(["report", str(runs), "--split", "nope"]) == 2
    assert "--split nope: no result is on it (the results' splits: test)" in capsys.readouterr().err
    assert main(["report", str(runs), "--columns", "metrics.rouge1,metrics.rogue1"]) == 2
    assert "--columns: no result has 'metrics.rogue1'" in capsys.readouterr().err


def test_visualize_label_words_must_not_be_negative(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--label-words -3`` drew a broken figure after a matplotlib warning."""
    argv = ["visualize", "coarse", "--input", str(tmp_path / "x.jsonl"), "--output", str(tmp_path / "f.png")]
    assert main([*argv, "--label-words", "-3"]) == 2
    assert "--label-words: expected an integer >= 0, got -3" in capsys.readouterr().err
