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

``--compile``: the hard-attention step with its model functions (the attention scores and the
recurrence) compiled by ``torch.compile`` (inductor), scg declared, against the same step eager:
at the first ``--hidden`` size on the CPU (256 by default), at every size on CUDA. A compilation
that fails is recorded (its error in the JSON row) and the run goes on. ``--scan``: time per step
against the number of steps T (hidden 64), for the plot ``surrogate_overhead.png``. Results:
``benchmarks/results/surrogate_overhead.{json,md,png}``.

``--device cuda``: the same workloads with every tensor and parameter on the GPU (drawn on the
CPU from the same seeded generator, then moved), the clock read after ``torch.cuda.synchronize()``
at start and stop for every implementation alike, hidden 512 and 1024 by default, and a time
budget (``--budget-s``, 90 s) past which the remaining compile rows are skipped (recorded as
such), and one more scg step per row: Declared with ``surrogate_loss(check_finite=False)``, which
makes none of the surrogate's two host reads (each waits for the device). The results go to
``surrogate_overhead_gpu.{json,md}`` with the device name, torch version and command line; the CPU
results are never overwritten.

    python benchmarks/surrogate_overhead.py [--repeats 40] [--compile] [--scan]
    python benchmarks/surrogate_overhead.py --device cuda --hidden 512 1024 --compile
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.distributions import Bernoulli, Categorical

import scg

RESULTS = Path(__file__).resolve().parent / "results"


CPU = torch.device("cpu")


