"""Per-op cost of the subclass-alias check (``scg.graph.aliases``): one tracked torch call whose
other input is an ``nn.Parameter`` (checked: a subclass instance without a mask) against the
same call with a plain tensor (not checked), inside one open graph, alternating.

The same Parameter call with the check skipped (the tracker's table of node storages emptied
for the timing) is the end-to-end reference; the check itself (a storage-pointer read and a
dictionary lookup, after a type test) is also timed alone, as the mode runs it, which is the
figure that survives the noise of a shared machine. Results: ``benchmarks/results/
alias_check_overhead.{json,md}``.

    OMP_NUM_THREADS=1 python benchmarks/alias_check_overhead.py [--repeats 30]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch
from torch.distributions import Bernoulli

import scg
from scg.graph.aliases import adopt

RESULTS = Path(__file__).resolve().parent / "results"


def per_call(x: torch.Tensor, w: torch.Tensor, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        torch.mul(x, w)
    return (time.perf_counter() - t0) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    param = torch.nn.Parameter(torch.randn(8))
    plain = param.detach().clone()
    times: dict[str, list[float]] = {"plain": [], "parameter": [], "parameter_unchecked": [], "untracked": []}
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=torch.zeros(8)), name="z")  # the graph has a node
        tracker = g.tracker
        nodes = tracker.node_storages
        with torch.no_grad():
            for _ in range(args.repeats):
                times["plain"].append(per_call(z, plain, args.calls))
                times["parameter"].append(per_call(z, param, args.calls))
                times["untracked"].append(per_call(plain, param, args.calls))
                tracker.node_storages = {}  # the check is skipped while no node value is known
                times["parameter_unchecked"].append(per_call(z, param, args.calls))
                tracker.node_storages = nodes
        # the check alone, on a miss (a model weight), as the mode runs it (tracking paused)
        iso = []
        with g.paused():
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    adopt(tracker, param)
                iso.append((time.perf_counter() - t0) / args.calls)
    # minimum over repeats: the least disturbed by other processes on a shared machine
    med = {k: min(v) * 1e6 for k, v in times.items()}
    med["check_alone"] = min(iso) * 1e6
    added = med["parameter"] - med["parameter_unchecked"]
    print(f"tracked x * plain tensor   {med['plain']:.3f} us/call")
    print(f"tracked x * nn.Parameter   {med['parameter']:.3f} us/call  (A/B: {added:+.3f} us)")
    print(f"  same, check skipped      {med['parameter_unchecked']:.3f} us/call")
    print(f"untracked x * nn.Parameter {med['untracked']:.3f} us/call")
    print(f"the check alone (a miss)   {med['check_alone']:.3f} us/call")
    meta = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "repeats": args.repeats,
        "calls": args.calls,
        "threads": 1,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "alias_check_overhead.json").write_text(
        json.dumps({"meta": meta, "us_per_call": med, "added_us": added}, indent=2) + "\n"
    )
    (args.out / "alias_check_overhead.md").write_text(
        "# Subclass-alias check: cost per torch call (best of the repeats, microseconds)\n\n"
        f"torch {meta['torch']}, 1 thread, {args.repeats} alternating repeats of "
        f"{args.calls} calls. Reproduce: `OMP_NUM_THREADS=1 python "
        "benchmarks/alias_check_overhead.py`.\n\n"
        "| call (inside a graph) | us/call |\n|---|---:|\n"
        f"| tracked * plain tensor (not checked) | {med['plain']:.3f} |\n"
        f"| tracked * nn.Parameter (checked) | {med['parameter']:.3f} |\n"
        f"| tracked * nn.Parameter (check skipped) | {med['parameter_unchecked']:.3f} |\n"
        f"| untracked * nn.Parameter (checked) | {med['untracked']:.3f} |\n"
        f"| the check alone, on a miss (`adopt`) | {med['check_alone']:.3f} |\n"
        f"| end-to-end difference, checked - skipped | {added:+.3f} |\n\n"
        "The check alone is the figure to read; the end-to-end difference of two calls of "
        "several microseconds each is within the noise of a shared machine.\n"
    )


if __name__ == "__main__":
    main()
