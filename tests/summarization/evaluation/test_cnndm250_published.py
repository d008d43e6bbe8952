"""``benchmarks/cnndm250_published.py`` on a made-up two-article folder in the cnndm-250 layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _benchmark_loader import load_benchmark


@pytest.fixture(scope="module")
def bench() -> Any:
    return load_benchmark("cnndm250_published")


ARTICLES = {
    "aaa": (
        ["The cat sat on the mat today.", "Dogs barked loudly at night.", "Birds sang in the morning."],
        ["the cat sat on the mat", "birds sang"],
    ),
    "bbb": (
        ["Markets fell sharply on Monday.", "Investors sold shares.", "Oil prices rose again."],
        ["markets fell on monday", "oil prices rose"],
    ),
}


def _folder(tmp_path: Path, drop: str | None = None) -> Path:
    (tmp_path / "stories").mkdir(parents=True)
    with (tmp_path / "cnndm_test250.jsonl").open("w", encoding="utf-8") as handle:
        for key, (sentences, highlights) in ARTICLES.items():
            story = "\n\n".join(sentences) + "\n\n" + "".join(f"@highlight\n\n{h}\n\n" for h in highlights)
            (tmp_path / "stories" / f"{key}.story").write_text(story, encoding="utf-8")
            item = {
                "id": f"dm-{key}",
                "hash": key,
                "article_sentences": sentences,
                "systems_sentences": {"oracle": highlights, "wrong": ["nothing in common here"]},
            }
            if drop:
                del item[drop]
            handle.write(json.dumps(item) + "\n")
    return tmp_path


def test_scores_baselines_and_shipped_outputs(bench: Any, tmp_path: Path) -> None:
    results = bench.score_all(bench.read_corpus(_folder(tmp_path)))
    assert set(results) == {"first", "lead3", "oracle", "wrong"}
    for metric in bench.METRICS:  # a system that outputs the highlights scores 100, an unrelated one 0
        assert results["oracle"]["scores"][metric] == pytest.approx(100.0)
        assert results["wrong"]["scores"][metric] == 0.0
    first = results["first"]["per_example"]
    assert [r["summary"] for r in first] == ["The cat sat on the mat today.", "Markets fell sharply on Monday."]
    assert results["lead3"]["per_example"][0]["summary"].count("\n") == 2  # three sentences for R-Lsum
    assert 0.0 < results["first"]["scores"]["rouge1"] < results["oracle"]["scores"]["rouge1"]


def test_main_writes_tables_and_per_example_files(bench: Any, tmp_path: Path) -> None:
    data = _folder(tmp_path / "data")
    out, summaries = tmp_path / "res" / "cnn", tmp_path / "sums"
    assert bench.main(["--data", str(data), "--out", str(out), "--summaries", str(summaries)]) == 0
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["systems"]["oracle"]["count"] == 2
    rows = [json.loads(line) for line in (summaries / "first.summaries.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["dm-aaa", "dm-bbb"] and set(rows[0]["rouge"]) == set(bench.METRICS)


def test_missing_field_is_named_with_file_and_line(bench: Any, tmp_path: Path, capsys: Any) -> None:
    data = _folder(tmp_path, drop="systems_sentences")
    assert bench.main(["--data", str(data), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "cnndm_test250.jsonl:1" in err and "systems_sentences" in err
