"""One markdown row per MAL run directory (docs/results.md, section 7): training steps, the best
validation perplexity and its step, the last training window's L_s and attention entropies, and
the test result written by ``scg-summarize evaluate --output RUN/test.json`` (perplexity,
ROUGE F1, mean length, distinct summaries, Table 4).

    python scripts/mal_table.py runs/mal_cpu/scitldr-*-s1
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _fmt(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def row(run: Path) -> str:
    """The row of one run directory; names the missing file when the run is incomplete."""
    for name in ("metrics.jsonl", "test.json", "test.summaries.jsonl"):
        if not (run / name).is_file():
            raise SystemExit(f"mal_table.py: {run / name} not found (train and evaluate the run first)")
    events = _jsonl(run / "metrics.jsonl")
    train = [e for e in events if e.get("event") == "train"]
    valid = [e for e in events if e.get("event") == "valid"]
    end = next((e for e in events if e.get("event") == "end"), None)
    if not train or not valid:
        raise SystemExit(f"mal_table.py: {run / 'metrics.jsonl'} has no train or valid line")
    best = min(valid, key=lambda e: e["ppl"])
    last = train[-1]
    steps = end["step"] if end else last["step"]
    result = json.loads((run / "test.json").read_text())
    m = result["metrics"]
    summaries = [e["summary"] for e in _jsonl(run / "test.summaries.jsonl")]
    table4 = (result.get("saliency_topk") or {}).get("rouge1", {})
    cells = [
        run.name,
        str(steps),
        f"{best['ppl']:.1f} ({best['step']})",
        _fmt(last.get("loss_s") if "entropy_s" in last else None, 3),
        _fmt(last.get("entropy_s"), 4),
        _fmt(last.get("entropy_u"), 4),
        f"{m['ppl']:.1f}",
        f"{m['rouge1']:.2f}",
        f"{m['rouge2']:.2f}",
        f"{m['rougeL']:.2f}",
        f"{m['mean_length']:.1f}",
        f"{len(set(summaries))} / {len(summaries)}",
        _fmt(table4.get("SuAtt")),
        _fmt(table4.get("UnAtt")),
        _fmt(table4.get("Lead")),
    ]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args(argv)
    print(
        "| run | steps | best valid PPL (step) | L_s | H(a^s) | H(a^u) | test PPL | R-1 | R-2 | R-L | "
        "words | distinct summaries | Table 4 SuAtt | UnAtt | Lead |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for run in args.runs:
        print(row(run))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