def make_attention(
    hidden: int,
    batch: int = 32,
    chunks: int = 10,
    steps: int = 30,
    compiled: bool = False,
    device: torch.device = CPU,
    whole: bool = False,
    unchecked: bool = False,
) -> tuple[Callable[[], None], dict[str, Callable[[], None]], list[torch.Tensor]]:
    """The hand-written step, scg's steps per mode, and the parameters (all on ``device``).

    The values are drawn on the CPU from one seeded generator and then moved, so every device
    and every call with the same sizes starts from the same numbers. ``compiled``: the model's
    functions compiled; ``whole``: the whole forward pass and surrogate of a step compiled
    (``fullgraph=True``; for scg a ``Declared`` graph opened inside the compiled function), the
    backward pass run by autograd on the compiled graph. ``unchecked``: one more step,
    ``declared_unchecked``, Declared with ``surrogate_loss(check_finite=False)`` (no host read).
    """
    gen = torch.Generator().manual_seed(0)

    def draw(*shape: int, div: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen, device=CPU) / div).to(device)

    enc = draw(batch, chunks, hidden)  # (B, M, H)
    w = torch.nn.Parameter(draw(hidden, hidden, div=hidden**0.5))  # (H, H)
    u = torch.nn.Parameter(draw(hidden, hidden, div=hidden**0.5))
    q = torch.nn.Parameter(draw(hidden, hidden, div=hidden**0.5))
    target = draw(steps, batch, hidden)  # (T, B, H)
    params = [w, u, q]
    rows = torch.arange(batch, device=device)

    def attend(h: torch.Tensor) -> torch.Tensor:
        return torch.bmm(enc, (h @ q)[:, :, None]).squeeze(-1)  # (B, M)

    def recur(h: torch.Tensor, z: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(enc[rows, z] @ w + h @ u)  # (B, H)
        return h, ((h - tgt) ** 2).sum(-1)  # (B,)

    if compiled:
        attend = torch.compile(attend, dynamic=False, fullgraph=True)  # type: ignore[assignment]
        recur = torch.compile(recur, dynamic=False, fullgraph=True)  # type: ignore[assignment]

    def hand_loss() -> torch.Tensor:
        h = torch.zeros(batch, hidden, device=device)
        logps, costs = [], []
        for t in range(steps):
            d = Categorical(logits=attend(h), validate_args=False)
            z = d.sample()
            logps.append(d.log_prob(z))
            h, c = recur(h, z, target[t])
            costs.append(c)
        c = torch.stack(costs)
        rtg = c.detach().flip(0).cumsum(0).flip(0)
        return (torch.stack(logps) * rtg).sum() + c.sum()

    def scg_loss(structure: scg.Declared | scg.Cached | None, check_finite: bool = True) -> Callable[[], torch.Tensor]:
        def loss() -> torch.Tensor:
            h = torch.zeros(batch, hidden, device=device)
            with scg.Graph(structure=structure) as g:
                for t in range(steps):
                    z = scg.sample(Categorical(logits=attend(h), validate_args=False), name="z", step=t)
                    h, c = recur(h, z, target[t])
                    scg.cost(c, name="c", step=t)
            return g.surrogate_loss(check_finite=check_finite)

        return loss

    def backward(loss_fn: Callable[[], torch.Tensor]) -> Callable[[], None]:
        def step() -> None:
            loss_fn().backward()

        return step

    if whole:
        hand_c = torch.compile(hand_loss, dynamic=False, fullgraph=True)
        decl_c = torch.compile(scg_loss(scg.Declared()), dynamic=False, fullgraph=True)
        return backward(hand_c), {"declared": backward(decl_c)}, params
    hand = backward(hand_loss)
    modes = {
        "tracked": backward(scg_loss(None)),
        "cached": backward(scg_loss(scg.Cached(check_every=100))),
        "declared": backward(scg_loss(scg.Declared())),
    }
    if unchecked:
        modes[UNCHECKED] = backward(scg_loss(scg.Declared(), check_finite=False))
    if compiled:
        del modes["tracked"], modes["cached"]  # a compiled function inside a tracked graph:
        # dynamo would trace through the tracking mode (docs/tracking.md)
    return hand, modes, params


def make_toy(
    device: torch.device = CPU, unchecked: bool = False
) -> tuple[Callable[[], None], dict[str, Callable[[], None]], list[torch.Tensor]]:
    """The toy's hand-written step, scg's steps per mode (``unchecked``: and ``declared_unchecked``,
    as in `make_attention`), and the parameters."""
    theta = torch.nn.Parameter(torch.zeros(5, device=device))
    phi = torch.nn.Parameter(torch.zeros(3, device=device))

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

    def with_scg(structure: scg.Declared | scg.Cached | None, check_finite: bool = True) -> Callable[[], None]:
        def step() -> None:
            with scg.Graph(structure=structure) as g:
                z = scg.sample(Categorical(logits=theta, validate_args=False), name="z")
                scg.cost((z.float() - 2.0) ** 2, name="c0")
                b = z.float() / 4.0
                for t in range(3):
                    b = scg.sample(Bernoulli(logits=phi[t] + b, validate_args=False), name="b", step=t)
                    scg.cost(b * (t + 1.0), name="c", step=t)
            g.surrogate_loss(check_finite=check_finite).backward()

        return step

    modes = {
        "tracked": with_scg(None),
        "cached": with_scg(scg.Cached(check_every=100)),
        "declared": with_scg(scg.Declared()),
    }
    if unchecked:
        modes[UNCHECKED] = with_scg(scg.Declared(), check_finite=False)
    return hand, modes, [theta, phi]


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on the CPU), so the clock reads finished steps."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    fns: dict[str, Callable[[], None]],
    params: list[torch.Tensor],
    repeats: int,
    inner: int,
    device: torch.device = CPU,
    *,
    clock: Callable[[], float] = time.perf_counter,
    warm: int | None = None,
) -> dict[str, float]:
    """Median seconds per call of each function (read on ``clock``), the functions alternating.

    Warm-up calls first (``warm``; by default 5 on CUDA for lazy initialisation, cuBLAS handles and
    the caching allocator, else 3); every timed block starts and stops after a device
    synchronisation, for every function alike.
    """
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(warm if warm is not None else 5 if device.type == "cuda" else 3):
        for f in fns.values():
            f()
            for p in params:
                p.grad = None
    for _ in range(repeats):
        for name, f in fns.items():
            sync(device)
            t0 = clock()
            for _ in range(inner):
                f()
                for p in params:
                    p.grad = None
            sync(device)
            times[name].append((clock() - t0) / inner)
    return {k: statistics.median(v) for k, v in times.items()}


