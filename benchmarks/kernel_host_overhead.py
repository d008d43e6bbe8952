"""Host (Python) cost of one coarse-to-fine step on the Triton backend, with the kernel launches stubbed.

An eager C2F step on a GPU is bound by the host: the custom op's dispatch, the Python around the
launches, the allocations and Triton's launcher (``docs/kernels.md``: 0.35 ms at M = 10 on an H100
host). Everything but Triton's launcher runs the same on a CPU: this script runs the Triton backend's
Python on CPU tensors (``SCG_KERNELS=triton``, ``TRITON_INTERPRET=1``) with each kernel replaced by a
launch that does nothing, and times, alternating, in one process and one thread:

* ``step``: ``c2f_attention`` (``scg_summarize::c2f_attend``: two launches stubbed);
* ``model pair``: ``c2f_coarse_sample`` then ``fused_c2f_read``, the model's two ops (three launches);
* ``torch op``: one ``torch.add`` of a small tensor, the unit the ratios are given in;
* ``launch sizes``: the twelve power-of-two and ceiling divisions the launchers of one step compute, with
  ``triton.next_power_of_2`` / ``triton.cdiv`` (what they called until 2026-11-27; constexpr functions in
  Triton >= 3.5) and with the plain-integer ``pow2`` / ``cdiv`` they call now.

    OMP_NUM_THREADS=1 python benchmarks/kernel_host_overhead.py [--repeats 15] [--calls 200]

Writes ``benchmarks/results/kernel_host_overhead.{json,md}``. Triton's own launcher is not measured (it
needs a driver), nor is anything on the device.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")  # before the kernel modules are imported (read at decoration)

import torch

RESULTS = Path(__file__).resolve().parent / "results"
STUBBED = {"coarse": ("_coarse_blocks", "_coarse_combine"), "fine": ("_fine_read",)}


class _NoLaunch:
    """Stands for a ``@triton.jit`` kernel: ``kernel[grid](...)`` does nothing."""

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args, **kwargs: None


@contextmanager
def stubbed_launches() -> Iterator[None]:
    from scg_summarize.kernels.backend import triton_module

    saved = []
    for module, names in STUBBED.items():
        mod = triton_module(module)  # type: ignore[arg-type]
        for name in names:
            saved.append((mod, name, getattr(mod, name)))
            setattr(mod, name, _NoLaunch())
    try:
        yield
    finally:
        for mod, name, kernel in saved:
            setattr(mod, name, kernel)


def launch_sizes(pow2: Callable[[int], int], cdiv: Callable[[int, int], int]) -> Callable[[], int]:
    """The sizes one step's launchers compute (M = 10, N = 40, H = 512, k = 1): ten powers of two, two
    ceiling divisions."""

    def sizes() -> int:
        n_blocks = cdiv(10, 16)
        total = n_blocks + cdiv(512, 128)
        for n in (1, 512, 1, n_blocks, n_blocks, 10, 1, 40, 512, 512):
            total += pow2(n)
        return total

    return sizes


def median_us(fns: dict[str, Callable[[], Any]], repeats: int, calls: int) -> dict[str, float]:
    """Median µs per call of each function, the functions taking turns ``repeats`` times."""
    for fn in fns.values():
        for _ in range(calls):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - t0) / calls * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


def run(repeats: int, calls: int) -> dict[str, Any]:
    import triton
    from scg_summarize.kernels import c2f_attention, c2f_coarse_sample, forced, fused_c2f_read
    from scg_summarize.kernels.triton_common import cdiv, pow2

    b, m, n, h = 64, 10, 40, 64
    words, keys = torch.zeros(b, m, n, h), torch.zeros(b, m, h)
    word_mask, chunk_mask = torch.ones(b, m, n, dtype=torch.bool), torch.ones(b, m, dtype=torch.bool)
    q, seed, weights = torch.zeros(b, h), torch.tensor([1]), torch.ones(b, 1)

    def step() -> Any:
        return c2f_attention(q, q, keys, chunk_mask, words, word_mask, seed, k=1)

    def model_pair() -> Any:
        _, idx = c2f_coarse_sample(keys, q, chunk_mask, seed, 1, "multinomial", None)
        return fused_c2f_read(words, word_mask, idx, weights, q)

    small = torch.zeros(b, h)
    fns: dict[str, Callable[[], Any]] = {
        "step": step,
        "model pair": model_pair,
        "torch op": lambda: torch.add(small, 1.0),
        "launch sizes, triton functions": launch_sizes(triton.next_power_of_2, triton.cdiv),
        "launch sizes, plain integers": launch_sizes(pow2, cdiv),
    }
    with forced("triton"), stubbed_launches(), torch.no_grad():
        us = median_us(fns, repeats, calls)
        profiler = cProfile.Profile()
        profiler.runcall(lambda: [step() for _ in range(calls)])
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(10)
    return {
        "machine": f"{platform.processor() or platform.machine()} CPU ({os.cpu_count()} cores)",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "threads": torch.get_num_threads(),
        "repeats": repeats,
        "calls": calls,
        "shape": {"B": b, "M": m, "N": n, "H": h, "k": 1},
        "us": us,
        "per_torch_op": {name: value / us["torch op"] for name, value in us.items()},
        "profile_step": out.getvalue(),
    }


def to_markdown(result: dict[str, Any], command: str) -> str:
    lines = [
        "# Host cost of one C2F step on the Triton backend (launches stubbed)",
        "",
        f"{result['machine']}, Python {result['python']}, torch {result['torch']}, Triton {result['triton']}, "
        f"{result['threads']} thread(s); B = {result['shape']['B']}, M = {result['shape']['M']}, k = 1; median "
        f"of {result['repeats']} alternating repeats of {result['calls']} calls. Command: `{command}`.",
        "",
        "| what | µs per call | in plain torch ops |",
        "|---|---:|---:|",
    ]
    for name, us in result["us"].items():
        lines.append(f"| {name} | {us:.1f} | {result['per_torch_op'][name]:.1f} |")
    lines += ["", "cProfile of the step (internal time, top 10):", "", "```", result["profile_step"].strip(), "```"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    try:
        import triton  # noqa: F401
    except ImportError:
        sys.exit("kernel_host_overhead: needs triton (pip install 'scg[kernels]')")
    torch.set_num_threads(1)
    result = run(args.repeats, args.calls)
    command = " ".join(["OMP_NUM_THREADS=1 python benchmarks/kernel_host_overhead.py", *sys.argv[1:]])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kernel_host_overhead.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "kernel_host_overhead.md").write_text(to_markdown(result, command))
    print(to_markdown(result, command))


if __name__ == "__main__":
    main()
