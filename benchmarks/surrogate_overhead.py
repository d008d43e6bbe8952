"""Time per gradient step: scg's surrogate vs the same estimator written by hand in plain torch.

Workloads (both with the score-function estimator and per-example credit):

* ``hard_attention``: a T=30-step hard-attention loop, batch 32, M=10 chunks, hidden 256 (and 64).
  At each step a Categorical over the chunks is sampled, the chosen chunk gathered with
  ``H[arange(B), z]``, a tanh recurrence updated and a per-example cost added. The hand-written
  reference computes the reward-to-go with a reversed cumsum and one surrogate sum.
* ``toy``: Categorical(5) then a 3-step Bernoulli chain, 4 costs.

scg runs in three modes (``docs/performance.md``): ``tracked`` (``scg.Graph()``: every torch call
is watched), ``cached`` (``scg.Graph(structure=scg.Cached())``: the relation learned from a tracked
graph, re-checked every 100 graphs) and ``declared`` (``scg.Graph(structure=scg.Declared())``: the
causal rule, nothing tracked). Runs alternate between the implementations (to share machine
noise), and the report gives medians and the ratio to hand-written.

``--compile``: the hard-attention step at hidden 256 with its model functions (the attention
scores and the recurrence) compiled by ``torch.compile`` (CPU inductor), scg declared, against
the same step eager. ``--scan``: time per step against the number of steps T (hidden 64), for
the plot ``surrogate_overhead.png``. Results: ``benchmarks/results/surrogate_overhead.{json,md,png}``.

    python benchmarks/surrogate_overhead.py [--repeats 40] [--compile] [--scan]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.distributions import Bernoulli, Categorical

import scg

RESULTS = Path(__file__).resolve().parent / "results"


def make_attention(hidden: int, batch: int = 32, chunks: int = 10, steps: int = 30,
                   compiled: bool = False) -> tuple[Callable[[], None], dict[str, Callable[[], None]],
                                                    list[torch.Tensor]]:
    """The hand-written step, scg's steps per mode, and the parameters."""
    gen = torch.Generator().manual_seed(0)
    enc = torch.randn(batch, chunks, hidden, generator=gen)
    w = torch.nn.Parameter(torch.randn(hidden, hidden, generator=gen) / hidden**0.5)
    u = torch.nn.Parameter(torch.randn(hidden, hidden, generator=gen) / hidden**0.5)
    q = torch.nn.Parameter(torch.randn(hidden, hidden, generator=gen) / hidden**0.5)
    target = torch.randn(steps, batch, hidden, generator=gen)
    params = [w, u, q]
    rows = torch.arange(batch)

    def attend(h: torch.Tensor) -> torch.Tensor:
        return torch.bmm(enc, (h @ q)[:, :, None]).squeeze(-1)  # (B, M)

    def recur(h: torch.Tensor, z: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor,
                                                                             torch.Tensor]:
        h = torch.tanh(enc[rows, z] @ w + h @ u)  # (B, H)
        return h, ((h - tgt) ** 2).sum(-1)  # (B,)

    if compiled:
        attend = torch.compile(attend, dynamic=False, fullgraph=True)  # type: ignore[assignment]
        recur = torch.compile(recur, dynamic=False, fullgraph=True)  # type: ignore[assignment]

    def hand() -> None:
        h = torch.zeros(batch, hidden)
        logps, costs = [], []
        for t in range(steps):
            d = Categorical(logits=attend(h), validate_args=False)
            z = d.sample()
            logps.append(d.log_prob(z))
            h, c = recur(h, z, target[t])
            costs.append(c)
        c = torch.stack(costs)
        rtg = c.detach().flip(0).cumsum(0).flip(0)
        loss = (torch.stack(logps) * rtg).sum() + c.sum()
        loss.backward()

    def with_scg(structure: scg.Declared | scg.Cached | None) -> Callable[[], None]:
        def step() -> None:
            h = torch.zeros(batch, hidden)
            with scg.Graph(structure=structure) as g:
                for t in range(steps):
                    z = scg.sample(Categorical(logits=attend(h), validate_args=False), name="z",
                                   step=t)
                    h, c = recur(h, z, target[t])
                    scg.cost(c, name="c", step=t)
            g.surrogate_loss().backward()
        return step

    modes = {"tracked": with_scg(None), "cached": with_scg(scg.Cached(check_every=100)),
             "declared": with_scg(scg.Declared())}
    if compiled:
        del modes["tracked"], modes["cached"]  # a compiled function inside a tracked graph:
        # dynamo would trace through the tracking mode (docs/tracking.md)
    return hand, modes, params


