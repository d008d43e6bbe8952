"""One decoder step of attention vs the number of chunks M: dense soft attention vs coarse-to-fine.

Methods (forward only, one decoder step, word states precomputed by the encoder):

* ``dense_eager``: soft attention over all M*N words in torch (bmm, masked softmax, bmm).
* ``dense_sdpa``: the same with ``F.scaled_dot_product_attention`` (one query per row).
* ``c2f_reference``: ``scg_summarize.kernels.c2f_attention`` on the PyTorch reference (coarse scores over
  M chunk vectors, k Gumbel-max draws, fine attention in the k drawn chunks).
* ``c2f_triton``: the same call on the Triton kernels (CUDA only).
* ``*_graph`` (CUDA only): each of the above captured once in a CUDA graph and replayed; the time of one
  replay, from an event before it to an event after it, launch latency included.
* ``*_graph_b2b`` (CUDA only; ``dense_eager`` and ``c2f_triton``): the per-step time of ``--b2b`` (20)
  replays issued back to back, as a decoder issues its steps, over four input sets in turn (each its own
  graph) so that no step reads what the step before left in L2: the steady-state throughput, without the
  fixed cost of one replay's launch and events.

Reported per (M, k): median ms per step (the methods take turns, step by step, so that they share the
machine's noise); achieved GB/s = the bytes the step must read (dense:
``B*M*N*(H*e + 1)``; C2F: ``B*M*(D*e + 1) + B*k*N*(H*e + 1)``, ``e`` bytes per element) / time, next to the
measured copy bandwidth of the device; peak extra memory of one step (CUDA: ``max_memory_allocated``;
CPU: the profiler's allocation trace); launches per step (CUDA: kernels in a profiled step; CPU: leaf ATen
ops, the kernels an eager GPU step would launch, Triton kernels not included).

    python benchmarks/c2f_attention.py --device cpu --small   # CI-free: B=8, H=128, fp32
    python benchmarks/c2f_attention.py --device cuda [--dtype fp32]   # B=64, H=512, bf16 by default

Writes ``benchmarks/results/c2f_attention_cpu[_small].{json,md,png}`` or ``c2f_attention_gpu_<dtype>.{...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from scg_summarize.kernels import c2f_attention, forced
from torch.profiler import ProfilerActivity, profile

RESULTS = Path(__file__).resolve().parent / "results"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
Step = Callable[[], Any]
#: ATen ops that launch no kernel (views, metadata, allocation without fill).
NO_KERNEL = {
    "aten::empty",
    "aten::empty_strided",
    "aten::empty_like",
    "aten::lift_fresh",
    "aten::detach",
    "aten::resolve_conj",
    "aten::resolve_neg",
    "aten::result_type",
    "aten::is_nonzero",
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::to",
    "aten::contiguous",
    "aten::size",
    "aten::stride",
}


def make_inputs(
    b: int, m: int, n: int, h: int, dtype: torch.dtype, device: torch.device, salt: int = 0
) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device=device).manual_seed(m + 7919 * salt)  # on the device: M = 1000 is 1.3e9 states
    words = (torch.randn(b, m, n, h, generator=gen, device=device) / h**0.5).to(dtype)
    word_mask = torch.rand(b, m, n, generator=gen, device=device) < 0.9
    word_mask[:, :, 0] = True
    return {
        "words": words,
        "word_mask": word_mask,
        "keys": torch.randn(b, m, h, generator=gen, device=device).to(dtype),
        "chunk_mask": torch.ones(b, m, dtype=torch.bool, device=device),
        "q": torch.randn(b, h, generator=gen, device=device).to(dtype),
        "seed": torch.tensor([1234], device=device),
    }


def dense_eager(x: dict[str, torch.Tensor]) -> torch.Tensor:
    b, m, n, h = x["words"].shape
    flat = x["words"].view(b, m * n, h)
    scores = torch.bmm(flat, x["q"].unsqueeze(2)).squeeze(2).masked_fill(~x["word_mask"].view(b, m * n), -1e9)
    alpha = torch.softmax(scores.float(), dim=-1).to(flat.dtype)
    return torch.bmm(alpha.unsqueeze(1), flat).squeeze(1)


def dense_sdpa(x: dict[str, torch.Tensor]) -> torch.Tensor:
    b, m, n, h = x["words"].shape
    flat = x["words"].view(b, 1, m * n, h)
    mask = x["word_mask"].view(b, 1, 1, m * n)
    return F.scaled_dot_product_attention(x["q"].view(b, 1, 1, h), flat, flat, attn_mask=mask, scale=1.0)


def c2f_step(x: dict[str, torch.Tensor], k: int) -> Any:
    """The whole step's outputs (``FusedC2FStep``)."""
    return c2f_attention(x["q"], x["q"], x["keys"], x["chunk_mask"], x["words"], x["word_mask"], x["seed"], k=k)


