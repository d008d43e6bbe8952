"""``scg-summarize demo`` on a tiny budget: corpus generated, two models trained, table and heatmap."""

from __future__ import annotations

import json
from pathlib import Path

from scg_summarize.cli import main


def test_demo_runs_end_to_end_on_a_tiny_budget(tmp_path: Path, capsys) -> None:
    # the smallest demo that still runs every phase: 24 documents generated, 3 steps of 8 each
    # per model, 8 documents to validate and test on
    out = tmp_path / "demo"
    status = main(
        [
            "demo",
            "--out",
            str(out),
            "--steps",
            "3",
            "--n-train",
            "24",
            "--n-eval",
            "8",
            "--configs",
            "tiny-STANDARD",
            "tiny-C2F+MULTI2",
            "--set",
            "eval.min_len=2",
        ]
    )
    assert status == 0
    printed = capsys.readouterr().out
    assert "| model | steps | PPL | R-1 | R-2 | R-L | coarse acc | H(chunks) | words read |" in printed
    assert "| model | steps | train CPU s | train wall s | eval CPU s | eval wall s |" in printed
    assert "WARNING: tiny-C2F+MULTI2 has not found the salient chunk" in printed  # 3 steps: still on its plateau
    assert (out / "data" / "meta.json").is_file()  # the synthetic corpus was generated
    rows = json.loads((out / "results.json").read_text())
    assert [r["model"] for r in rows] == ["tiny-STANDARD", "tiny-C2F+MULTI2"]
    assert [r["steps"] for r in rows] == [3, 3]  # a fixed number of steps, not a time budget
    assert all(r["train_cpu_s"] > 0 and r["train_s"] > 0 for r in rows)
    for row in rows:
        for key in ("ppl", "rouge1", "rouge2", "rougeL", "coarse_acc", "attn_entropy", "read_frac"):
            assert isinstance(row[key], float), key
    assert rows[0]["read_frac"] == 1.0 and rows[1]["read_frac"] < 0.5
    png = (out / "heatmap.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert (out / "results.md").read_text().startswith("| model | steps |")
    assert (out / "timings.md").read_text().startswith("| model | steps | train CPU s |")
