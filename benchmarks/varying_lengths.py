"""A loop whose length changes from graph to graph: what a structure keeps, and what it costs.

Every length T is a new graph *signature* (`scg.graph.structure`): its relation and credit plan
are built once and kept by the structure (``scg.Declared``), so a training loop over documents of
many lengths builds one plan per length. A plan of a T-step loop holds O(T²) weights.
``Declared(max_signatures=k)`` keeps the k most recently used signatures.

The program: a recurrent loop of T Categorical(8) choices (B = 16), one per-example cost per
step, the causal declaration. Each pass runs T = 1, 2, ..., ``--max-len`` once, in order (every
graph a new signature); ``--passes`` passes. Per variant, in one process and one thread: the
Python memory the structure holds after the run (``tracemalloc``, measured with the structure
alive, then without it), its number of plans, and the thread CPU seconds of the whole run.
Variants: ``max_signatures`` = 64 (the default) and unbounded (``10**9``), and a fresh
structure per graph (nothing kept: every graph builds its plan), after a warm-up run.

    OMP_NUM_THREADS=1 python benchmarks/varying_lengths.py [--max-len 200] [--passes 2]

Results: ``benchmarks/results/varying_lengths.{json,md}``.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import torch
from torch.distributions import Categorical

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_workloads import clock
from surrogate_overhead import CPU, log, machine

import scg

RESULTS = Path(__file__).resolve().parent / "results"
B, K = 16, 8


def run(max_len: int, passes: int, keep: int | None) -> dict[str, Any]:
    """One variant: ``keep`` signatures (None: a fresh structure per graph)."""
    gen = torch.Generator().manual_seed(0)
    w = (torch.randn(K, K, generator=gen) / K**0.5).requires_grad_()
    torch.manual_seed(0)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    structure = None if keep is None else scg.Declared(max_signatures=keep)
    t0 = clock()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (the eviction warning, once)
        for _ in range(passes):
            for steps in range(1, max_len + 1):
                h = torch.zeros(B, K)
                with scg.Graph(structure=structure if structure is not None else scg.Declared()) as g:
                    for t in range(steps):
                        z = scg.sample(Categorical(logits=h @ w), name="z", step=t)  # (B,)
                        h = torch.tanh(h + torch.nn.functional.one_hot(z, K).float())  # (B, K)
                        scg.cost(h.sum(-1), name="c", step=t)  # (B,)
                g.surrogate_loss().backward()
                w.grad = None
    seconds = clock() - t0
    del g
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    plans = 0 if structure is None else len(structure.plans)
    structure = None
    gc.collect()
    after = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    label = "fresh structure per graph" if keep is None else f"max_signatures={keep}"
    row = {
        "variant": label,
        "plans": plans,
        "held_mb": (held - after) / 1e6,
        "cpu_s": seconds,
    }
    log(f"{label}: {plans} plans, {row['held_mb']:.1f} MB held by the structure, {seconds:.1f} s")
    return row


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-len", type=int, default=200)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    run(min(args.max_len, 40), 1, 10**9)  # (warm-up, not reported: torch's and scg's first calls)
    rows = [run(args.max_len, args.passes, keep) for keep in (64, 10**9, None)]
    reference = rows[1]
    for row in rows:
        row["cpu_vs_unbounded"] = row["cpu_s"] / reference["cpu_s"]
    result = {
        "machine": machine(CPU),
        "command": f"OMP_NUM_THREADS=1 python benchmarks/varying_lengths.py --max-len {args.max_len} "
        f"--passes {args.passes}",
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "varying_lengths.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# A loop of a new length at every graph: what the structure keeps",
        "",
        f"{result['machine'].get('torch', '')} one thread. Command: `{result['command']}` (T = 1..{args.max_len}, "
        f"{args.passes} passes, B = {B}, K = {K}). Memory: Python allocations the structure holds (tracemalloc); "
        "time: thread CPU seconds of the whole run, and its ratio to the unbounded structure's in this run.",
        "",
        "| variant | plans kept | MB held | CPU s | CPU / unbounded |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {r['variant']} | {r['plans']} | {r['held_mb']:.1f} | {r['cpu_s']:.1f} | {r['cpu_vs_unbounded']:.2f} |"
            for r in rows
        ),
        "",
    ]
    (args.out / "varying_lengths.md").write_text("\n".join(lines))
    log(f"wrote {args.out / 'varying_lengths.json'} and {args.out / 'varying_lengths.md'}")
    return result


if __name__ == "__main__":
    main()