def c2f(x: dict[str, torch.Tensor], k: int) -> torch.Tensor:
    return c2f_step(x, k).context


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _time_once(fn: Step, device: torch.device) -> float:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end))
    t0 = time.perf_counter()
    fn()
    return 1000 * (time.perf_counter() - t0)


def median_ms(fn: Step, device: torch.device, repeats: int) -> float:
    return interleaved_medians([fn], device, repeats)[0]


def interleaved_medians(fns: list[Step], device: torch.device, repeats: int) -> list[float]:
    """Median ms of each step, the steps taking turns (so that they share the machine's noise)."""
    for fn in fns:
        for _ in range(3):
            fn()
    sync(device)
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            times[i].append(_time_once(fn, device))
    return [statistics.median(t) for t in times]


def graphed(fn: Step) -> Step:
    """``fn`` captured in a CUDA graph (after a warm-up on a side stream, as the CUDA graph docs do)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def copy_bandwidth_gbs(device: torch.device, nbytes: int) -> float:
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).normal_()
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), device, 10)
    return 2 * nbytes / (ms * 1e-3) / 1e9


def peak_extra_bytes(fn: Step, device: torch.device) -> int:
    if device.type == "cuda":
        sync(device)
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        sync(device)
        return int(torch.cuda.max_memory_allocated() - base)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = [e["args"] for e in json.loads(path.read_text())["traceEvents"] if e.get("name") == "[memory]"]
    if not events:
        return 0
    base = events[0]["Total Allocated"] - events[0]["Bytes"]
    return int(max(e["Total Allocated"] for e in events) - base)


def launches(fn: Step, device: torch.device) -> int:
    fn()
    sync(device)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        fn()
        sync(device)
    events = prof.events()
    if device.type == "cuda":
        return sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
    return sum(
        1
        for e in events
        if e.name.startswith("aten::") and not e.cpu_children and e.name not in NO_KERNEL and not _is_view_op(e.name)
    )


def _is_view_op(name: str) -> bool:
    op = getattr(torch.ops.aten, name.removeprefix("aten::"), None)
    overload = getattr(op, "default", None)
    return bool(getattr(overload, "is_view", False))


def bytes_read(method: str, b: int, m: int, n: int, h: int, k: int, elt: int) -> int:
    if method.startswith("dense"):
        return b * m * n * (h * elt + 1)
    return b * m * (h * elt + 1) + b * k * n * (h * elt + 1)


#: Input sets the back-to-back replays rotate over.
ROTATE = 4


def back_to_back(steps: list[Step], n: int) -> Step:
    """``n`` calls issued back to back, ``steps`` taking turns."""

    def run() -> None:
        for i in range(n):
            steps[i % len(steps)]()

    return run


def methods_for(
    x: dict[str, torch.Tensor],
    device: torch.device,
    ks: list[int],
    graphs: bool,
    rotate: list[dict[str, torch.Tensor]] | None = None,
    b2b: int = 0,
) -> list[tuple[str, int, Step]]:
    """``(method, k, step)`` for every method that runs on ``device`` (k = 0 for dense); with ``b2b``, the
    ``*_graph_b2b`` steps (``b2b`` replays over ``[x, *rotate]``; their time is divided by ``b2b``)."""
    backends = ["reference", "triton"] if device.type == "cuda" else ["reference"]
    names = [("dense_eager", 0), ("dense_sdpa", 0)] + [(f"c2f_{name}", k) for name in backends for k in ks]
    out: list[tuple[str, int, Step]] = [(method, k, step_for(method, k, x)) for method, k in names]
    if graphs and device.type == "cuda":
        out += [(f"{method}_graph", k, graphed(fn)) for method, k, fn in list(out)]
        if b2b:
            sets = [x, *(rotate or [])]
            for method, k in names:
                if method in ("dense_eager", "c2f_triton"):
                    replays = [graphed(step_for(method, k, each)) for each in sets]
                    out.append((f"{method}_graph_b2b", k, back_to_back(replays, b2b)))
    return out


def step_for(method: str, k: int, x: dict[str, torch.Tensor]) -> Step:
    """``method``'s step (``dense_eager``, ``dense_sdpa`` or ``c2f_<backend>``) on the inputs ``x``."""
    if method == "dense_eager":
        return lambda: dense_eager(x)
    if method == "dense_sdpa":
        return lambda: dense_sdpa(x)
    return lambda: _with_backend(method.removeprefix("c2f_"), x, k)


