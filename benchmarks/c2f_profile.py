"""Where the time of one coarse-to-fine attention step goes on a GPU: a kernel-by-kernel profile.

``benchmarks/c2f_attention.py`` times whole steps; this script explains them. For one step of
``scg_summarize.kernels.c2f_attention`` (Triton backend; B = 64, N = 40, H = D = 512, bf16 by default) at
each M it records, with ``torch.profiler``, every CUDA kernel the step launches and its device time, and
gives each Triton kernel's achieved bandwidth from the bytes it must read:

* ``_coarse_blocks``: the chunk vectors, ``B * M * D`` elements (+ the mask); ``_coarse_combine`` reads
  only the blocks' partial results (no bytes counted);
* ``_fine_read``: ``k * N`` word states of ``H`` elements per row (the programs of a row's other hidden
  slices read them again, mostly from L2; not counted). It also makes the coarse choice from
  ``_coarse_blocks``' partials: the step is these two launches.

Then, when Nsight Compute (``ncu``) is on the PATH (and ``--no-ncu`` is not given), it profiles the
fine and coarse kernels at the largest M and reports the hardware's own DRAM throughput (% of peak) and
achieved occupancy, which separates "too few bytes in flight" (latency-bound) from "bandwidth-bound".

    python benchmarks/c2f_profile.py [--chunks 100 1000] [--dtype bf16] [--out DIR]

Writes ``benchmarks/results/c2f_profile_gpu.{json,md}`` (and the raw ncu CSV into ``--out``).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
from c2f_attention import DTYPES, c2f, copy_bandwidth_gbs, make_inputs  # the step c2f_attention.py times
from torch.profiler import ProfilerActivity, profile

RESULTS = Path(__file__).resolve().parent / "results"
B, N, H = 64, 40, 512


def inputs(m: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    return make_inputs(B, m, N, H, dtype, torch.device("cuda"))


def step(x: dict[str, torch.Tensor], k: int) -> torch.Tensor:
    return c2f(x, k)


def kernel_bytes(name: str, m: int, k: int, elt: int) -> int | None:
    if "_coarse_blocks" in name:
        return B * m * (H * elt + 1)
    if "_fine_read" in name:
        return B * k * N * (H * elt + 1)
    return None


def profile_step(m: int, k: int, dtype: torch.dtype, repeats: int = 20) -> dict[str, Any]:
    x = inputs(m, dtype)
    elt = torch.finfo(dtype).bits // 8
    with torch.no_grad():
        for _ in range(5):
            step(x, k)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(repeats):
                step(x, k)
            torch.cuda.synchronize()
    kernels: dict[str, dict[str, float]] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            row = kernels.setdefault(e.name, {"count": 0, "us": 0.0})
            row["count"] += 1
            row["us"] += e.time_range.elapsed_us()
    rows = []
    for name, row in sorted(kernels.items(), key=lambda kv: -kv[1]["us"]):
        us = row["us"] / repeats
        need = kernel_bytes(name, m, k, elt)
        rows.append(
            {
                "kernel": name[:90],
                "per_step": row["count"] / repeats,
                "us": us,
                "bytes": need,
                "gb_per_s": None if need is None or us == 0 else need / (us * 1e-6) / 1e9,
            }
        )
    return {
        "M": m,
        "k": k,
        "dtype": str(dtype).removeprefix("torch."),
        "kernels": rows,
        "total_us": sum(r["us"] for r in rows),
    }


def ncu_metrics(m: int, k: int, dtype_name: str, out: Path) -> list[dict[str, str]] | str:
    """Nsight Compute's speed-of-light numbers of the Triton kernels of one step, or why there are none."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return "ncu not on the PATH"
    metrics = (
        "dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,"
        "sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum"
    )
    cmd = [
        ncu,
        "--csv",
        "--kernel-name",
        "regex:_(fine|coarse)",
        "--launch-skip",
        "8",
        "--launch-count",
        "4",
        "--metrics",
        metrics,
        sys.executable,
        __file__,
        "--target",
        str(m),
        "--k",
        str(k),
        "--dtype",
        dtype_name,
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)
    except subprocess.TimeoutExpired:
        return "ncu timed out after 90 s"
    (out / "ncu.csv").write_text(proc.stdout + "\n--- stderr\n" + proc.stderr)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('"')]
    if not lines:
        return f"ncu gave no rows (rc {proc.returncode}): {proc.stderr.strip()[-300:]}"
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    return [
        {key: r.get(key, "") for key in ("Kernel Name", "Metric Name", "Metric Unit", "Metric Value")} for r in rows
    ]