def make_toy() -> tuple[Callable[[], None], dict[str, Callable[[], None]], list[torch.Tensor]]:
    theta = torch.nn.Parameter(torch.zeros(5))
    phi = torch.nn.Parameter(torch.zeros(3))

    def hand() -> None:
        d0 = Categorical(logits=theta, validate_args=False)
        z = d0.sample()
        lps, costs = [d0.log_prob(z)], [(z.float() - 2.0) ** 2]
        b = z.float() / 4.0
        for t in range(3):
            d = Bernoulli(logits=phi[t] + b, validate_args=False)
            b = d.sample()
            lps.append(d.log_prob(b))
            costs.append(b * (t + 1.0))
        # z influences every cost; b_t influences costs t+1.. (index t+1 in the list).
        rtg = torch.stack(costs).flip(0).cumsum(0).flip(0)
        loss = sum(lp * r for lp, r in zip(lps, rtg)) + sum(costs)
        loss.backward()  # type: ignore[union-attr]

    def with_scg(structure: scg.Declared | scg.Cached | None) -> Callable[[], None]:
        def step() -> None:
            with scg.Graph(structure=structure) as g:
                z = scg.sample(Categorical(logits=theta, validate_args=False), name="z")
                scg.cost((z.float() - 2.0) ** 2, name="c0")
                b = z.float() / 4.0
                for t in range(3):
                    b = scg.sample(Bernoulli(logits=phi[t] + b, validate_args=False), name="b",
                                   step=t)
                    scg.cost(b * (t + 1.0), name="c", step=t)
            g.surrogate_loss().backward()
        return step

    modes = {"tracked": with_scg(None), "cached": with_scg(scg.Cached(check_every=100)),
             "declared": with_scg(scg.Declared())}
    return hand, modes, [theta, phi]


def measure(fns: dict[str, Callable[[], None]], params: list[torch.Tensor],
            repeats: int, inner: int) -> dict[str, float]:
    """Median seconds per call of each function, the functions alternating."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(3):
        for f in fns.values():
            f()
    for _ in range(repeats):
        for name, f in fns.items():
            t0 = time.perf_counter()
            for _ in range(inner):
                f()
                for p in params:
                    p.grad = None
            times[name].append((time.perf_counter() - t0) / inner)
    return {k: statistics.median(v) for k, v in times.items()}


MODES = ("tracked", "cached", "declared")
TARGETS = {"hard_attention T=30 B=32 H=256": 1.10, "hard_attention T=30 B=32 H=64": 1.10,
           "toy Categorical(5)+3 Bernoulli, 4 costs": 1.3}


def machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {"torch": torch.__version__, "python": platform.python_version(),
            "machine": platform.machine(), "threads": torch.get_num_threads(),
            "cpus": os.cpu_count(), "load_average_1_5_15": [round(x, 2) for x in load]}


def overhead(repeats: int) -> list[dict[str, Any]]:
    rows = []
    for label, (hand, modes, params), inner in [
        ("hard_attention T=30 B=32 H=256", make_attention(256), 1),
        ("hard_attention T=30 B=32 H=64", make_attention(64), 2),
        ("toy Categorical(5)+3 Bernoulli, 4 costs", make_toy(), 20),
    ]:
        med = measure({"hand": hand, **modes}, params, repeats, inner)
        row: dict[str, Any] = {"workload": label, "hand_ms": med["hand"] * 1e3,
                               "target": TARGETS[label]}
        for m in MODES:
            row[f"{m}_ms"] = med[m] * 1e3
            row[f"{m}_ratio"] = med[m] / med["hand"]
        rows.append(row)
        print(f"{label:42s} hand {med['hand'] * 1e3:8.3f} ms  " + "  ".join(
            f"{m} {row[m + '_ratio']:.3f}" for m in MODES), flush=True)
    return rows


def compiled(repeats: int) -> dict[str, Any]:
    """Eager vs ``torch.compile`` of the model functions, hidden 256 (scg declared, hand)."""
    hand, modes, params = make_attention(256)
    hand_c, modes_c, params_c = make_attention(256, compiled=True)  # same seed: same values
    t0 = time.perf_counter()
    for _ in range(2):
        hand_c()
        modes_c["declared"]()
    warm = time.perf_counter() - t0
    med = measure({"eager_declared": modes["declared"], "compiled_declared": modes_c["declared"],
                   "eager_hand": hand, "compiled_hand": hand_c}, params + params_c, repeats, 1)
    out = {k + "_ms": v * 1e3 for k, v in med.items()}
    out["speedup_declared"] = med["eager_declared"] / med["compiled_declared"]
    out["speedup_hand"] = med["eager_hand"] / med["compiled_hand"]
    out["compiled_declared_vs_compiled_hand"] = med["compiled_declared"] / med["compiled_hand"]
    out["compile_and_warmup_s"] = warm
    print(f"compile (H=256): declared eager {out['eager_declared_ms']:.2f} ms, compiled "
          f"{out['compiled_declared_ms']:.2f} ms, speed-up {out['speedup_declared']:.2f}x; hand "
          f"speed-up {out['speedup_hand']:.2f}x", flush=True)
    return out


def scan(repeats: int, steps: tuple[int, ...] = (5, 10, 20, 40, 60)) -> list[dict[str, Any]]:
    """Time per gradient step against T (hidden 64): how each mode's cost grows."""
    out = []
    for t in steps:
        hand, modes, params = make_attention(64, steps=t)
        med = measure({"hand": hand, **modes}, params, repeats, 1)
        out.append({"T": t, **{k + "_ms": v * 1e3 for k, v in med.items()}})
        print(f"T={t:3d} " + "  ".join(f"{k} {v * 1e3:7.2f} ms" for k, v in med.items()),
              flush=True)
    return out


