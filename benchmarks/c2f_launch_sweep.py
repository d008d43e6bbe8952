"""Launch settings of the C2F step's two kernels on a GPU: which tiles, warps and pipeline stages are fastest.

``c2f_attention`` runs ``_coarse_blocks`` and then ``_fine_read`` (which chooses the chunks from the
blocks' partials); their launch settings are module constants of ``scg_summarize.kernels``:

* the read (``triton_fine``): ``FORWARD_BLOCK_H`` (the hidden slice of a program, for k <= 2),
  ``FORWARD_TILE_H`` (the tile of its score loop), ``FORWARD_OPTIONS`` (``num_warps``, ``num_stages``);
* the coarse blocks (``triton_coarse``): ``BLOCK_M`` (chunks per block), ``BLOCK_H`` (the hidden tile),
  ``OPTIONS`` (``num_warps``, ``num_stages``; ``_coarse_combine`` shares them, the step does not run it).

For each part, one factor sweep around the current setting of the other part: every combination of
(block, tile, warps, stages) of that part is applied, its step checked against the current setting's
(the same draws; the context and weights to a tolerance for a sum in another order), captured in CUDA
graphs over four input sets, and timed as ``--b2b`` replays back to back (as
``benchmarks/c2f_attention.py``'s ``*_graph_b2b`` rows), all settings of one (M, k) taking turns.
The ranking is by the sum of the per-step times over the (M, k) cells. Session 17's one-off sweep of
the read (slice, tile, warps) chose the current read; ``num_stages`` and the coarse tiles were never swept.

    python benchmarks/c2f_launch_sweep.py [--dtype bf16] [--chunks 1000] [--ks 1 2] [--parts read coarse]

Writes ``benchmarks/results/c2f_launch_sweep_gpu_<dtype>.{json,md}`` (CUDA; ``scripts/gpu_check.sh
sweep``). On the CPU (``--device cpu`` under ``TRITON_INTERPRET=1``) it runs the same code at a tiny size
and times nothing worth reading: the smoke test's mode.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from c2f_attention import DTYPES, ROTATE, Step, back_to_back, c2f, c2f_step, graphed, interleaved_medians, make_inputs
from scg_summarize.kernels import forced
from scg_summarize.kernels.backend import triton_module

RESULTS = Path(__file__).resolve().parent / "results"
PARTS = ("read", "coarse")


@dataclass(kw_only=True, slots=True, frozen=True)
class Setting:
    """One launch setting of a part: ``block`` is the read's hidden slice or the coarse block's chunks,
    ``tile`` the read's score tile or the coarse block's hidden tile."""

    part: str
    block: int
    tile: int
    warps: int
    stages: int

    @property
    def label(self) -> str:
        names = ("slice", "tile") if self.part == "read" else ("chunks", "hidden tile")
        return f"{names[0]} {self.block}, {names[1]} {self.tile}, {self.warps} warps, {self.stages} stages"


def current(part: str) -> Setting:
    """The setting the kernels use now."""
    if part == "read":
        tf = triton_module("fine")
        opts = tf.FORWARD_OPTIONS
        return Setting(part=part, block=tf.FORWARD_BLOCK_H, tile=tf.FORWARD_TILE_H, **_launch(opts))
    tc = triton_module("coarse")
    return Setting(part=part, block=tc.BLOCK_M, tile=tc.BLOCK_H, **_launch(tc.OPTIONS))


def _launch(options: dict[str, int]) -> dict[str, int]:
    return {"warps": options["num_warps"], "stages": options["num_stages"]}


def grid(part: str) -> list[Setting]:
    """The settings swept for ``part`` (the current one among them)."""
    if part == "read":
        axes = ((64, 128), (32, 64), (4, 8), (2, 3))
    else:
        axes = ((16, 32), (64, 128), (4, 8), (2, 3))
    out = [Setting(part=part, block=b, tile=t, warps=w, stages=s) for b, t, w, s in itertools.product(*axes)]
    now = current(part)
    return out if now in out else [now, *out]


@contextmanager
def applied(setting: Setting) -> Iterator[None]:
    """The kernels' launch constants set to ``setting`` (restored afterwards). A launch reads them when it
    is made: a CUDA graph captured inside keeps the setting."""
    if setting.part == "read":
        module, names = triton_module("fine"), ("FORWARD_BLOCK_H", "FORWARD_TILE_H", "FORWARD_OPTIONS")
    else:
        module, names = triton_module("coarse"), ("BLOCK_M", "BLOCK_H", "OPTIONS")
    saved = [getattr(module, name) for name in names]
    values = (setting.block, setting.tile, {"num_warps": setting.warps, "num_stages": setting.stages})
    for name, value in zip(names, values):
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in zip(names, saved):
            setattr(module, name, value)


def agrees(out: Any, want: Any, dtype: torch.dtype) -> bool:
    """The same draws, and the context and weights within a tolerance for float32 sums in another order
    stored in ``dtype`` (two roundings of the stored type, or 1e-5 relative in float32)."""
    rtol = 2 * 2.0**-8 if dtype == torch.bfloat16 else 1e-5
    if not torch.equal(out.idx, want.idx):
        return False
    return all(
        torch.allclose(a.float(), b.float(), rtol=rtol, atol=rtol * float(b.float().abs().max()))
        for a, b in ((out.context, want.context), (out.weights, want.weights), (out.word_attn, want.word_attn))
    )


def sweep_cell(
    settings: list[Setting], m: int, k: int, dtype: torch.dtype, device: torch.device, sizes: dict[str, int], args: Any
) -> list[dict[str, Any]]:
    """Every setting at one (M, k): its agreement with the current setting and its per-step time."""
    sets = [make_inputs(sizes["B"], m, sizes["N"], sizes["H"], dtype, device, salt) for salt in range(ROTATE)]
    with torch.no_grad():
        want = c2f_step(sets[0], k)
        fns: list[Step] = []
        same: list[bool] = []
        for setting in settings:
            with applied(setting):
                same.append(agrees(c2f_step(sets[0], k), want, dtype))
                if device.type == "cuda":
                    fns.append(back_to_back([graphed(lambda x=x: c2f(x, k)) for x in sets], args.b2b))
                else:
                    fns.append(back_to_back([lambda x=x: c2f(x, k) for x in sets], args.b2b))
        # the CPU step runs the interpreter outside ``applied``: it times the current setting for all
        medians = interleaved_medians(fns, device, args.repeats)
    return [
        {"M": m, "k": k, "setting": asdict(s), "agrees": ok, "us": 1000 * ms / args.b2b}
        for s, ok, ms in zip(settings, same, medians)
    ]


def run(args: Any) -> dict[str, Any]:
    device = torch.device(args.device)
    dtype = DTYPES[args.dtype]
    sizes = {"B": 64, "N": 40, "H": 512} if device.type == "cuda" else {"B": 2, "N": 3, "H": 16}
    start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with forced("triton"):
        for part in args.parts:
            settings = grid(part)
            for m, k in itertools.product(args.chunks, args.ks):
                rows += sweep_cell(settings, m, k, dtype, device, sizes, args)
                print(f"[{time.perf_counter() - start:6.1f} s] {part}: M = {m}, k = {k} done", flush=True)
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.machine() + " CPU",
        "torch": torch.__version__,
        "dtype": args.dtype,
        "sizes": sizes,
        "b2b": args.b2b,
        "repeats": args.repeats,
        "current": {part: asdict(current(part)) for part in args.parts},
        "rows": rows,
        "seconds": time.perf_counter() - start,
    }


def ranking(result: dict[str, Any], part: str) -> list[tuple[Setting, float, dict[tuple[int, int], float], bool]]:
    """``(setting, summed µs, µs per (M, k), agrees everywhere)`` of ``part``, fastest first."""
    by: dict[Setting, dict[tuple[int, int], float]] = {}
    ok: dict[Setting, bool] = {}
    for r in result["rows"]:
        if r["setting"]["part"] == part:
            s = Setting(**r["setting"])
            by.setdefault(s, {})[(r["M"], r["k"])] = r["us"]
            ok[s] = ok.get(s, True) and r["agrees"]
    return sorted(((s, sum(t.values()), t, ok[s]) for s, t in by.items()), key=lambda row: row[1])


def to_markdown(result: dict[str, Any], command: str) -> str:
    lines = [
        f"# C2F launch settings ({result['dtype']})",
        "",
        f"{result['device']}, torch {result['torch']}; B = {result['sizes']['B']}, N = {result['sizes']['N']}, "
        f"H = D = {result['sizes']['H']}; µs per step, {result['b2b']} graph replays back to back over "
        f"{ROTATE} input sets, median of {result['repeats']}, all settings of a cell taking turns; "
        f"{result['seconds']:.0f} s. Reproduce: `{command}`.",
    ]
    for part, now in result["current"].items():
        table = ranking(result, part)
        cells = sorted(table[0][2]) if table else []
        base = next(total for s, total, _, _ in table if asdict(s) == now)
        lines += [
            "",
            f"## {part}: current {Setting(**now).label}",
            "",
            "| setting | " + " | ".join(f"M = {m}, k = {k}" for m, k in cells) + " | sum | vs current | agrees |",
            "|---|" + "---:|" * (len(cells) + 2) + "---|",
        ]
        for s, total, per, ok in table:
            mark = " (current)" if asdict(s) == now else ""
            lines.append(
                f"| {s.label}{mark} | "
                + " | ".join(f"{per[c]:.1f}" for c in cells)
                + f" | {total:.1f} | {total / base:.3f} | {'yes' if ok else '**no**'} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--chunks", type=int, nargs="+", default=[1000])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--parts", choices=PARTS, nargs="+", default=list(PARTS))
    parser.add_argument("--b2b", type=int, default=20, help="replays per timed step")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA GPU is visible here")
    result = run(args)
    stem = f"c2f_launch_sweep_gpu_{args.dtype}" if args.device == "cuda" else f"c2f_launch_sweep_cpu_{args.dtype}"
    command = " ".join(["python benchmarks/c2f_launch_sweep.py", *sys.argv[1:]])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / f"{stem}.md").write_text(to_markdown(result, command))
    print(to_markdown(result, command))


if __name__ == "__main__":
    main()
