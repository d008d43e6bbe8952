"""Small models, where scg's per-node Python shows: scg ÷ hand-written time per gradient step.

The workloads of issue 25 (``small_workloads.py``: a sigmoid belief net, a recurrent attention
model, a discrete latent sequence, a mixed Gumbel-ST / REINFORCE / reparameterised model), each
with a hand-written twin that draws the same values and computes scg's gradient. scg runs
tracked (``scg.Graph()``), ``scg.Cached()`` and ``scg.Declared()``; the step is forward +
surrogate + backward, the implementations alternate in one process (``measure`` of
``surrogate_overhead.py``), one thread, per batch size and hidden size (the repeats of a row
capped by ``--row-budget-s``). Beside them, the hand-written step under a function mode that only
calls each function (``small_workloads.EmptyMode``): the floor of any tracker written as a Python
``TorchFunctionMode``, as scg's tracked graphs are. ``--peers``: Pyro (``TraceGraph_ELBO``, ``JitTraceGraph_ELBO``)
and Storchastic on the same workloads in the same run, each in its own process
(``small_models_peers.py``). ``--compile``: the whole step of every workload (``sequence`` at
T = 5) compiled with ``torch.compile(fullgraph=True)`` (inductor), scg Declared against the
hand-written step compiled the same way; ``attention`` (a T = 30 loop, which inductor takes
minutes to compile) only captured, with dynamo's eager backend. A refusal is recorded with its
message. Each compiled row also says where the time goes besides the generated code (dynamo's
guards: their count and evaluation time, the ratio with guard evaluation skipped and with scg's
guards dropped); ``--compile-only`` runs these rows alone, ``--workloads`` picks workloads.

Per-node cost: a chain of N Bernoulli nodes (B = 32), each followed by a cost or with one cost at
the end, against the same chains by hand (``chain``). Per N, many repeats (more for small N, where
a repeat is cheap) of the hand-written loss, scg's forward and scg's surrogate, alternating,
each on the thread's CPU clock with the garbage collector paused; the forward's extra time is the
median of the paired differences (scg − hand in the same repeat). A weighted least-squares fit of
extra(N) = fixed + slope · N (weights 1/N², so that each N counts by its relative error) gives µs
per ``scg.sample`` (one final cost), per ``scg.cost`` (the per-node-cost chain's slope minus
that) and the surrogate's build per node, and the fixed part per graph (``small_models.png``:
each against N); and the surrogate of a graph whose signature its ``Declared`` structure has not
seen (the relation and the credit plan built first: a loop of a new length). ``--profile``:
cProfile's breakdown of one ``sbn`` step in Declared and tracked mode. ``--docs``: the measured
tables into ``docs/performance.md`` (between its markers). The report: ``small_models_report.py``.
Results: ``benchmarks/results/small_models.{json,md,png}``.

    OMP_NUM_THREADS=1 python benchmarks/small_models.py [--quick] [--peers] [--compile] [--profile] [--docs]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import small_models_peers as peers
from estimators import _version as estimators_version
from small_models_report import DOCS, plot, render, write_docs
from small_workloads import (
    MODES,
    WORKLOADS,
    Chain,
    Loss,
    Model,
    alternate,
    chain,
    clock,
    inner_calls,
    make_attention,
    make_mixed,
    make_ram,
    make_sbn,
    make_sequence,
    make_toy,
    paired_ratio,
    steps,
    structure,
    timed,
    under_empty_mode,
)
from surrogate_overhead import CPU, log, machine, warm_up

RESULTS = Path(__file__).resolve().parent / "results"


def measure(
    fns: dict[str, Callable[[], None]], params: list[torch.Tensor], repeats: int, inner: int, warm: int = 3
) -> dict[str, list[float]]:
    """Seconds per call of each function in each of ``repeats`` rounds (``small_workloads.alternate``:
    thread CPU time, the order reversed every other round), after ``warm`` calls of each."""
    for _ in range(warm):
        for f in fns.values():
            timed(f, params, 1)
    blocks = dict.fromkeys(fns, inner)
    times: dict[str, list[float]] = {k: [] for k in fns}
    for r in range(repeats):
        for k, sec in alternate(fns, params, blocks, flip=r % 2 == 1).items():
            times[k].append(sec)
    return times


def _budgeted(
    fns: dict[str, Callable[[], None]], params: list[torch.Tensor], inner: int, repeats: int, budget_s: float
) -> int:
    """The repeats of a row: at most ``repeats``, at least 5, and about ``budget_s`` seconds of
    alternating rounds (one call of each function timed)."""
    round_s = sum(timed(f, params, 1) for f in fns.values()) * inner
    return max(min(repeats, 5), min(repeats, int(budget_s / max(round_s, 1e-9))))


def overhead(
    repeats: int,
    batches: list[int],
    hiddens: list[int],
    names: list[str] | None = None,
    floor_s: float = 0.004,
    budget_s: float = 30.0,
) -> list[dict[str, Any]]:
    """One row per (workload, hidden, batch): median ms per step, and per mode the median over
    rounds of its time ÷ the hand-written step's in the same round (``paired_ratio``). A workload
    without a hidden size (the toy) has its rows at the first hidden size only (``hidden``: None)."""
    rows = []
    for name in names or list(WORKLOADS):
        work = WORKLOADS[name]
        for hidden in hiddens if work.hidden else hiddens[:1]:
            for b in batches:
                model = work.make(b, hidden)
                hand, modes = steps(model)
                fns = {"hand": hand, "empty_mode": under_empty_mode(hand), **modes}
                inner = inner_calls(hand, model.params, floor_s)
                reps = repeats if repeats <= 5 else _budgeted(fns, model.params, inner, repeats, budget_s)
                times = measure(fns, model.params, reps, inner, 1 if floor_s == 0 else 3)
                row: dict[str, Any] = {
                    "workload": name,
                    "label": work.label,
                    "batch": b,
                    "hidden": hidden if work.hidden else None,
                    "inner": inner,
                    "repeats": reps,
                    "hand_ms": statistics.median(times["hand"]) * 1e3,
                }
                for m in (*MODES, "empty_mode"):
                    row[f"{m}_ms"] = statistics.median(times[m]) * 1e3
                    row[f"{m}_ratio"] = paired_ratio(times, m)
                row["tracked_over_empty_mode"] = paired_ratio(times, "tracked", "empty_mode")
                rows.append(row)
                log(
                    f"{name:9s} B={b:3d} H={row['hidden'] or '-'!s:>3} hand {row['hand_ms']:8.3f} ms ({reps} repeats)  "
                    + "  ".join(f"{m} {row[m + '_ratio']:.3f}" for m in (*MODES, "empty_mode"))
                )
    return rows


PHASES = ("hand_forward", "hand_assemble", "forward", "surrogate")


def _phases(chains: dict[str, Chain], mode: str, repeats: int, inner: int) -> dict[str, dict[str, list[float]]]:
    """Per chain variant, seconds per call of each phase (the hand-written forward and loss
    assembly, scg's forward and surrogate) in each of ``repeats`` repeats: the variants and the
    phases alternate within a repeat (``inner`` calls each, thread CPU time, the garbage
    collector paused; two warm-up repeats dropped)."""
    out = {key: {phase: [] for phase in PHASES} for key in chains}
    structures = {key: structure(mode) for key in chains}
    enabled = gc.isenabled()
    try:
        for r in range(repeats + 2):
            for key, c in chains.items():
                gc.disable()
                t0 = clock()
                parts = [c.hand_forward() for _ in range(inner)]
                t1 = clock()
                for lps, costs in parts:
                    c.hand_assemble(lps, costs)
                t2 = clock()
                graphs = [c.forward(structures[key]) for _ in range(inner)]
                t3 = clock()
                for g in graphs:
                    g.surrogate_loss()
                t4 = clock()
                gc.enable()
                if r >= 2:
                    for phase, sec in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                        out[key][phase].append(sec / inner)
    finally:
        if enabled:
            gc.enable()
    return out


def _new_signature(c: Chain, repeats: int) -> float:
    """µs of the surrogate of a graph of ``c`` whose ``Declared`` structure is new (its relation
    and credit plan built, then the surrogate that reused plans make): the median over
    ``repeats`` graphs, each with a fresh structure, thread CPU time, the garbage collector
    paused (two warm-up graphs dropped)."""
    times = []
    for r in range(repeats + 2):
        g = c.forward(structure("declared"))
        gc.disable()
        t0 = clock()
        g.surrogate_loss()
        t1 = clock()
        gc.enable()
        if r >= 2:
            times.append(t1 - t0)
    return statistics.median(times) * 1e6


def per_node(repeats: int, sizes: list[int], floor_s: float = 0.002, boost: int = 5) -> list[dict[str, Any]]:
    """Per N and mode (µs per graph, medians of the paired differences within a repeat): scg's
    forward over the hand-written forward (the same draws, log-probabilities and costs), per chain
    variant (a cost per node, *pair*; one cost at the end, *samples*); the cost calls' part
    (pair − samples, paired as well); the surrogate's build, alone and over the hand-written
    loss's assembly; and per call, each divided by N.

    Small chains get more repeats (up to ``boost`` x ``repeats``; a repeat is cheap there) and
    several calls per timed block (about ``floor_s`` of forward each)."""
    out = []
    for n in sizes:
        row: dict[str, Any] = {"N": n}
        reps = repeats * max(1, min(boost, 64 // n))
        for m in MODES:
            chains = {"pair": chain(n, True), "samples": chain(n, False)}
            t0 = clock()
            chains["pair"].forward(structure(m))
            inner = max(1, min(50, round(floor_s / max(clock() - t0, 1e-6))))
            res = _phases(chains, m, reps, inner)

            def diffs(key: str, a: str, b: str, res: dict[str, dict[str, list[float]]] = res) -> list[float]:
                return [x - y for x, y in zip(res[key][a], res[key][b])]

            extra = {key: diffs(key, "forward", "hand_forward") for key in chains}
            row[f"{m}_pair_extra_us"] = statistics.median(extra["pair"]) * 1e6
            row[f"{m}_sample_extra_us"] = statistics.median(extra["samples"]) * 1e6
            cost_extra = statistics.median(p - q for p, q in zip(extra["pair"], extra["samples"])) * 1e6
            row[f"{m}_surrogate_us"] = statistics.median(res["pair"]["surrogate"]) * 1e6
            row[f"{m}_surrogate_extra_us"] = statistics.median(diffs("pair", "surrogate", "hand_assemble")) * 1e6
            row[f"{m}_sample_us"] = row[f"{m}_sample_extra_us"] / n
            row[f"{m}_cost_us"] = cost_extra / n
            row[f"{m}_surrogate_us_per_node"] = row[f"{m}_surrogate_us"] / n
            row[f"{m}_hand_forward_us"] = statistics.median(res["pair"]["hand_forward"]) * 1e6
            row[f"{m}_hand_assemble_us"] = statistics.median(res["pair"]["hand_assemble"]) * 1e6
        row["repeats"] = reps
        row["new_signature_us"] = _new_signature(chain(n, True), reps)
        out.append(row)
        log(
            f"N={n:4d} ({reps} repeats) "
            + "  ".join(
                f"{m}: sample {row[m + '_sample_us']:.1f} cost {row[m + '_cost_us']:.1f} "
                f"surrogate/node {row[m + '_surrogate_us_per_node']:.1f} µs"
                for m in MODES
            )
        )
    return out


def _guards(fn: Callable[..., Any]) -> dict[str, Any]:
    """Dynamo's guards on ``fn``'s compiled frame: how many cache entries, how many leaf guards
    (every check the guard manager makes before each call, in its first entry), and their
    evaluation time with the CPU cache flushed first (``profile_guard_manager``, µs, median of
    15), the cost they have in a step on a loaded machine, where other processes evict them."""
    from torch._C._dynamo.guards import profile_guard_manager
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    entries = _debug_get_cache_entry_list(fn.__code__)
    manager = entries[0].guard_manager
    scope = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))

    def leaves(node: Any) -> int:
        return len(node.get_leaf_guards()) + sum(leaves(c) for c in node.get_child_managers())

    cold = statistics.median(profile_guard_manager(manager.root, scope, 1) for _ in range(15))
    return {"entries": len(entries), "leaf_guards": leaves(manager.root), "guards_cold_us": cold}


def compiled_rows(
    repeats: int, batch: int = 16, hidden: int = 32, names: list[str] | None = None
) -> list[dict[str, Any]]:
    """The whole step compiled with fullgraph=True, timed with inductor (sequence at T=5); the
    T=30 attention loop only captured (dynamo's eager backend: inductor takes minutes on it).

    Besides the ratio (compiled Declared ÷ compiled hand-written, both compiled with default
    options), where the time goes outside the generated code: each step's guards (`_guards`),
    the ratio with guard evaluation skipped (``skip_guard_eval_unsafe``: what the generated
    code and its wrappers cost alone), and the ratio with scg's own guards dropped
    (`scg.skip_scg_guards` as ``guard_filter_fn``, given to both compilations)."""
    from scg import skip_scg_guards

    rows: list[dict[str, Any]] = []
    makers: dict[str, Callable[[], Model]] = {
        "sequence": lambda: make_sequence(batch, hidden, steps=5),
        "sbn": lambda: make_sbn(batch, hidden),
        "ram": lambda: make_ram(batch, hidden),
        "mixed": lambda: make_mixed(batch, hidden),
        "toy": lambda: make_toy(batch),
        "attention": lambda: make_attention(batch, hidden),
    }
    for name, make in makers.items():
        if names is not None and name not in names:
            continue
        backend = "eager" if name == "attention" else "inductor"
        row: dict[str, Any] = {
            "workload": name,
            "batch": batch,
            "hidden": hidden if WORKLOADS[name].hidden else None,
            "backend": backend,
        }
        start = time.perf_counter()
        torch._dynamo.reset()
        try:
            model = make()
            hand_loss, decl_loss = model.hand_loss, model.scg_loss(structure("declared"))
            hand_c = torch.compile(hand_loss, fullgraph=True, dynamic=False, backend=backend)
            decl_c = torch.compile(decl_loss, fullgraph=True, dynamic=False, backend=backend)

            def run(fn: Loss) -> Callable[[], None]:
                return lambda: fn().backward()

            row["compile_s"] = warm_up([run(hand_c), run(decl_c)], CPU)
            if backend == "inductor":
                row["hand_guards"], row["declared_guards"] = _guards(hand_loss), _guards(decl_loss)
                eager_hand, eager_modes = steps(model)
                inner = row["inner"] = inner_calls(run(hand_c), model.params, 0.01)
                times = measure(
                    {"hand": run(hand_c), "declared": run(decl_c), "eager_hand": eager_hand},
                    model.params,
                    repeats,
                    inner,
                )
                row.update({k + "_ms": statistics.median(v) * 1e3 for k, v in times.items()})
                row["ratio"] = paired_ratio(times, "declared")
                torch.compiler.set_stance("default", skip_guard_eval_unsafe=True)
                try:
                    times = measure({"hand": run(hand_c), "declared": run(decl_c)}, model.params, repeats, inner)
                finally:
                    torch.compiler.set_stance("default", skip_guard_eval_unsafe=False)
                row["ratio_guards_skipped"] = paired_ratio(times, "declared")
                # the same two steps compiled once more with scg's guards dropped (torch.compile
                # takes the filter out of the options dict it is given: one dict per compilation)
                torch._dynamo.reset()
                hand_f, decl_f = (
                    torch.compile(f, fullgraph=True, dynamic=False, options={"guard_filter_fn": skip_scg_guards})
                    for f in (hand_loss, decl_loss)
                )
                warm_up([run(hand_f), run(decl_f)], CPU)
                row["declared_guards_filtered"] = _guards(decl_loss)
                times = measure({"hand": run(hand_f), "declared": run(decl_f)}, model.params, repeats, inner)
                row["ratio_scg_guards_skipped"] = paired_ratio(times, "declared")
            else:
                row["captured"] = True
        except Exception as e:  # a refusal or failure is the result to report
            row["error"] = f"{type(e).__name__}: {e}"[:1500]
        row["wall_s"] = time.perf_counter() - start
        rows.append(row)
        log(f"compile {name}: " + (row["error"].splitlines()[0][:200] if "error" in row else _compile_summary(row)))
    return rows


def _compile_summary(row: dict[str, Any]) -> str:
    if "ratio" not in row:
        return "ok (captured)"
    hand, decl = row["hand_guards"], row["declared_guards"]
    return (
        f"ok ({row['ratio']:.3f}; guards skipped {row['ratio_guards_skipped']:.3f}, scg's guards skipped "
        f"{row['ratio_scg_guards_skipped']:.3f}; leaf guards hand {hand['leaf_guards']} declared "
        f"{decl['leaf_guards']} (filtered {row['declared_guards_filtered']['leaf_guards']}), cold evaluation "
        f"{hand['guards_cold_us']:.0f} / {decl['guards_cold_us']:.0f} us)"
    )


AREAS = (
    ("scg/graph", "scg: graph building (scg/graph)"),
    ("scg/credit", "scg: surrogate (scg/credit)"),
    ("scg/baselines", "scg: baselines"),
    ("scg/", "scg: other"),
    ("torch/distributions", "torch.distributions (Python)"),
    ("torch/", "torch, other Python"),
    ("benchmarks/", "the model's own Python"),
)
ENTRY_POINTS = {
    "scg.sample": ("scg/graph/sampling.py", "sample"),
    "scg.cost": ("scg/graph/costs.py", "cost"),
    "surrogate_loss": ("scg/credit/surrogate.py", "surrogate_loss"),
    "backward (autograd engine)": ("~", "<method 'run_backward' of 'torch._C._EngineBase' objects>"),
}


def _area(file: str, func: str) -> str:
    if file == "~":
        return "autograd backward (C++)" if "run_backward" in func else "builtins and torch ops (C)"
    short = _short(file)
    return next((name for key, name in AREAS if short.startswith(key)), "other Python")


def profile(batch: int = 32, hidden: int = 32, calls: int = 200, top: int = 12) -> dict[str, dict[str, Any]]:
    """cProfile of ``sbn`` steps in Declared and tracked mode, on the thread's CPU clock: own
    time by area (scg's modules, torch's Python, the C ops), the cumulative time of scg's entry
    points, and the top entries by own time (µs per step)."""
    out = {}
    model = make_sbn(batch, hidden)
    _, modes = steps(model)
    for m in ("declared", "tracked"):
        fn = modes[m]
        for _ in range(3):
            fn()
        prof = cProfile.Profile(clock)
        prof.enable()
        for _ in range(calls):
            fn()
            for p in model.params:
                p.grad = None
        prof.disable()
        stats = pstats.Stats(prof, stream=io.StringIO())
        total = stats.total_tt  # type: ignore[attr-defined]
        entries, areas, entry = [], dict.fromkeys([n for _, n in AREAS], 0.0), {}
        for (file, line, func), (_, ncalls, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
            area = _area(file, func)
            areas[area] = areas.get(area, 0.0) + tt / calls * 1e6
            for name, (where, fname) in ENTRY_POINTS.items():
                if func == fname and _short(file) == where:
                    entry[name] = {"calls": ncalls / calls, "cum_us": ct / calls * 1e6}
            entries.append(
                {
                    "function": f"{_short(file)}:{line}({func})",
                    "calls": ncalls / calls,
                    "own_us": tt / calls * 1e6,
                    "cum_us": ct / calls * 1e6,
                    "own_share": tt / total,
                }
            )
        entries.sort(key=lambda e: -e["own_us"])
        out[m] = {"step_us": total / calls * 1e6, "areas": areas, "entry_points": entry, "top": entries[:top]}
        log(f"profile {m}: {total / calls * 1e6:.0f} µs per step under cProfile")
    return out


def _short(file: str) -> str:
    for key in ("/scg/", "/torch/", "/benchmarks/"):
        if key in file:
            return key.strip("/") + "/" + file.split(key, 1)[1]
    return file


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes and 1 repeat (a smoke run; the numbers mean nothing)"
    )
    parser.add_argument("--batch", type=int, nargs="+", default=None, metavar="B", help="default 1 32 256")
    parser.add_argument("--hidden", type=int, nargs="+", default=None, metavar="H", help="default 32 128")
    parser.add_argument("--repeats", type=int, default=None, help="alternating repeats per row (default 15)")
    parser.add_argument(
        "--row-budget-s",
        type=float,
        default=30.0,
        help="fewer repeats (at least 5) where a row's repeats would take longer (CPU seconds)",
    )
    parser.add_argument(
        "--nodes",
        type=int,
        nargs="+",
        default=None,
        metavar="N",
        help="chain lengths of the per-node scan (default 1 4 16 64 256)",
    )
    parser.add_argument("--peers", action="store_true", help="add Pyro and Storchastic on the same workloads")
    parser.add_argument(
        "--peer-batch", type=int, nargs="+", default=None, metavar="B", help="the peers' batch sizes (default 32 256)"
    )
    parser.add_argument("--compile", action="store_true", help="add the torch.compile rows")
    parser.add_argument("--compile-only", action="store_true", help="only the torch.compile rows (implies --compile)")
    parser.add_argument(
        "--workloads", nargs="+", choices=list(WORKLOADS), default=None, metavar="NAME", help="default: all"
    )
    parser.add_argument("--profile", action="store_true", help="add the cProfile breakdown")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--docs",
        type=Path,
        nargs="?",
        const=DOCS,
        default=None,
        help="write the measured tables into this page's marked block (default docs/performance.md)",
    )
    parser.add_argument("--render", action="store_true", help="rewrite the .md and .png from the .json")
    parser.add_argument(
        "--add-profile", action="store_true", help="run only the cProfile breakdown and add it to the existing .json"
    )
    args = parser.parse_args(argv)
    quick = args.quick
    batches = args.batch or ([2] if quick else [1, 32, 256])
    hiddens = args.hidden or ([8] if quick else [32, 128])
    repeats = args.repeats or (1 if quick else 15)
    nodes = args.nodes or ([1, 2, 4] if quick else [1, 4, 16, 64, 256])
    peer_batches = args.peer_batch or ([2] if quick else [32, 256])
    for name, v in (
        ("batch", batches),
        ("nodes", nodes),
        ("hidden", hiddens),
        ("repeats", [repeats]),
        ("peer-batch", peer_batches),
    ):
        if min(v) < 1:
            parser.error(f"--{name} must be >= 1, got {v}")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        **machine(CPU),
        "repeats": repeats,
        "row_budget_s": args.row_budget_s,
        "batches": batches,
        "hidden": hiddens,
        "quick": quick,
    }
    if argv is not None:
        meta["command"] = "python benchmarks/small_models.py " + " ".join(argv)
    data: dict[str, Any] = {"meta": meta}
    json_path, md_path = args.out / "small_models.json", args.out / "small_models.md"
    if args.render or args.add_profile:
        data = json.loads(json_path.read_text())
        if args.add_profile:
            data["profile"] = profile(calls=5 if quick else 200)
            data["meta"]["profile_load_average"] = machine(CPU)["load_average_1_5_15"]
            json_path.write_text(json.dumps(data, indent=2) + "\n")
        render(data, md_path)
        plot(data["per_node"], args.out / "small_models.png")
        if args.docs:
            write_docs(data, args.docs)
        return data

    def save() -> None:
        data["meta"]["load_at_end"] = machine(CPU)["load_average_1_5_15"]
        json_path.write_text(json.dumps(data, indent=2) + "\n")
        render(data, md_path)

    floor = 0.0 if quick else 0.004
    if args.compile_only:
        data["compile"] = compiled_rows(max(5, repeats // 2), names=args.workloads)
        json_path.write_text(json.dumps(data, indent=2) + "\n")
        log(f"wrote {json_path}")
        return data
    data["rows"] = overhead(repeats, batches, hiddens, args.workloads, floor_s=floor, budget_s=args.row_budget_s)
    save()
    if args.peers:
        meta["peer_versions"] = {
            "pyro": estimators_version("pyro-ppl"),
            "storchastic": estimators_version("storchastic"),
        }
        data["peers"] = peers.peer_rows(
            repeats, peer_batches, hiddens[0], list(WORKLOADS), floor_s=floor, budget_s=args.row_budget_s
        )
        save()
    data["per_node"] = per_node(repeats, nodes, floor_s=0.0 if quick else 0.002, boost=1 if quick else 5)
    save()
    plot(data["per_node"], args.out / "small_models.png")
    if args.profile:
        data["profile"] = profile(calls=5 if quick else 200)
        save()
    if args.compile:
        data["compile"] = compiled_rows(max(5, repeats // 2), names=args.workloads)
        save()
    if args.docs:
        write_docs(data, args.docs)
    log(f"wrote {json_path} and {md_path}" + (f" and the tables in {args.docs}" if args.docs else ""))
    return data


if __name__ == "__main__":
    main()