MODES = ("tracked", "cached", "declared")
#: on a device (``--device cuda``): Declared without the surrogate's two finiteness checks, each a
#: host read that waits for the device (on the CPU a read costs about a microsecond)
UNCHECKED = "declared_unchecked"
TOY = "toy Categorical(5)+3 Bernoulli, 4 costs"
TARGETS = {"hard_attention T=30 B=32 H=256": 1.10, "hard_attention T=30 B=32 H=64": 1.10, TOY: 1.3}
T0 = time.perf_counter()


def log(msg: str) -> None:
    """A progress line with the seconds since the start (flushed: a cut-off log stays useful)."""
    print(f"[{time.perf_counter() - T0:6.1f} s] {msg}", flush=True)


def attention_label(hidden: int) -> str:
    return f"hard_attention T=30 B=32 H={hidden}"


def machine(device: torch.device) -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    out = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in load],
        "device": device.type,
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
    }
    if device.type == "cuda":
        out["device_name"] = torch.cuda.get_device_name(device)
        out["cuda"] = torch.version.cuda
    return out


def overhead(
    repeats: int,
    hiddens: list[int],
    device: torch.device = CPU,
    toy: bool = True,
    warm: int | None = None,
    unchecked: bool | None = None,
) -> list[dict[str, Any]]:
    """One row per workload: the hand-written step and each scg mode, medians and ratios (``warm``:
    warm-up calls of each, as ``measure``'s; ``unchecked``: the `UNCHECKED` step too, by default on
    a device only)."""
    unchecked = device.type == "cuda" if unchecked is None else unchecked
    work: list[
        tuple[str, Callable[[], tuple[Callable[[], None], dict[str, Callable[[], None]], list[torch.Tensor]]], int]
    ] = [
        (attention_label(h), lambda h=h: make_attention(h, device=device, unchecked=unchecked), 1 if h >= 256 else 2)
        for h in hiddens
    ]
    if toy:
        work.append((TOY, lambda: make_toy(device, unchecked), 5 if device.type == "cuda" else 20))
    rows = []
    for label, make, inner in work:
        hand, modes, params = make()
        med = measure({"hand": hand, **modes}, params, repeats, inner, device, warm=warm)
        row: dict[str, Any] = {"workload": label, "hand_ms": med["hand"] * 1e3, "target": TARGETS.get(label, 1.10)}
        for m in (*MODES, UNCHECKED) if unchecked else MODES:
            row[f"{m}_ms"] = med[m] * 1e3
            row[f"{m}_ratio"] = med[m] / med["hand"]
        rows.append(row)
        log(
            f"{label:42s} hand {med['hand'] * 1e3:8.3f} ms  " + "  ".join(f"{m} {row[m + '_ratio']:.3f}" for m in MODES)
        )
    return rows