def run(args: argparse.Namespace) -> dict[str, Any]:
    device = torch.device(args.device)
    dtype = DTYPES[args.dtype]
    b, h = (8, 128) if args.small else (64, 512)
    n, elt = 40, torch.finfo(dtype).bits // 8
    copy_gbs = copy_bandwidth_gbs(device, 64 * 2**20 if device.type == "cpu" else 2**30)
    rows: list[dict[str, Any]] = []
    with torch.no_grad():  # warm up every code path once (dispatcher caches, Triton compilation)
        for _, _, fn in methods_for(make_inputs(b, min(args.chunks), n, h, dtype, device), device, args.ks, False):
            median_ms(fn, device, 3)
    for m in args.chunks:
        x = make_inputs(b, m, n, h, dtype, device)
        b2b = 0 if args.no_graphs or device.type != "cuda" else args.b2b
        rotate = [make_inputs(b, m, n, h, dtype, device, salt) for salt in range(1, ROTATE)] if b2b else []
        with torch.no_grad():
            methods = methods_for(x, device, args.ks, not args.no_graphs, rotate, b2b)
            medians = interleaved_medians([fn for _, _, fn in methods], device, args.repeats)
            for (method, k, fn), ms in zip(methods, medians):
                need = bytes_read(method, b, m, n, h, k, elt)
                graph = "_graph" in method
                ms = ms / b2b if method.endswith("_b2b") else ms
                rows.append(
                    {
                        "M": m,
                        "method": method,
                        "k": k,
                        "ms": ms,
                        "bytes_read": need,
                        "gb_per_s": need / (ms * 1e-3) / 1e9,
                        "peak_extra_bytes": None if graph else peak_extra_bytes(fn, device),
                        "launches": None if graph else launches(fn, device),
                    }
                )
                print(f"M={m:5d} {method:22s} k={k} {ms:9.3f} ms {rows[-1]['gb_per_s']:8.2f} GB/s", flush=True)
        del x, rotate
    return {
        "device": _device_name(device),
        "torch": torch.__version__,
        "dtype": str(dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "B": b,
        "N": n,
        "H": h,
        "repeats": args.repeats,
        "copy_gb_per_s": copy_gbs,
        "rows": rows,
    }


def _with_backend(name: str, x: dict[str, torch.Tensor], k: int) -> torch.Tensor:
    with forced(name):
        return c2f(x, k)


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()} CPU ({os.cpu_count()} cores)"


def series(result: dict[str, Any]) -> dict[tuple[str, int], dict[int, float]]:
    out: dict[tuple[str, int], dict[int, float]] = {}
    for r in result["rows"]:
        out.setdefault((r["method"], r["k"]), {})[r["M"]] = r["ms"]
    return out