def to_markdown(result: dict[str, Any], command: str) -> str:
    lines = [
        "# C2F step on the GPU, kernel by kernel",
        "",
        f"{result['device']}, torch {result['torch']}; B = {B}, N = {N}, H = D = {H}; "
        f"measured copy bandwidth {result['copy_gb_per_s']:.0f} GB/s (read + write). "
        f"Reproduce: `{command}`.",
        "",
    ]
    for run in result["runs"]:
        lines += [
            f"## M = {run['M']}, k = {run['k']}, {run['dtype']}: {run['total_us']:.1f} us of kernels per step",
            "",
            "| kernel | launches / step | us / step | needed bytes | GB/s | % of copy |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for r in run["kernels"]:
            gbs = "" if r["gb_per_s"] is None else f"{r['gb_per_s']:.0f}"
            pct = "" if r["gb_per_s"] is None else f"{100 * r['gb_per_s'] / result['copy_gb_per_s']:.0f}%"
            need = "" if r["bytes"] is None else f"{r['bytes'] / 1e6:.2f} MB"
            lines.append(f"| `{r['kernel']}` | {r['per_step']:.0f} | {r['us']:.1f} | {need} | {gbs} | {pct} |")
        lines.append("")
    ncu = result["ncu"]
    lines += ["## Nsight Compute", ""]
    if isinstance(ncu, str):
        lines.append(ncu)
    else:
        lines += ["| kernel | metric | unit | value |", "|---|---|---|---:|"]
        lines += [
            f"| `{r['Kernel Name'][:60]}` | {r['Metric Name']} | {r['Metric Unit']} | {r['Metric Value']} |"
            for r in ncu
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--out", type=Path, default=Path("runs/c2f_profile"), help="folder for the raw ncu CSV")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--target", type=int, default=0, help=argparse.SUPPRESS)  # ncu's child: run steps at M
    parser.add_argument("--k", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--no-ncu", action="store_true", help="skip Nsight Compute (about a minute)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU (this profiles the Triton kernels on the device)")
    dtype = DTYPES[args.dtype]
    if args.target:  # the program ncu profiles: a few steps at one size
        x = inputs(args.target, dtype)
        with torch.no_grad():
            for _ in range(6):
                step(x, args.k)
        torch.cuda.synchronize()
        return
    args.out.mkdir(parents=True, exist_ok=True)
    runs = []
    for m in args.chunks:
        for k in args.ks:
            runs.append(profile_step(m, k, dtype))
            print(json.dumps({key: runs[-1][key] for key in ("M", "k", "total_us")}), flush=True)
    copy_gbs = copy_bandwidth_gbs(torch.device("cuda"), 2**30)
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "copy_gb_per_s": copy_gbs,
        "runs": runs,
        "ncu": "not run (--no-ncu)" if args.no_ncu else ncu_metrics(max(args.chunks), 1, args.dtype, args.out),
    }
    command = " ".join(["python benchmarks/c2f_profile.py", *sys.argv[1:]])
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "c2f_profile_gpu.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.results / "c2f_profile_gpu.md").write_text(to_markdown(result, command))
    print(to_markdown(result, command))


if __name__ == "__main__":
    main()