def compiled(repeats: int, hidden: int = 256, device: torch.device = CPU) -> dict[str, Any]:
    """Eager vs ``torch.compile`` of the model functions (scg declared, hand-written).

    Any exception of the compilation or of the compiled steps is recorded under ``error`` (type
    and message) instead of ending the run.
    """
    out: dict[str, Any] = {"hidden": hidden, "backend": f"{device.type.upper()} inductor"}
    start = time.perf_counter()
    try:
        torch._dynamo.reset()  # a fresh cache per size: no recompilation limit across rows
        hand, modes, params = make_attention(hidden, device=device)
        hand_c, modes_c, params_c = make_attention(hidden, compiled=True, device=device)  # same values
        hand_w, modes_w, params_w = make_attention(hidden, whole=True, device=device)
        warm = warm_up([hand_c, modes_c["declared"]], device)
        log(f"compile (H={hidden}): model functions compiled and warmed up in {warm:.1f} s")
        warm_whole = warm_up([hand_w, modes_w["declared"]], device)
        log(f"compile (H={hidden}): whole steps compiled and warmed up in {warm_whole:.1f} s")
        med = measure(
            {
                "eager_declared": modes["declared"],
                "compiled_declared": modes_c["declared"],
                "whole_declared": modes_w["declared"],
                "eager_hand": hand,
                "compiled_hand": hand_c,
                "whole_hand": hand_w,
            },
            params + params_c + params_w,
            repeats,
            1,
            device,
        )
    except Exception as e:  # a failed compilation is a result to record, not a crash
        out["error"] = f"{type(e).__name__}: {e}"[:2000]
        out["wall_s"] = time.perf_counter() - start
        log(f"compile (H={hidden}) failed: {out['error'].splitlines()[0][:300]}")
        return out
    out.update({k + "_ms": v * 1e3 for k, v in med.items()})
    out["speedup_declared"] = med["eager_declared"] / med["compiled_declared"]
    out["speedup_hand"] = med["eager_hand"] / med["compiled_hand"]
    out["compiled_declared_vs_compiled_hand"] = med["compiled_declared"] / med["compiled_hand"]
    out["speedup_whole_declared"] = med["eager_declared"] / med["whole_declared"]
    out["speedup_whole_hand"] = med["eager_hand"] / med["whole_hand"]
    out["whole_declared_vs_whole_hand"] = med["whole_declared"] / med["whole_hand"]
    out["whole_declared_vs_eager_hand"] = med["whole_declared"] / med["eager_hand"]
    out["compile_and_warmup_s"] = warm
    out["whole_compile_and_warmup_s"] = warm_whole
    out["wall_s"] = time.perf_counter() - start
    log(
        f"compile (H={hidden}): declared eager {out['eager_declared_ms']:.2f} ms, compiled "
        f"{out['compiled_declared_ms']:.2f} ms, speed-up {out['speedup_declared']:.2f}x; hand "
        f"speed-up {out['speedup_hand']:.2f}x; whole step: declared {out['speedup_whole_declared']:.2f}x, "
        f"hand {out['speedup_whole_hand']:.2f}x"
    )
    return out


def warm_up(fns: list[Callable[[], None]], device: torch.device) -> float:
    """Two calls of each function (the first compiles); the seconds they took."""
    sync(device)
    t0 = time.perf_counter()
    for _ in range(2):
        for f in fns:
            f()
    sync(device)
    return time.perf_counter() - t0


def compile_rows(
    repeats: int,
    hiddens: list[int],
    device: torch.device,
    deadline: float,
    save: Callable[[list[dict[str, Any]]], None],
) -> list[dict[str, Any]]:
    """The compile row at each size, skipping a size whose expected cost passes ``deadline``.

    The expected cost of a size is the wall time the previous size took (the first size runs
    unless the deadline has already passed); ``save`` is called after every row.
    """
    out: list[dict[str, Any]] = []
    last = 0.0
    for h in hiddens:
        now = time.perf_counter()
        if now + last > deadline:
            out.append(
                {
                    "hidden": h,
                    "backend": f"{device.type.upper()} inductor",
                    "skipped": f"time budget: {now - T0:.0f} s elapsed, the previous compile row "
                    f"took {last:.0f} s (--budget-s)",
                }
            )
            log(f"compile (H={h}) skipped: {out[-1]['skipped']}")
        else:
            out.append(compiled(repeats, h, device))
            last = out[-1]["wall_s"]
        save(out)
    return out


