"""How the per-step attention cost grows with the number of chunks M: C2F vs STANDARD.

For M = 10 ... 1000 chunks of N = 40 words (B = 8, H = 128), times one decoder step's attention
(``flat_step``, the STANDARD / Model 1 attention over all M·N word states, and ``c2f_step`` with
k = 1 and k = 2 chunks: coarse scores over the M chunk vectors, argmax, fine attention inside
the selected chunks) and one full decoder step (2-layer LSTM cells + attention + output layer)
of each model, and counts the bytes of the new tensors the step allocates (views excluded).
STANDARD grows linearly in M (it reads all M·N states); C2F reads M chunk vectors and k·N
states, so it stays nearly flat until the O(M·H) coarse scores dominate.

Word states for all chunks are computed once per document by the encoder (as in the paper) and
are an input here, not part of the per-step cost.

Times are the minimum over repeats (robust on a shared machine). Reproduce:
``python benchmarks/c2f_scaling.py`` (writes ``benchmarks/results/c2f_scaling.{json,md}``;
``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from scg_summarize.kernels import reference
from scg_summarize.models.c2f.coarse_to_fine import C2FAttention, c2f_step
from scg_summarize.models.common.attention import FlatAttention, Memory, flat_step
from scg_summarize.models.common.decoder import Decoder
from torch.overrides import TorchFunctionMode

RESULTS = Path(__file__).resolve().parent / "results"


class AllocationCounter(TorchFunctionMode):
    """Sums the bytes of tensors produced by torch operations that do not share an input's storage."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.scg_summarize.c2f_fine_attend.default:
            # the model's fine read is a custom op (scg_summarize.kernels): count what its reference
            # implementation allocates inside (the gathered (B, k, N, H) block), which the mode does not see
            words, word_mask, query, idx, weights, *rest = args
            rows = rest[0] if rest else (kwargs or {}).get("rows")
            with self:
                return reference.fine_attend(words, word_mask, query, idx, weights, rows)
        out = func(*args, **(kwargs or {}))
        inputs = set()
        for a in list(args) + list((kwargs or {}).values()):
            if isinstance(a, torch.Tensor):
                inputs.add(a.untyped_storage().data_ptr())
        for o in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() not in inputs:
                self.bytes += o.untyped_storage().nbytes()
        return out


def timed(fn: Any, repeats: int) -> tuple[float, float]:
    """(minimum, median) seconds over ``repeats`` calls. The minimum is the robust statistic on a
    shared machine (other processes only ever add time)."""
    fn()  # warm up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def allocated(fn: Any) -> int:
    with AllocationCounter() as counter:
        fn()
    return counter.bytes


def argmax_select(k: int) -> Any:
    def select(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        idx = logits.topk(k, dim=1).indices
        return idx, torch.full(idx.shape, 1.0 / k)

    return select


@torch.no_grad()
def measure(M: int, N: int, B: int, H: int, repeats: int) -> dict[str, Any]:
    torch.manual_seed(0)
    words = torch.randn(B, M, N, H)
    mask = torch.ones(B, M, N, dtype=torch.bool)
    chunks = torch.randn(B, M, H)
    chunk_mask = torch.ones(B, M, dtype=torch.bool)
    q = torch.randn(B, H)
    row: dict[str, Any] = {
        "M": M,
        "N": N,
        "B": B,
        "H": H,
        "words": M * N,
        # floats of encoder output each attention step reads (analytic)
        "standard_read_floats": B * M * N * H,
        "c2f_k1_read_floats": B * (M * H + N * H),
        "c2f_k2_read_floats": B * (M * H + 2 * N * H),
    }
    cases = {
        "standard_attn": lambda: flat_step(words, mask, q),
        "c2f_attn_k1": lambda: c2f_step(chunks, chunk_mask, words, mask, q, q, argmax_select(1)),
        "c2f_attn_k2": lambda: c2f_step(chunks, chunk_mask, words, mask, q, q, argmax_select(2)),
    }
    memory = Memory.build(words, mask, chunks)
    for name, attention in (("standard_step", FlatAttention(H, H)), ("c2f_step", C2FAttention(H, H, H))):
        dec = Decoder(H, H, 2, 0.0, attention).eval()
        state = dec.init_state(B, None, words)
        y = torch.randn(B, H)
        cases[name] = lambda dec=dec, state=state, y=y: dec.step(state, y, memory, 0, "greedy")
    for name, fn in cases.items():
        best, median = timed(fn, repeats)
        row[f"{name}_ms"] = 1000.0 * best
        row[f"{name}_median_ms"] = 1000.0 * median
        row[f"{name}_alloc_kib"] = allocated(fn) / 1024.0
    return row


def to_markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# C2F scaling: per-decoder-step attention cost vs number of chunks M",
        "",
        f"N = {rows[0]['N']} words per chunk, B = {rows[0]['B']}, H = {rows[0]['H']}; {meta['device']}, "
        f"torch {meta['torch']}, {meta['threads']} thread(s), minimum of {meta['repeats']} repeats (medians in "
        "the JSON). "
        "`reads` = encoder states (and chunk vectors) the attention step reads; "
        "`alloc` = bytes of new tensors the step creates (views excluded; C2F copies the k selected "
        "chunks' states, STANDARD only allocates its M·N scores). "
        "Reproduce: `python benchmarks/c2f_scaling.py`.",
        "",
        "| M | words | STANDARD attn ms | C2F k=1 attn ms | C2F k=2 attn ms | STANDARD step ms | C2F step ms | "
        "STANDARD reads MiB | C2F k=1 reads MiB | STANDARD alloc KiB | C2F k=1 alloc KiB | speed-up (attn k=1) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['M']} | {r['words']} | {r['standard_attn_ms']:.3f} | {r['c2f_attn_k1_ms']:.3f} | "
            f"{r['c2f_attn_k2_ms']:.3f} | {r['standard_step_ms']:.3f} | {r['c2f_step_ms']:.3f} | "
            f"{r['standard_read_floats'] * 4 / 2**20:.2f} | {r['c2f_k1_read_floats'] * 4 / 2**20:.2f} | "
            f"{r['standard_attn_alloc_kib']:.1f} | {r['c2f_attn_k1_alloc_kib']:.1f} | "
            f"{r['standard_attn_ms'] / r['c2f_attn_k1_ms']:.1f}x |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, nargs="+", default=[10, 30, 100, 300, 1000])
    parser.add_argument("--chunk-len", type=int, default=40)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="M = 10, 100 with 3 repeats; nothing written")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    chunks, repeats = ([10, 100], 3) if args.quick else (args.chunks, args.repeats)
    rows = []
    for M in chunks:
        row = measure(M, args.chunk_len, args.batch, args.hidden, repeats)
        rows.append(row)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    meta = {
        "device": "CPU " + (platform.processor() or platform.machine()),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "repeats": repeats,
    }
    if args.quick:
        return
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "c2f_scaling.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    (args.out / "c2f_scaling.md").write_text(to_markdown(rows, meta))
    print(to_markdown(rows, meta))


if __name__ == "__main__":
    main()
