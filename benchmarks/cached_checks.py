"""What ``scg.Cached``'s checks cost: a check against a plain tracked step, and their share of a loop.

``scg.Cached(check_every=k)`` tracks one graph in k on average (drawn by a generator it owns) and
compares that graph's relation with the cached one. A check is a tracked step; what it costs
besides (a plan, the untracked step after it finding its caches cold) is what this measures.

Per workload (``small_workloads.WORKLOADS``, B = 32, H = 32), in one process and one thread: the
hand-written step, a plain tracked step (``scg.Graph()``, no structure) and the ``Cached`` step
warm up (``--warm`` steps each), then ``--steps`` steps of ``Cached(check_every=--check-every)`` are timed one by one on
the thread's CPU clock (the structure's ``stats`` tell its checks apart), then blocks of the plain
tracked step and of the hand-written step. Reported per workload, each a ratio of medians or
means of this run:

* *check / tracked*: the median check step ÷ the median plain tracked step (1: a check costs
  a tracked step);
* *after / untracked*: the median step right after a check ÷ the median of the other untracked
  steps (the caches the check left cold);
* *checks / hand*: the checks' amortised cost per step, (the mean of all ``Cached`` steps − the
  mean of the untracked steps not after a check) ÷ the hand-written step's median: what
  ``Cached`` pays over ``Declared`` for being checked.

    OMP_NUM_THREADS=1 python benchmarks/cached_checks.py [--steps 5000] [--check-every 100] [--workloads sbn toy]

Results: ``benchmarks/results/cached_checks.{json,md}``. The ``scg`` imported is whichever is on
the path: to compare two versions, run this file with ``PYTHONPATH`` pointing at the other
version's checkout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_workloads import WORKLOADS, Model, clock
from surrogate_overhead import CPU, log, machine

import scg

RESULTS = Path(__file__).resolve().parent / "results"


def _step(model: Model, loss: Callable[[], torch.Tensor]) -> Callable[[], float]:
    """One gradient step (gradients cleared), timed: thread CPU seconds."""

    def run() -> float:
        t0 = clock()
        loss().backward()
        for p in model.params:
            p.grad = None
        return clock() - t0

    return run


def measure(name: str, steps: int, check_every: int, warm: int = 100) -> dict[str, Any]:
    """The row of one workload (see the module docstring)."""
    model = WORKLOADS[name].make(32, 32)
    cached = scg.Cached(check_every=check_every)
    hand = _step(model, model.hand_loss)
    tracked = _step(model, model.scg_loss(None))
    step = _step(model, model.scg_loss(cached))
    for _ in range(warm):
        hand(), tracked(), step()
    warm_checks = cached.stats["tracked"]
    times: list[float] = []
    checked: list[bool] = []
    for _ in range(steps):
        before = cached.stats["tracked"]
        times.append(step())
        checked.append(cached.stats["tracked"] > before)
    untracked = [t for i, t in enumerate(times) if not checked[i] and not (i > 0 and checked[i - 1])]
    after = [times[i] for i in range(1, steps) if checked[i - 1] and not checked[i]]
    checks = [t for t, c in zip(times, checked) if c]
    blocks = max(1, steps // 10)
    plain = [tracked() for _ in range(blocks)]
    ref = [hand() for _ in range(blocks)]
    hand_s = statistics.median(ref)
    plain_s = statistics.median(plain)
    base = statistics.median(untracked) if untracked else None  # (none: every step was a check)
    row: dict[str, Any] = {
        "workload": name,
        "label": WORKLOADS[name].label,
        "steps": steps,
        "checks": len(checks),
        "warm_checks": warm_checks,
        "hand_us": hand_s * 1e6,
        "untracked_us": None if base is None else base * 1e6,
        "tracked_us": plain_s * 1e6,
        "check_us": statistics.median(checks) * 1e6 if checks else None,
        "after_us": statistics.median(after) * 1e6 if after else None,
        "check_over_tracked": statistics.median(checks) / plain_s if checks else None,
        "after_over_untracked": statistics.median(after) / base if after and base else None,
        "checks_over_hand": None if base is None else (statistics.mean(times) - statistics.mean(untracked)) / hand_s,
    }
    return row


def _cell(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def render(data: dict[str, Any], path: Path) -> None:
    meta = data["meta"]
    lines = [
        "# Cached's checks: what a check costs, and their share of a loop",
        "",
        f"torch {meta['torch']}, {meta['threads']} thread(s), load average (1, 5, 15 min) "
        f"{meta['load_average_1_5_15']} on {meta['cpus']} cores at the start; "
        f"`scg.Cached(check_every={data['check_every']})`, B = 32, H = 32, thread CPU time per step. "
        f"Command: `{meta['command']}`.",
        "",
        "| workload | steps | checks | hand (µs) | untracked (µs) | tracked (µs) | check (µs) "
        "| check / tracked | after a check / untracked | checks / hand |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data["rows"]:
        lines.append(
            f"| {r['label']} | {r['steps']} | {r['checks']} | {r['hand_us']:.1f} | {_cell(r['untracked_us'], '.1f')} "
            f"| {r['tracked_us']:.1f} | {_cell(r['check_us'], '.1f')} | {_cell(r['check_over_tracked'], '.3f')} "
            f"| {_cell(r['after_over_untracked'], '.3f')} | {_cell(r['checks_over_hand'], '.4f')} |"
        )
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=5000, help="Cached steps timed per workload")
    parser.add_argument("--check-every", type=int, default=100)
    parser.add_argument("--warm", type=int, default=100, help="untimed steps of each implementation first")
    parser.add_argument(
        "--workloads", nargs="+", choices=[w for w in WORKLOADS if w != "attention"], default=None, metavar="NAME"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.steps < 2 or args.check_every < 1 or args.warm < 0:
        parser.error("--steps must be >= 2, --check-every >= 1 and --warm >= 0")
    names = args.workloads or ["sbn", "ram", "sequence", "mixed", "toy"]
    meta = machine(CPU)
    rows = []
    for name in names:
        row = measure(name, args.steps, args.check_every, args.warm)
        ratios = (
            f"check / tracked {_cell(row['check_over_tracked'], '.3f')}, "
            f"after / untracked {_cell(row['after_over_untracked'], '.3f')}, "
            f"checks / hand {_cell(row['checks_over_hand'], '.4f')}"
        )
        log(f"{name:9s} {row['checks']} checks: {ratios}")
        rows.append(row)
    data = {"meta": meta, "check_every": args.check_every, "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cached_checks.json").write_text(json.dumps(data, indent=1) + "\n")
    render(data, args.out / "cached_checks.md")
    log(f"wrote {args.out / 'cached_checks.json'} and {args.out / 'cached_checks.md'}")
    return data


if __name__ == "__main__":
    main()