def scan(
    repeats: int, steps: tuple[int, ...] = (5, 10, 20, 40, 60), device: torch.device = CPU, compiled: bool = False
) -> list[dict[str, Any]]:
    """Time per gradient step against T (hidden 64): how each mode's cost grows. ``compiled``:
    also the whole step compiled (``fullgraph=True``), scg Declared and hand-written, one
    compilation per T (in the warm-up calls, not timed)."""
    out = []
    for t in steps:
        hand, modes, params = make_attention(64, steps=t, device=device)
        fns = {"hand": hand, **modes}
        if compiled:
            torch._dynamo.reset()  # a fresh cache per T: no recompilation limit across lengths
            hand_w, modes_w, params_w = make_attention(64, steps=t, device=device, whole=True)
            fns.update({"compiled_hand": hand_w, "compiled_declared": modes_w["declared"]})
            params = params + params_w
        med = measure(fns, params, repeats, 1, device)
        out.append({"T": t, **{k + "_ms": v * 1e3 for k, v in med.items()}})
        log(f"T={t:3d} " + "  ".join(f"{k} {v * 1e3:7.2f} ms" for k, v in med.items()))
    return out


def plot(points: list[dict[str, Any]], path: Path, where: str = "1 thread") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ts = [p["T"] for p in points]
    for key, label in [
        ("hand", "hand-written"),
        ("tracked", "scg tracked"),
        ("cached", "scg Cached"),
        ("declared", "scg Declared"),
        ("compiled_hand", "hand-written, compiled step"),
        ("compiled_declared", "scg Declared, compiled step"),
    ]:
        if key + "_ms" in points[0]:
            ax.plot(
                ts,
                [p[key + "_ms"] for p in points],
                marker="o",
                label=label,
                linestyle="--" if key.startswith("compiled") else "-",
            )
    ax.set_xlabel("steps T (nodes: T stochastic + T costs)")
    ax.set_ylabel("ms per gradient step (median)")
    ax.set_title(f"hard attention, B=32, M=10, H=64, {where}")
    ax.legend()
    # margins in inches (tight_layout measures every tick label first: about a third of the figure's CPU)
    fig.subplots_adjust(left=0.75 / 6, right=1 - 0.15 / 6, bottom=0.55 / 4, top=1 - 0.35 / 4)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _load_words(meta: dict[str, Any]) -> str:
    """How loaded the machine was when the run started (its 1-minute load average per core)."""
    load = meta["load_average_1_5_15"][0] / max(1, int(meta["cpus"]))
    if load < 0.5:
        return "a quiet machine"
    return "a machine shared with other work: absolute times are inflated and noisy"


def _header(meta: dict[str, Any]) -> str:
    if meta.get("device", "cpu") == "cpu":
        return (
            f"torch {meta['torch']}, {meta['threads']} thread(s), {meta['repeats']} alternating "
            f"repeats; load average at the start {meta['load_average_1_5_15']} on "
            f"{meta['cpus']} cores ({_load_words(meta)}; the ratios are measured "
            "alternately in one run). "
            "Reproduce: `python benchmarks/surrogate_overhead.py --compile --scan`."
        )
    return (
        f"{meta['device_name']}, torch {meta['torch']} (CUDA {meta['cuda']}), "
        f"{meta['repeats']} alternating repeats; every timed block starts and stops after "
        "`torch.cuda.synchronize()`, for every implementation alike, after warm-up steps. "
        f"Host: {meta['cpus']} cores, load average at the start {meta['load_average_1_5_15']}, "
        f"{meta['threads']} torch thread(s). Command: `{meta['command']}`."
    )


