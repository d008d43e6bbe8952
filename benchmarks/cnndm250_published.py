"""Our ROUGE on ``cnndm-250``: FIRST, LEAD-3 and the published systems' outputs shipped with it.

``cnndm-250`` (the FRANK subset of the CNN/DailyMail test set, Pagnoni et al. 2021) ships, for each
of its 250 articles, the outputs of five published systems (``pgn``: the pointer-generator with
coverage of See et al. 2017; ``s2s``, ``bus``, ``bert_sum``, ``bart``). This scores them, and the
FIRST-sentence and LEAD-3 baselines, with the scorer every other number of the project uses
(:class:`scg_summarize.evaluation.rouge.Rouge`: ``rouge-score``, Porter stemming, F1), so that a
model of ours trained on CNN/DM could be placed beside them on the same articles. No model of ours
is scored here: a trained paper-size Paulus et al. (2018) model needs CNN/DM's 287k training pairs
(``docs/results.md`` section 5).

The reference of an article is its highlights (from ``stories/<hash>.story``), all of them as one
multi-sentence summary; ROUGE-1/2/L treat it as one token sequence, ROUGE-Lsum (the summary-level
LCS of ROUGE-1.5.5, the CNN/DM convention) splits both sides at sentences: a system's shipped
sentence list (``systems_sentences``), the baselines' article sentences, the highlights.

    python benchmarks/cnndm250_published.py --data ../shared/data/cnndm-250 --summaries runs/cnndm250

Writes ``benchmarks/results/cnndm250_published.{json,md}`` and, with ``--summaries DIR``, one
``<system>.summaries.jsonl`` per system with per-example scores (``scg-summarize compare`` reads
them: e.g. ``pgn`` vs ``lead3``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from scg_summarize.data.stories import parse_story
from scg_summarize.evaluation.rouge import Rouge, RougeOptions

METRICS = ("rouge1", "rouge2", "rougeL", "rougeLsum")
BASELINES = {"first": 1, "lead3": 3}


def _sentences(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise ValueError(f"{where}: expected a string or a list of strings, got {type(value).__name__}")
    out = [s.strip() for s in value if s.strip()]
    if not out:
        raise ValueError(f"{where}: empty summary")
    return out


def read_corpus(folder: Path) -> list[dict[str, Any]]:
    """Every article of ``folder/cnndm_test250.jsonl``: id, highlights (from its ``.story``),
    article sentences and each shipped system's summary as a sentence list."""
    path = folder / "cnndm_test250.jsonl"
    records = []
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                item = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{where}: not JSON ({err.msg})") from err
            for key in ("id", "hash", "article_sentences", "systems_sentences"):
                if key not in item:
                    raise ValueError(f"{where}: missing field {key!r}")
            story = parse_story(folder / "stories" / f"{item['hash']}.story")
            systems = {
                name: _sentences(sents, f"{where}: systems_sentences.{name}")
                for name, sents in item["systems_sentences"].items()
            }
            records.append(
                {
                    "id": str(item["id"]),
                    "highlights": story.references,
                    "article": _sentences(item["article_sentences"], f"{where}: article_sentences"),
                    "systems": systems,
                }
            )
    if not records:
        raise ValueError(f"{path}: no articles")
    return records


def score_all(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{system: {"scores": {metric: mean x 100}, "per_example": [...], "words": mean length}}``."""
    rouge = Rouge(RougeOptions(metrics=METRICS, refs="all"))
    names = sorted({name for r in records for name in r["systems"]})
    outputs: dict[str, list[list[str]]] = {name: [] for name in [*BASELINES, *names]}
    for r in records:
        for name, k in BASELINES.items():
            outputs[name].append(r["article"][:k])
        for name in names:
            if name not in r["systems"]:
                raise ValueError(f"article {r['id']}: no output of system {name!r}")
            outputs[name].append(r["systems"][name])
    refs = [["\n".join(r["highlights"])] for r in records]  # one multi-sentence reference
    ids = [r["id"] for r in records]
    results = {}
    for name, summaries in outputs.items():
        result = rouge.corpus(["\n".join(s) for s in summaries], refs, ids=ids, keep_per_example=True)
        words = sum(len(" ".join(s).split()) for s in summaries) / len(summaries)
        per = [
            {"id": i, "summary": "\n".join(s), "rouge": {m: result.per_example[m][k] for m in METRICS}}
            for k, (i, s) in enumerate(zip(ids, summaries))
        ]
        results[name] = {"scores": result.scores, "count": result.count, "words": words, "per_example": per}
    return results


def markdown(results: dict[str, dict[str, Any]], seconds: float) -> str:
    lines = [
        "# cnndm-250: our ROUGE of FIRST, LEAD-3 and the shipped published outputs",
        "",
        "rouge-score F1 with stemming; reference = all highlights (one multi-sentence summary); "
        "ROUGE-Lsum splits at sentences.",
        "",
        "| system | R-1 | R-2 | R-L | R-Lsum | mean words |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        s = r["scores"]
        lines.append(
            f"| {name} | {s['rouge1']:.2f} | {s['rouge2']:.2f} | {s['rougeL']:.2f} | "
            f"{s['rougeLsum']:.2f} | {r['words']:.1f} |"
        )
    lines += ["", f"{next(iter(results.values()))['count']} articles; scored in {seconds:.1f} s."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/cnndm-250"), help="the cnndm-250 folder")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("benchmarks/results/cnndm250_published"),
        help="output stem (.json and .md are added)",
    )
    parser.add_argument("--summaries", type=Path, default=None, help="also write <system>.summaries.jsonl here")
    args = parser.parse_args(argv)
    try:
        start = time.perf_counter()
        results = score_all(read_corpus(args.data))
        seconds = time.perf_counter() - start
    except (OSError, ValueError) as err:
        print(f"cnndm250_published: {err}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    table = {name: {k: v for k, v in r.items() if k != "per_example"} for name, r in results.items()}
    record = {
        "data": str(args.data),
        "metrics": list(METRICS),
        "refs": "all highlights, one reference",
        "stemming": True,
        "seconds": seconds,
        "systems": table,
    }
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    args.out.with_suffix(".md").write_text(markdown(results, seconds), encoding="utf-8")
    if args.summaries is not None:
        args.summaries.mkdir(parents=True, exist_ok=True)
        for name, r in results.items():
            with (args.summaries / f"{name}.summaries.jsonl").open("w", encoding="utf-8") as handle:
                for row in r["per_example"]:
                    handle.write(json.dumps(row) + "\n")
    print(markdown(results, seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
