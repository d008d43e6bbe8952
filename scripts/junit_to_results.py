"""Turn pytest's JUnit XML into ``benchmarks/results/<name>.{json,md}`` (one row per test).

    python scripts/junit_to_results.py runs/gpu_check/tests.xml kernel_tests_gpu --device "NVIDIA H100"

Used by ``scripts/gpu_check.sh`` so that the GPU test run is recorded next to the GPU benchmarks.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"


def read(path: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        message = ""
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                message = (found.get("message") or "").splitlines()[0][:200] if found.get("message") else ""
        rows.append(
            {
                "test": f"{case.get('classname')}::{case.get('name')}",
                "outcome": outcome,
                "seconds": float(case.get("time") or 0.0),
                "message": message,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("xml", type=Path)
    parser.add_argument("name", help="output stem in benchmarks/results")
    parser.add_argument("--device", default="")
    parser.add_argument("--command", default="")
    args = parser.parse_args()
    if not args.xml.is_file():
        parser.error(f"{args.xml}: no such file (did the test part run?)")
    rows = read(args.xml)
    counts = {o: sum(1 for r in rows if r["outcome"] == o) for o in ("passed", "failed", "error", "skipped")}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(
        json.dumps({"device": args.device, "command": args.command, "counts": counts, "tests": rows}, indent=1) + "\n"
    )
    lines = [
        f"# Tests on {args.device or 'the device'}",
        "",
        f"Command: `{args.command}`. " + ", ".join(f"{n} {o}" for o, n in counts.items()) + ".",
        "",
        "| test | outcome | s | message |",
        "|---|---|---:|---|",
    ]
    lines += [f"| `{r['test']}` | {r['outcome']} | {r['seconds']:.2f} | {r['message']} |" for r in rows]
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print(f"{args.name}: {counts}")


if __name__ == "__main__":
    main()