def _compile_lines(c: dict[str, Any]) -> list[str]:
    h, backend = c.get("hidden", 256), c.get("backend", "CPU inductor")
    lines = ["", f"## torch.compile ({backend}), hard attention T=30 B=32 H={h}", ""]
    if "error" in c:
        return lines + ["Compilation failed (the run went on without this row):", "", "```", c["error"], "```"]
    if "skipped" in c:
        return lines + [f"Not run: {c['skipped']}."]
    if "whole_declared_ms" not in c:  # a file from before the whole-step rows
        return lines + [
            "The model's functions compiled, the scg calls eager in a `scg.Declared` graph.",
            "",
            "| | eager (ms) | compiled (ms) | speed-up |",
            "|---|---:|---:|---:|",
            f"| scg Declared | {c['eager_declared_ms']:.2f} | {c['compiled_declared_ms']:.2f} "
            f"| {c['speedup_declared']:.2f}x |",
            f"| hand-written | {c['eager_hand_ms']:.2f} | {c['compiled_hand_ms']:.2f} | {c['speedup_hand']:.2f}x |",
        ]
    return lines + [
        "*Model functions*: the attention scores and the recurrence compiled with "
        "`torch.compile(dynamic=False, fullgraph=True)`, the scg calls eager in a `scg.Declared` "
        "graph. *Whole step*: the forward pass and the surrogate of the whole step compiled with "
        "`fullgraph=True` (for scg: `with scg.Graph(structure=scg.Declared())`, the sampling and "
        "`g.surrogate_loss()` inside the compiled function, `scg/traced.py`); backward by autograd "
        "on the compiled graph. Speed-ups against the same implementation eager.",
        "",
        "| | eager (ms) | model functions compiled (ms) | speed-up | whole step compiled (ms) | speed-up |",
        "|---|---:|---:|---:|---:|---:|",
        f"| scg Declared | {c['eager_declared_ms']:.2f} | {c['compiled_declared_ms']:.2f} "
        f"| {c['speedup_declared']:.2f}x | {c['whole_declared_ms']:.2f} | "
        f"{c['speedup_whole_declared']:.2f}x |",
        f"| hand-written | {c['eager_hand_ms']:.2f} | {c['compiled_hand_ms']:.2f} | "
        f"{c['speedup_hand']:.2f}x | {c['whole_hand_ms']:.2f} | {c['speedup_whole_hand']:.2f}x |",
        "",
        f"Whole step compiled, scg Declared / hand-written: "
        f"{c['whole_declared_vs_whole_hand']:.3f} (and {c['whole_declared_vs_eager_hand']:.3f} of the "
        f"eager hand-written step); compilation and warm-up: {c['compile_and_warmup_s']:.0f} s "
        f"(model functions), {c['whole_compile_and_warmup_s']:.0f} s (whole steps). Target: >= 1.5x "
        "faster than eager.",
    ]