def plot(points: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ts = [p["T"] for p in points]
    for key, label in [("hand", "hand-written"), ("tracked", "scg tracked"),
                       ("cached", "scg Cached"), ("declared", "scg Declared")]:
        ax.plot(ts, [p[key + "_ms"] for p in points], marker="o", label=label)
    ax.set_xlabel("steps T (nodes: T stochastic + T costs)")
    ax.set_ylabel("ms per gradient step (median)")
    ax.set_title("hard attention, B=32, M=10, H=64, 1 thread")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _load_words(meta: dict[str, Any]) -> str:
    """How loaded the machine was when the run started (its 1-minute load average per core)."""
    load = meta["load_average_1_5_15"][0] / max(1, int(meta["cpus"]))
    if load < 0.5:
        return "a quiet machine"
    return "a machine shared with other work: absolute times are inflated and noisy"


def render(data: dict[str, Any], path: Path) -> None:
    meta = data["meta"]
    lines = ["# Surrogate overhead: scg vs hand-written (median time per gradient step)", "",
             f"torch {meta['torch']}, {meta['threads']} thread(s), {meta['repeats']} alternating "
             f"repeats; load average at the start {meta['load_average_1_5_15']} on "
             f"{meta['cpus']} cores ({_load_words(meta)}; the ratios are measured "
             "alternately in one run). "
             "Reproduce: `python benchmarks/surrogate_overhead.py --compile --scan`.", "",
             "| workload | hand-written (ms) | tracked (ms) | Cached (ms) | Declared (ms) | "
             "tracked / hand | Cached / hand | Declared / hand | target |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in data["rows"]:
        lines.append(f"| {r['workload']} | {r['hand_ms']:.3f} | {r['tracked_ms']:.3f} | "
                     f"{r['cached_ms']:.3f} | {r['declared_ms']:.3f} | {r['tracked_ratio']:.3f} | "
                     f"{r['cached_ratio']:.3f} | {r['declared_ratio']:.3f} | <= {r['target']} |")
    c = data.get("compile")
    if c:
        lines += ["", "## torch.compile (CPU inductor), hard attention T=30 B=32 H=256", "",
                  "The model's functions (attention scores; recurrence and cost) compiled with "
                  "`torch.compile(dynamic=False, fullgraph=True)`, the scg calls eager in a `scg.Declared` graph "
                  "(a whole step with `fullgraph=True` does not compile: `docs/performance.md`).",
                  "", "| | eager (ms) | compiled (ms) | speed-up |", "|---|---:|---:|---:|",
                  f"| scg Declared | {c['eager_declared_ms']:.2f} | {c['compiled_declared_ms']:.2f} "
                  f"| {c['speedup_declared']:.2f}x |",
                  f"| hand-written | {c['eager_hand_ms']:.2f} | {c['compiled_hand_ms']:.2f} | "
                  f"{c['speedup_hand']:.2f}x |", "",
                  f"Compiled scg Declared / compiled hand-written: "
                  f"{c['compiled_declared_vs_compiled_hand']:.3f}; compilation and warm-up: "
                  f"{c['compile_and_warmup_s']:.0f} s. Target: >= 1.5x faster than eager."]
    pts = data.get("scan")
    if pts:
        keys = [k for k in pts[0] if k.endswith("_ms")]
        lines += ["", "## Time per step against T (hidden 64; `surrogate_overhead.png`)", "",
                  "| T | " + " | ".join(k[:-3] + " (ms)" for k in keys) + " |",
                  "|---:|" + "---:|" * len(keys)]
        lines += ["| " + str(p["T"]) + " | " + " | ".join(f"{p[k]:.2f}" for k in keys) + " |"
                  for p in pts]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1 keeps timings stable on a shared machine)")
    parser.add_argument("--compile", action="store_true",
                        help="add the torch.compile row (hidden 256; compiles for a minute or two)")
    parser.add_argument("--scan", action="store_true", help="add the time-vs-T scan and its plot")
    parser.add_argument("--render", action="store_true", help="rewrite the .md and .png from the .json")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.render:
        data = json.loads((args.out / "surrogate_overhead.json").read_text())
    else:
        torch.set_num_threads(args.threads)
        torch.manual_seed(0)
        meta = {**machine(), "repeats": args.repeats}
        data = {"meta": meta, "rows": overhead(args.repeats)}
        if args.compile:
            data["compile"] = compiled(max(5, args.repeats // 4))
        if args.scan:
            data["scan"] = scan(max(5, args.repeats // 4))
        (args.out / "surrogate_overhead.json").write_text(json.dumps(data, indent=2) + "\n")
    render(data, args.out / "surrogate_overhead.md")
    if data.get("scan"):
        plot(data["scan"], args.out / "surrogate_overhead.png")


if __name__ == "__main__":
    main()