def to_markdown(result: dict[str, Any], command: str) -> str:
    ms = [r["M"] for r in result["rows"]]
    lo, hi = min(ms), max(ms)
    lines = [
        "# C2F attention: one decoder step vs the number of chunks M",
        "",
        f"{result['device']}, torch {result['torch']}, {result['dtype']}, {result['threads']} threads; "
        f"B = {result['B']}, N = {result['N']}, H = D = {result['H']}; median of {result['repeats']} steps. "
        f"Measured copy bandwidth: {result['copy_gb_per_s']:.1f} GB/s. Reproduce: `{command}`.",
        "",
        "| M | method | k | ms / step | GB/s (needed bytes) | % of copy | peak extra MiB | launches |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        peak = "" if r["peak_extra_bytes"] is None else f"{r['peak_extra_bytes'] / 2**20:.2f}"
        lines.append(
            f"| {r['M']} | {r['method']} | {r['k'] or ''} | {r['ms']:.3f} | {r['gb_per_s']:.2f} | "
            f"{100 * r['gb_per_s'] / result['copy_gb_per_s']:.0f}% | {peak} | {r['launches'] or ''} |"
        )
    lines += ["", "Dense over C2F at each M (time ratio, and the ratio of the bytes each must read):", ""]
    for r in result["rows"]:
        if r["method"].startswith("c2f_"):
            graph = r["method"][r["method"].find("_graph") :] if "_graph" in r["method"] else ""
            dense = next((d for d in result["rows"] if d["M"] == r["M"] and d["method"] == f"dense_eager{graph}"), None)
            if dense is not None:
                lines.append(
                    f"- M = {r['M']}, {r['method']} k={r['k']}: {dense['ms'] / r['ms']:.1f}x faster "
                    f"(bytes {dense['bytes_read'] / r['bytes_read']:.1f}x fewer)"
                )
    lines += ["", f"Scaling, time at M = {hi} over time at M = {lo} ({hi // lo}x the chunks):", ""]
    for (method, k), by_m in series(result).items():
        label = method + (f" k={k}" if k else "")
        lines.append(f"- {label}: {by_m[hi] / by_m[lo]:.1f}x")
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for (method, k), by_m in series(result).items():
        xs = sorted(by_m)
        ax.plot(
            xs,
            [by_m[x] for x in xs],
            marker="o",
            ls="--" if method.startswith("dense") else "-",
            label=method + (f" k={k}" if k else ""),
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="chunks M (N = 40 words each)",
        ylabel="ms per decoder step",
        title=f"Attention per step, B={result['B']}, H={result['H']}, {result['device']}",
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="B=8, H=128 (the CPU mode)")
    parser.add_argument("--chunks", type=int, nargs="+", default=[10, 30, 100, 300, 1000])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument(
        "--dtype",
        choices=sorted(DTYPES),
        default=None,
        help="element type of the states (default: fp32 on CPU, bf16 on CUDA)",
    )
    parser.add_argument("--no-graphs", action="store_true", help="skip the CUDA-graph timings")
    parser.add_argument(
        "--b2b", type=int, default=20, help="replays per *_graph_b2b step (CUDA; 0: no back-to-back rows)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA GPU is visible here")
    args.dtype = args.dtype or ("fp32" if device.type == "cpu" else "bf16")
    result = run(args)
    if device.type == "cuda":  # c2f_attention_gpu_bf16: one file per element type
        stem = f"c2f_attention_gpu_{args.dtype}"
    else:
        stem = "c2f_attention_cpu" + ("_small" if args.small else "")
    command = " ".join(["python benchmarks/c2f_attention.py", *sys.argv[1:]])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / f"{stem}.md").write_text(to_markdown(result, command))
    plot(result, args.out / f"{stem}.png")
    print(f"wrote {args.out / stem}.{{json,md,png}}")


if __name__ == "__main__":
    main()