def render(data: dict[str, Any], path: Path) -> None:
    meta = data["meta"]
    unchecked = bool(data["rows"]) and all(f"{UNCHECKED}_ms" in r for r in data["rows"])
    lines = [
        "# Surrogate overhead: scg vs hand-written (median time per gradient step)",
        "",
        _header(meta),
        "",
        "| workload | hand-written (ms) | tracked (ms) | Cached (ms) | Declared (ms) | "
        "tracked / hand | Cached / hand | Declared / hand | "
        + ("Declared, `check_finite=False` / hand | " if unchecked else "")
        + "target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if unchecked else "") + "---:|",
    ]
    for r in data["rows"]:
        lines.append(
            f"| {r['workload']} | {r['hand_ms']:.3f} | {r['tracked_ms']:.3f} | "
            f"{r['cached_ms']:.3f} | {r['declared_ms']:.3f} | {r['tracked_ratio']:.3f} | "
            f"{r['cached_ratio']:.3f} | {r['declared_ratio']:.3f} | "
            + (f"{r[UNCHECKED + '_ratio']:.3f} | " if unchecked else "")
            + f"<= {r['target']} |"
        )
    if unchecked:
        lines += [
            "",
            "*Declared, `check_finite=False`*: the same Declared step without the surrogate's two "
            "finiteness checks, the step's only host reads (each waits for the device to finish "
            "the step so far).",
        ]
    comp = data.get("compile") or []
    for c in [comp] if isinstance(comp, dict) else comp:  # a dict: a file from before the list
        lines += _compile_lines(c)
    pts = data.get("scan")
    if pts:
        keys = [k for k in pts[0] if k.endswith("_ms")]
        lines += [
            "",
            f"## Time per step against T (hidden 64; `{path.stem}.png`)",
            "",
            "| T | " + " | ".join(k[:-3] + " (ms)" for k in keys) + " |",
            "|---:|" + "---:|" * len(keys),
        ]
        lines += ["| " + str(p["T"]) + " | " + " | ".join(f"{p[k]:.2f}" for k in keys) + " |" for p in pts]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where the workloads run; cuda writes surrogate_overhead_gpu.{json,md}",
    )
    parser.add_argument(
        "--hidden",
        type=int,
        nargs="+",
        default=None,
        metavar="N",
        help="hidden sizes of the hard-attention rows (default: 256 64 on cpu, 512 1024 on cuda)",
    )
    parser.add_argument(
        "--repeats", type=int, default=None, help="alternating timed repeats (default: 40 on cpu, 50 on cuda)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (1 keeps timings stable on a shared machine)"
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="add the torch.compile rows (cpu: first hidden size, a minute or two; "
        "cuda: every hidden size within --budget-s)",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="skip compile rows expected to end past this many seconds from the start "
        "(default: 90 on cuda, none on cpu; 0: none)",
    )
    parser.add_argument("--no-toy", action="store_true", help="leave out the toy workload")
    parser.add_argument("--scan", action="store_true", help="add the time-vs-T scan and its plot")
    parser.add_argument("--render", action="store_true", help="rewrite the .md and .png from the .json")
    args = parser.parse_args()
    device = torch.device(args.device)
    for name in ("hidden", "repeats"):
        v = getattr(args, name)
        if v is not None and min(v if isinstance(v, list) else [v]) < 1:
            parser.error(f"--{name} must be >= 1, got {v}")
    if device.type == "cuda" and not args.render and not torch.cuda.is_available():
        parser.error(
            "--device cuda: CUDA is not available here (torch "
            f"{torch.__version__}, built with CUDA {torch.version.cuda})"
        )
    gpu = device.type == "cuda"
    hiddens = args.hidden or ([512, 1024] if gpu else [256, 64])
    repeats = args.repeats or (50 if gpu else 40)
    budget = args.budget_s if args.budget_s is not None else (90.0 if gpu else 0.0)
    stem = "surrogate_overhead_gpu" if gpu else "surrogate_overhead"
    args.out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = args.out / f"{stem}.json", args.out / f"{stem}.md"

    def save(data: dict[str, Any]) -> None:
        json_path.write_text(json.dumps(data, indent=2) + "\n")
        render(data, md_path)

    if args.render:
        data = json.loads(json_path.read_text())
        render(data, md_path)
    else:
        torch.set_num_threads(args.threads)
        torch.manual_seed(0)
        meta = {**machine(device), "repeats": repeats, "hidden": hiddens, "budget_s": budget}
        log(f"{meta['command']} on {meta.get('device_name', 'cpu')}, {repeats} repeats")
        data = {"meta": meta, "rows": overhead(repeats, hiddens, device, toy=not args.no_toy)}
        save(data)
        if args.compile:
            deadline = T0 + budget if budget > 0 else float("inf")

            def save_compile(rows: list[dict[str, Any]]) -> None:
                data["compile"] = rows
                save(data)

            compile_rows(
                max(10, repeats // 2) if gpu else max(5, repeats // 4),
                hiddens if gpu else hiddens[:1],
                device,
                deadline,
                save_compile,
            )
        if args.scan:
            data["scan"] = scan(max(5, repeats // 4), device=device, compiled=args.compile and device.type == "cpu")
            save(data)
        log(f"wrote {json_path} and {md_path}")
    if data.get("scan"):
        plot(data["scan"], args.out / f"{stem}.png", "1 thread" if not gpu else data["meta"].get("device_name", "cuda"))


if __name__ == "__main__":
    main()
