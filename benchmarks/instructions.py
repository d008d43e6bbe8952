"""Instructions per gradient step (callgrind): scg ÷ hand-written, without the machine's noise.

``small_models.py`` times the workloads of issue 25 on the thread's CPU clock; on a shared
machine a step's time moves by 2x from round to round, and a ratio by about a tenth between two
runs. This benchmark counts the instructions the CPU executes instead (valgrind's callgrind):
the work of a step, which does not depend on the load. The same command gives the same ratios to
about 0.002 for Cached and Declared and 0.006 for tracked (three runs: each count within 0.3%,
from where the memory allocator places objects and so how Python's dictionaries keyed by object
ids collide). It is not the time: scg's extra
instructions (interpreted Python) each take longer than the step's average one, which the
timed ratios show (``docs/performance.md``, "Instructions per step").

Each workload (``small_workloads.WORKLOADS``) runs in one process under
``valgrind --tool=callgrind --instr-atstart=no``. Per implementation (hand-written, then scg
tracked, ``Cached`` and ``Declared``), the process warms up with instrumentation off, then
counts ``--short`` and ``--long`` steps (forward + surrogate + backward, gradients cleared), each
ended by a dump of the counters (``callgrind_control --dump``); the instructions per step are
the difference of the two counts over the difference of the steps, so the dump's own cost and
the warm-up cancel. ``Cached`` runs with ``check_every=100`` as users run it: its tracked checks
count where they fall (drawn by its own generator, seed 0: the same ones in every run).

``--chain``: the per-node split on ``small_workloads.chain`` (N Bernoulli nodes, a cost after
each, B = 32) for N = 4 and 36: scg's forward against the hand-written forward and scg's
surrogate against the hand-written assembly, tracked and Declared (a ``Cached`` structure runs
Declared's path between its tracked checks, and the checks would fall unevenly in the split's
windows); the difference between the two N gives the instructions per ``scg.sample`` +
``scg.cost`` pair and per node of the surrogate.

``--pieces``: what a Declared node's record is made of (``node_pieces.py``): a Python call, finding
the open graph, the user's line, each tensor metadata read, a small copy, and ``scg.cost`` /
``scg.sample`` in a Declared graph, in instructions per operation.

    OMP_NUM_THREADS=1 python benchmarks/instructions.py [--chain] [--pieces] [--workloads sbn toy] [--out DIR]

Results: ``benchmarks/results/instructions.{json,md}``. Needs ``valgrind`` (with
``callgrind_control``) on the PATH; the children run about 50x slower than natively.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import node_pieces
from small_workloads import MODES, WORKLOADS, Chain, Structure, chain, steps, structure, timed

RESULTS = Path(__file__).resolve().parent / "results"
IMPLS = ("hand", *MODES)
CHAIN_NS = (4, 36)
CHAIN_MODES = ("tracked", "declared")


# ------------------------------------------------------------------ the child (under valgrind)
def _control(*args: str) -> None:
    """``callgrind_control ARGS <this process>`` (instrumentation on/off, dump)."""
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True, capture_output=True)


def _count(fn: Callable[[], None], params: list[torch.Tensor], short: int, long: int, warm: int = 5) -> None:
    """Warm up uninstrumented, then two dumped parts of ``short`` and ``long`` calls."""

    torch.manual_seed(0)
    timed(fn, params, warm)  # (``small_workloads``' timed block: its clock reads cancel in the difference)
    gc.collect()
    _control("--instr=on")
    _control("--dump=start")
    for n in (short, long):
        torch.manual_seed(0)
        timed(fn, params, n)
        _control(f"--dump=n{n}")
    _control("--instr=off")


def child(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    if args.workload == "pieces":  # each piece of a node's record, in `node_pieces.pieces` order
        for piece in node_pieces.pieces().values():
            _count(piece.run, [], args.short, args.long)
        return
    if args.workload == "chain":  # per N: each side's forward, then its whole step
        for n in CHAIN_NS:
            c = chain(n, per_node_costs=True)
            hand, modes = steps(c.model)

            def hand_forward(c: Chain = c) -> None:
                c.hand_forward()

            _count(hand_forward, c.model.params, args.short, args.long)
            _count(hand, c.model.params, args.short, args.long)
            for mode in CHAIN_MODES:

                def forward(c: Chain = c, s: Structure = structure(mode)) -> None:
                    c.forward(s)

                _count(forward, c.model.params, args.short, args.long)
                _count(modes[mode], c.model.params, args.short, args.long)
        return
    model = WORKLOADS[args.workload].make(args.batch, args.hidden)
    hand, modes = steps(model)
    for fn in (hand, *(modes[m] for m in MODES)):
        _count(fn, model.params, args.short, args.long)


# ------------------------------------------------------------------ the parent
def _totals(out: Path) -> list[dict[str, int]]:
    """The counts of each dumped part, in dump order, by event (``Ir``, and with ``--cache-sim``
    the cache misses and branches: callgrind's ``events:`` and ``summary:``/``totals:`` lines)."""
    parts = sorted(out.parent.glob(out.name + ".*"), key=lambda p: int(p.name.rsplit(".", 1)[1].split("-")[0]))
    counts = []
    for p in parts:
        text = p.read_text()
        events = re.search(r"^events:\s+(.+)$", text, re.M)
        totals = re.search(r"^(?:summary|totals):\s+(.+)$", text, re.M)
        if events is None or totals is None:
            raise SystemExit(f"instructions.py: no events or totals in callgrind dump {p}")
        counts.append(dict(zip(events.group(1).split(), (int(x) for x in totals.group(1).split()))))
    return counts


def per_step(counts: list[dict[str, int]], short: int, long: int) -> list[dict[str, float]]:
    """Counts per step of each measured function, from a child's dumps: per function the start
    dump (discarded), then the ``short`` and the ``long`` part."""
    if len(counts) % 3:
        raise SystemExit(f"instructions.py: {len(counts)} callgrind dumps, expected 3 per measured function")
    return [
        {e: (counts[i + 2][e] - counts[i + 1][e]) / (long - short) for e in counts[i + 2]}
        for i in range(0, len(counts), 3)
    ]


def run_child(name: str, batch: int, hidden: int, short: int, long: int, cache_sim: bool) -> list[dict[str, float]]:
    """Counts per step of each measured function of one child, in its order."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            *(["--cache-sim=yes", "--branch-sim=yes"] if cache_sim else []),
            f"--callgrind-out-file={out}",
            sys.executable,
            __file__,
            "--child",
            name,
            str(batch),
            str(hidden),
            "--short",
            str(short),
            "--long",
            str(long),
        ]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise SystemExit(f"instructions.py: the child for {name} failed:\n{done.stderr[-3000:]}")
        return per_step(_totals(out), short, long)


#: callgrind's events summed into the report's columns with ``--cache-sim``: first-level cache
#: misses (instruction fetches, data reads and writes) and mispredicted branches (conditional
#: and indirect)
L1_MISSES = ("I1mr", "D1mr", "D1mw")
MISPREDICTED = ("Bcm", "Bim")


def workload_row(name: str, batch: int, hidden: int, got: list[dict[str, float]]) -> dict[str, object]:
    """One workload's counts per step, per implementation, and scg's ratios to the hand-written
    step's (instructions; with ``--cache-sim`` also L1 misses and mispredicted branches)."""
    per = dict(zip(IMPLS, got))
    row: dict[str, object] = {
        "workload": name,
        "label": WORKLOADS[name].label,
        "batch": batch,
        "hidden": hidden or None,
        "instructions": {k: v["Ir"] for k, v in per.items()},
        "ratio": {m: per[m]["Ir"] / per["hand"]["Ir"] for m in MODES},
    }
    if "Bcm" in per["hand"]:
        for key, events in (("l1_misses", L1_MISSES), ("mispredicted", MISPREDICTED)):
            total = {k: sum(v[e] for e in events) for k, v in per.items()}
            row[key] = total
            row[f"{key}_ratio"] = {m: total[m] / total["hand"] for m in MODES}
    return row


def workloads(names: list[str], args: argparse.Namespace) -> list[dict[str, object]]:
    """Each workload's row, its child processes ``--jobs`` at a time."""

    def one(name: str) -> dict[str, object]:
        h = args.hidden if WORKLOADS[name].hidden else 0
        row = workload_row(name, args.batch, h, run_child(name, args.batch, h, args.short, args.long, args.cache_sim))
        print(row, flush=True)
        return row

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        return list(pool.map(one, names))


def chain_split(got: list[float]) -> dict[str, object]:
    """The chain child's counts (per N: the hand-written forward and step, then each mode's)
    as, per N, each side's forward and the rest of its step (assembly or surrogate, and
    backward: the step's count minus the forward's), and per node their slopes."""
    per_n: dict[int, dict[str, float]] = {}
    k = 0
    for n in CHAIN_NS:
        row = {"hand forward": got[k], "hand assembly + backward": got[k + 1] - got[k]}
        k += 2
        for mode in CHAIN_MODES:
            row[f"{mode} forward"] = got[k]
            row[f"{mode} surrogate + backward"] = got[k + 1] - got[k]
            k += 2
        per_n[n] = row
    lo, hi = CHAIN_NS
    slope = {key: (per_n[hi][key] - per_n[lo][key]) / (hi - lo) for key in per_n[lo]}
    return {"per_n": {str(n): r for n, r in per_n.items()}, "per_node": slope}


def render(result: dict[str, object]) -> str:
    lines = [
        "# Instructions per gradient step (callgrind): scg ÷ hand-written",
        "",
        f"torch {result['torch']}, one thread; {result['short']} and {result['long']} counted steps "
        "per implementation. Command: `" + str(result["command"]) + "`.",
        "",
        "| workload | B | H | hand (M instr.) | tracked / hand | Cached / hand | Declared / hand |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["workloads"]:  # type: ignore[attr-defined]
        ratio = r["ratio"]
        lines.append(
            f"| {r['label']} | {r['batch']} | {r['hidden'] or '-'} | {r['instructions']['hand'] / 1e6:.3f} | "
            f"{ratio['tracked']:.3f} | {ratio['cached']:.3f} | {ratio['declared']:.3f} |"
        )
    if result.get("cache_sim"):
        lines += [
            "",
            "## Simulated caches and branch predictors (`--cache-sim`): scg ÷ hand-written",
            "",
            "First-level cache misses (instruction fetches, data reads and writes) and mispredicted "
            "branches (conditional and indirect) per step, as callgrind's models count them.",
            "",
            "| workload | B | H | L1 misses: tracked | Cached | Declared | mispredicted: tracked | Cached | Declared |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in result["workloads"]:  # type: ignore[attr-defined]
            miss, branch = r["l1_misses_ratio"], r["mispredicted_ratio"]
            lines.append(
                f"| {r['label']} | {r['batch']} | {r['hidden'] or '-'} | "
                + " | ".join(f"{x[m]:.3f}" for x in (miss, branch) for m in MODES)
                + " |"
            )
    split = result.get("chain")
    if split:
        lines += [
            "",
            "## Per node (chain of N Bernoulli nodes, a cost after each, B = 32)",
            "",
            "Thousands of instructions; *per node*: the slope between N = "
            + " and N = ".join(str(n) for n in CHAIN_NS)
            + " (one `scg.sample` + one `scg.cost` in the forward).",
            "",
        ]
        keys = list(split["per_node"])  # type: ignore[index]
        lines.append("| | " + " | ".join(keys) + " |")
        lines.append("|---|" + "---:|" * len(keys))
        for n, row in split["per_n"].items():  # type: ignore[index]
            lines.append(f"| N = {n} | " + " | ".join(f"{row[k] / 1e3:.1f}" for k in keys) + " |")
        lines.append("| per node | " + " | ".join(f"{split['per_node'][k] / 1e3:.1f}" for k in keys) + " |")  # type: ignore[index]
    if result.get("pieces"):
        lines += node_pieces.render(result["pieces"])  # type: ignore[arg-type]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", nargs=3, metavar=("WORKLOAD", "B", "H"), help=argparse.SUPPRESS)
    p.add_argument(
        "--workloads", nargs="+", choices=sorted(WORKLOADS), default=["sbn", "ram", "sequence", "mixed", "toy"]
    )
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--short", type=int, default=10, help="steps in the first counted part")
    p.add_argument("--long", type=int, default=30, help="steps in the second counted part")
    p.add_argument("--chain", action="store_true", help="also the per-node split on a Bernoulli chain")
    p.add_argument("--pieces", action="store_true", help="also what a Declared node's record is made of")
    p.add_argument("--cache-sim", action="store_true", help="also simulated cache misses and branch mispredictions")
    p.add_argument("--jobs", type=int, default=1, help="workloads measured at once (one process each)")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args()
    if args.child:
        args.workload, args.batch, args.hidden = args.child[0], int(args.child[1]), int(args.child[2])
        child(args)
        return
    if args.short < 0 or args.long <= args.short:
        p.error(f"expected 0 <= --short < --long, got --short {args.short} and --long {args.long}")
    if args.jobs < 1:
        p.error(f"--jobs: expected at least 1, got {args.jobs}")
    missing = [tool for tool in ("valgrind", "callgrind_control") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"instructions.py: needs {' and '.join(missing)} on the PATH (valgrind's callgrind)")
    result: dict[str, object] = {
        "torch": torch.__version__,
        "short": args.short,
        "long": args.long,
        "command": "OMP_NUM_THREADS=1 python benchmarks/instructions.py " + " ".join(sys.argv[1:]),
        "cache_sim": args.cache_sim,
        "workloads": workloads(args.workloads, args),
    }
    if args.chain:
        got = run_child("chain", 0, 0, args.short, args.long, cache_sim=False)
        result["chain"] = chain_split([c["Ir"] for c in got])
    if args.pieces:
        got = run_child("pieces", 0, 0, args.short, args.long, cache_sim=False)
        result["pieces"] = node_pieces.per_operation(dict(zip(node_pieces.pieces(), (c["Ir"] for c in got))))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "instructions.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "instructions.md").write_text(render(result))
    print(render(result))


if __name__ == "__main__":
    main()
