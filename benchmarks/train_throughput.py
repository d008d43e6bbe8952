"""Paper-size training throughput of the summarizers: ms per step, tokens/s and peak memory.

Each named configuration (``scg_summarize/configs``: STANDARD, HIER, C2F, C2F+MULTI2 at the sizes
of ``base.toml``: 2-layer LSTMs of 500 units, CONV chunk encoder of 600 filters, batch 16) is
trained for ``--steps`` steps with the real training step, :meth:`Trainer.train_step` of
``scg_summarize/train/loop.py``: the configuration's objective (``auto``: maximum likelihood for
soft attention, the C2F surrogate through scg, with the EMA baseline, for hard attention),
backpropagation, gradient renormalization and the optimizer step (the paper's SGD). Batches come
from the trainer's bucketed loader (constant batch size: the last partial batch of an epoch is
dropped), cycled over epochs. Validation and checkpoints are not run (they are not per step).

The vocabulary is the paper's by default (``--vocab-size 50004``: the 50000 most frequent words,
Ling & Rush 2017 Section 5, plus the 4 specials), so that the output softmax has its paper size. The
250-article corpus has only 14456 distinct words, so its grids are prepared with a vocabulary of
50004 entries: the counted one followed by unused filler words, which are never a source or target
word (``scripts/gpu_check.sh`` makes it; the word ids are those of the counted vocabulary). A corpus
whose vocabulary has another size is refused before any run (``--vocab-size 0``: the corpus's
vocabulary, whatever its size).

Per run: ``--warmup`` untimed steps (CUDA/Triton compilation, allocator warm-up), then up to
``--steps`` timed steps, each bracketed by ``torch.cuda.synchronize()`` on CUDA; the data loading
is outside the timed interval (reported separately). Reported: ms per step (median, mean),
target tokens/s (real target words / timed seconds), source tokens/s (real source words), peak
memory (``torch.cuda.max_memory_allocated`` reset per run; on CPU the peak of the process's
resident set sampled at step ends, and ``ru_maxrss``), parameters, the mean training loss.

``--amp bf16`` trains with ``train.precision = 'bf16'``: the objective (forward and loss) under
``torch.autocast(device, bfloat16)``; backward, clipping and the optimizer step run outside it. If a run fails under
autocast, its error is recorded and the configuration is rerun in fp32; if a run fails on CUDA
with the Triton kernels (``SCG_KERNELS=auto``), it is rerun with ``SCG_KERNELS=reference``. No
failure stops the script. ``--max-seconds`` caps the timed part of a run (18 s: fewer than
``--steps`` steps are then timed, and the row says so) and ``--budget-s`` the whole script (150 s:
once it is spent, warm-up and timed loops stop after their current step and the remaining runs are
recorded as skipped), so that the GPU run below stays within about 160 s of wall time.

Corpora (``../shared/data/cnndm-250``: 250 CNN/DM test articles, prepared here as a ``train``
split, since this measures cost, not quality; the first highlight is the target)::

    scg-summarize prepare --format cnndm --input train=../shared/data/cnndm-250/stories \\
        --chunks 10 --chunk-len 40 --output runs/cnndm250-10x40 --quiet
    scg-summarize prepare --format cnndm --input train=../shared/data/cnndm-250/stories \\
        --chunks 100 --chunk-len 40 --output runs/cnndm250-100x40 --quiet

(``python -m scg_summarize.cli prepare`` is the same command; 2 s each, 1.6 MB and 5.0 MB, under
the git-ignored ``runs/``; for the paper's vocabulary add ``--vocab`` the padded one described above.
``scripts/gpu_check.sh`` prepares its grids on the device from the stories it carries.) The 10x40 grid is the paper's
(first 400 words); the 100x40 grid keeps the whole article (up to 4000 words; 250 articles average
677 words, so ~17-18 % of that grid is real words), where STANDARD's word LSTM and its attention grow
with the document and C2F's read stays one chunk per step. Every model's encoders stop at the batch's
`SourceLengths` (the longest document's words, the chunks holding words), so the padding chunks cost
only the attentions over them. On the CPU, one thread, the small configurations::

    OMP_NUM_THREADS=1 python benchmarks/train_throughput.py --data runs/cnndm250-10x40 \
        --configs small-STANDARD small-HIER small-C2F --also runs/cnndm250-100x40 small-STANDARD \
        small-HIER small-C2F --also runs/cnndm250-1000x40 small-STANDARD small-C2F --steps 10 --warmup 2 \
        --device cpu --threads 1 --vocab-size 0 --budget-s 1200 --max-seconds 120 --tag cpu_small

(``train_throughput_cpu_small.*``; the 1000x40 grid prepared as the others, 40 MB.)

The GPU run (issue 17, item 4)::

    python benchmarks/train_throughput.py --data runs/cnndm250-10x40 \\
        --configs STANDARD HIER C2F C2F+MULTI2 --also runs/cnndm250-100x40 STANDARD C2F \\
        --steps 200 --warmup 10 --device cuda --amp bf16 --tag gpu

``--cuda-graph`` (CUDA only; issue 29's captured step; first run on an H100 in session 27) trains
each run with ``train.cuda_graph`` (`scg_summarize.train.captured`: the forward and backward passes
replayed from a CUDA graph, the first batch eager, the second captured), every batch's targets padded
to the corpus's longest (``data.pad_targets``); ``bash scripts/gpu_check.sh graph`` runs STANDARD and
C2F that way (``--tag gpu_graph``).

Writes ``benchmarks/results/train_throughput_<tag or device>.{json,md}``; the md states, per
configuration, the ratio of its ms per step to STANDARD's at the same grid, and the ratio between
grids (M = 100 vs M = 10) of each configuration run on both. Configurations run at two grids or more
also get their curve, ms per step and peak memory against M (``.png``): ``bash scripts/gpu_check.sh
curve`` runs STANDARD and C2F at M = 10, 100, 300 and 1000 with ``--cuda-graph`` (issue 29).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import re
import resource
import shlex
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from scg_summarize.data.batching import Batch
from scg_summarize.kernels import ENV_VAR, forced
from step_memory import LineAllocations
from step_memory import to_markdown as memory_markdown
from torch._dynamo.utils import counters

RESULTS = Path(__file__).resolve().parent / "results"
PAPER_VOCAB = 50004  # 50000 words (Ling & Rush 2017, Section 5) + <pad>, <unk>, <s>, </s>
KERNEL_ENV = ENV_VAR


def log(line: str) -> None:
    print(line, flush=True)


# ----------------------------------------------------------------------------- corpus
def corpus_grid(data: Path) -> tuple[int, int, dict[str, int]]:
    """``(M, N, {split: examples})`` of a prepared corpus (clear errors for anything else)."""
    from scg_summarize.data.storage import read_meta

    meta = read_meta(data)
    options = meta.get("options", {})
    splits = {str(name): int(info.get("examples", 0)) for name, info in meta.get("splits", {}).items()}
    return int(options["num_chunks"]), int(options["chunk_len"]), splits


def corpus_vocabulary(data: Path) -> int:
    """The number of entries of a prepared corpus's ``vocab.txt`` (the model's vocabulary size)."""
    from scg_summarize.data.vocab import Vocab

    return len(Vocab.load(data / "vocab.txt"))


def pick_split(data: Path, requested: str) -> str:
    """``requested``, or with ``auto`` the ``train`` split when it has examples, else the first
    non-empty split (a corpus prepared as ``test`` only still measures the training cost)."""
    _, _, splits = corpus_grid(data)
    if requested != "auto":
        if splits.get(requested, 0) <= 0:
            raise SystemExit(
                f"--split {requested}: {data} has no examples in that split (its splits: {splits or 'none'})"
            )
        return requested
    if splits.get("train", 0) > 0:
        return "train"
    for name, count in splits.items():
        if count > 0:
            return name
    raise SystemExit(f"--data {data}: the prepared corpus has no examples in any split ({splits})")


# ----------------------------------------------------------------------------- memory and timing
def _rss_bytes() -> int:
    """The current resident set of this process (0 where /proc is unavailable)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def _maxrss_bytes() -> int:
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cycle(loader: Any) -> Iterator[Batch]:
    """The loader's batches, epoch after epoch (the loader advances its epoch after a full pass)."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            raise RuntimeError("the training loader yields no batches (fewer examples than --batch?)")


def _error(err: BaseException) -> str:
    """The exception and where it came from (its last frames), short enough for the JSON."""
    frames = traceback.extract_tb(err.__traceback__)[-3:]
    where = " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames))
    return f"{type(err).__name__}: {str(err)[:1500]} [at {where}]"


# ----------------------------------------------------------------------------- one run
def measure(
    config_name: str, data: Path, split: str, args: argparse.Namespace, amp: str, deadline: float, backend: str = ""
) -> dict[str, Any]:
    """Train ``config_name`` on ``data`` for ``args.steps`` timed steps (``backend``: the objective
    compiled with it, ``train.compile``); raises on any failure."""
    from scg_summarize.data.dataset import SummarizationDataset
    from scg_summarize.kernels import choose
    from scg_summarize.train.config_loading import load_config
    from scg_summarize.train.data import make_loader
    from scg_summarize.train.loop import Trainer

    overrides = [
        f"train.device={json.dumps(args.device)}",
        f"data.train_split={json.dumps(split)}",
        f"data.valid_split={json.dumps(split)}",
        "train.num_workers=0",
        "train.checkpoint_every=0",
    ]
    if args.batch:
        overrides.append(f"train.batch_size={args.batch}")
    if args.vocab_size:
        overrides.append(f"model.vocab_size={args.vocab_size}")
    if args.threads:
        overrides.append(f"train.threads={args.threads}")
    if amp == "bf16":
        overrides.append("train.precision='bf16'")
    if args.compile:  # (the eager and the compiled runs alike: the same padded work)
        overrides.append(f"data.pad_targets={args.pad_targets}")
    length = 0
    if args.cuda_graph:  # train.cuda_graph, one graph: every batch's targets padded to the corpus's longest
        length = int(SummarizationDataset(data, split, with_text=False).target_lengths().max())
        overrides += ["train.cuda_graph=true", f"data.pad_targets={length}"]
    if backend:
        overrides.append(f"train.compile={json.dumps(backend)}")
    overrides += args.set
    config = load_config(config_name, overrides)
    M, N, _ = corpus_grid(data)
    with tempfile.TemporaryDirectory(prefix="train-throughput-") as out_dir:
        trainer = Trainer(config, data, out_dir, quiet=True, log=lambda line: log(f"    {line}"))
        try:
            device = trainer.device
            # a constant batch size: drop the epoch's last partial batch
            trainer.loader = make_loader(trainer.train_set, config, train=True, drop_last=True)
            step: Callable[[Batch], Any] = trainer.train_step
            kernels = choose(device) if config.model.attention == "c2f" else "-"
            params = sum(p.numel() for p in trainer.model.parameters())
            batches = cycle(trainer.loader)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            rss_peak = _rss_bytes()
            warmup_done = 0
            for _ in range(args.warmup):
                step(next(batches))
                warmup_done += 1
                if time.perf_counter() >= deadline:  # (Triton compilation can be slow: keep the budget)
                    break
            _sync(device)
            times: list[float] = []
            tgt_tokens = src_tokens = src_positions = 0
            nll = 0.0
            load_s = 0.0
            cpu0 = time.process_time()
            graphs_before = counters["stats"]["unique_graphs"]
            timed_start = time.perf_counter()
            for _ in range(args.steps):
                t_load = time.perf_counter()
                batch = next(batches)
                src_mask = batch.src_mask
                src_tokens += int(src_mask.sum())
                src_positions += int(src_mask.numel())
                load_s += time.perf_counter() - t_load
                _sync(device)
                t0 = time.perf_counter()
                result = step(batch)
                _sync(device)
                times.append(time.perf_counter() - t0)
                tgt_tokens += result.tokens
                nll += result.nll
                if device.type == "cpu":
                    rss_peak = max(rss_peak, _rss_bytes())
                now = time.perf_counter()
                if now - timed_start >= args.max_seconds or now >= deadline:
                    break
            cpu_s = time.process_time() - cpu0
            by_line = []
            if args.memory_by_line:  # (one more step, untimed: where its memory goes)
                with LineAllocations(device, int(args.memory_min_mib * 2**20)) as allocations:
                    step(next(batches))
                by_line = [
                    {"line": r.line, "op": r.op, "dtype": r.dtype, "calls": r.calls, "mib": r.mib}
                    for r in allocations.top(args.memory_by_line)
                ]
            total = sum(times)
            row: dict[str, Any] = {
                "config": config_name,
                "data": str(data),
                "split": split,
                "M": M,
                "N": N,
                "batch": config.train.batch_size,
                "vocab": config.model.vocab_size,
                "hidden": config.model.hidden,
                "amp": amp,
                "compile": backend,
                # (graphs dynamo compiled during the timed steps: a new target length each)
                "graphs_compiled_timed": counters["stats"]["unique_graphs"] - graphs_before,
                "cuda_graph": args.cuda_graph,
                "padded_target_length": length,
                "kernels": kernels,
                "params": params,
                "warmup": warmup_done,
                "steps_requested": args.steps,
                "steps": len(times),
                "truncated": len(times) < args.steps,
                "ms_per_step_median": 1000 * statistics.median(times),
                "ms_per_step_mean": 1000 * total / len(times),
                "ms_per_step_min": 1000 * min(times),
                "tgt_tokens_per_s": tgt_tokens / total,
                "src_tokens_per_s": src_tokens / total,
                "tgt_tokens_per_step": tgt_tokens / len(times),
                "src_tokens_per_step": src_tokens / len(times),
                "src_real_fraction": src_tokens / max(src_positions, 1),
                "loss_per_token": nll / max(tgt_tokens, 1),
                "data_loading_ms_per_step": 1000 * load_s / len(times),
                "timed_wall_s": total,
                "memory_by_line": by_line,
                "cpu_s": cpu_s,
            }
            if device.type == "cuda":
                row["peak_mem_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
                row["peak_mem_kind"] = "torch.cuda.max_memory_allocated"
            else:
                row["peak_mem_mib"] = rss_peak / 2**20
                row["peak_mem_kind"] = "process RSS (sampled at step ends)"
                row["process_maxrss_mib"] = _maxrss_bytes() / 2**20
            if not math.isfinite(row["loss_per_token"]):
                raise FloatingPointError(f"non-finite training loss ({row['loss_per_token']})")
            return row
        finally:
            trainer.close()  # (its memory is returned by `release`, once this frame no longer holds it)


def release() -> None:
    """Collect what the last run left (its trainer, model and optimizer state, the frames of its
    error) and return the device memory it held to the device, so that the next run's peak and
    headroom are its own."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def attempts(amp: str, device: str) -> list[tuple[str, str | None]]:
    """The (amp, SCG_KERNELS) tries in order: as asked, then fp32, then fp32 with the reference
    kernels on CUDA (when the kernel backend is not forced by the environment)."""
    tries: list[tuple[str, str | None]] = [(amp, None)]
    if amp != "none":
        tries.append(("none", None))
    if device.startswith("cuda") and os.environ.get(KERNEL_ENV, "auto") == "auto":
        tries.append(("none", "reference"))
    return tries


def run_config(
    config_name: str, data: Path, split: str, amp: str, args: argparse.Namespace, deadline: float, backend: str = ""
) -> dict[str, Any]:
    """One row: the first attempt that works, with the errors of the failed ones."""
    M, N, _ = corpus_grid(data)
    errors: list[dict[str, Any]] = []
    for try_amp, kernels in attempts(amp, args.device):
        if time.perf_counter() >= deadline:
            break
        label = (
            f"{config_name} M={M} amp={try_amp}"
            + (f" compiled ({backend})" if backend else "")
            + (f" {KERNEL_ENV}={kernels}" if kernels else "")
        )
        log(f"  {label}: {args.warmup} warm-up + up to {args.steps} timed steps")
        t0 = time.perf_counter()
        try:
            with forced(kernels):
                row = measure(config_name, data, split, args, try_amp, deadline, backend)
        except Exception as err:  # one shot on the GPU: record it and go on
            message = _error(err)
            log(f"  {label}: FAILED {message}")
            errors.append(
                {"amp": try_amp, "kernels_env": kernels or os.environ.get(KERNEL_ENV, "auto"), "error": message}
            )
            del err
            release()
            continue
        release()
        row.update(
            amp_requested=amp,
            errors=errors,
            run_wall_s=time.perf_counter() - t0,
            kernels_env=kernels or os.environ.get(KERNEL_ENV, "auto"),
        )
        log(
            f"  {label}: {row['ms_per_step_median']:.1f} ms/step (median of {row['steps']}), "
            f"{row['tgt_tokens_per_s']:.0f} tgt tok/s, {row['src_tokens_per_s']:.0f} src tok/s, "
            f"peak {row['peak_mem_mib']:.0f} MiB, loss {row['loss_per_token']:.3f}/token, "
            f"{row['run_wall_s']:.1f} s"
        )
        return row
    skipped = time.perf_counter() >= deadline and not errors
    log(f"  {config_name} M={M} amp={amp}: " + ("skipped (--budget-s spent)" if skipped else "FAILED in every attempt"))
    return {
        "config": config_name,
        "data": str(data),
        "split": split,
        "M": M,
        "N": N,
        "amp_requested": amp,
        "compile": backend,
        "amp": None,
        "errors": errors,
        "failed": True,
        "skipped": "the --budget-s was spent before this run" if skipped else None,
    }


# ----------------------------------------------------------------------------- report
def environment(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device_type": device.type,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "scg_kernels_env": os.environ.get(KERNEL_ENV, "auto"),
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }
    if device.type == "cuda":
        info.update(
            device=torch.cuda.get_device_name(device),
            cuda=torch.version.cuda,
            cudnn=torch.backends.cudnn.version(),
            matmul_allow_tf32=torch.backends.cuda.matmul.allow_tf32,
            cudnn_allow_tf32=torch.backends.cudnn.allow_tf32,
            bf16_supported=torch.cuda.is_bf16_supported(),
        )
        try:
            import triton

            info["triton"] = triton.__version__
        except ImportError:
            info["triton"] = None
    else:
        info["device"] = platform.processor() or platform.machine()
    return info


def ratios(rows: list[dict[str, Any]]) -> list[str]:
    """Lines comparing ms per step: each config vs STANDARD on the same grid and amp, and each
    config between grids (the largest M vs the smallest)."""
    ok = [r for r in rows if not r.get("failed")]
    key = {(r["config"], r["M"], r["amp"], r.get("compile", "")): r for r in ok}
    lines = []
    for (config, M, amp, backend), row in sorted(key.items(), key=lambda kv: (kv[0][3], kv[0][1], kv[0][2], kv[0][0])):
        standard = re.sub(r"^(tiny-|small-)?.*$", r"\1STANDARD", config)  # the same size variant
        ref = key.get((standard, M, amp, backend))
        how = f", compiled ({backend})" if backend else ""
        if ref is not None and config != standard:
            lines.append(
                f"- M = {M}, amp {amp}{how}: {config} / {standard} = "
                f"{row['ms_per_step_median'] / ref['ms_per_step_median']:.2f}x ms per step "
                f"(target tokens/s {row['tgt_tokens_per_s'] / ref['tgt_tokens_per_s']:.2f}x; peak memory "
                f"{row['peak_mem_mib'] / ref['peak_mem_mib']:.2f}x)"
            )
    for (config, M, amp, backend), row in sorted(key.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        eager = key.get((config, M, amp, ""))
        if backend and eager is not None:
            lines.append(
                f"- {config}, M = {M}, amp {amp}: compiled ({backend}) / eager = "
                f"{row['ms_per_step_median'] / eager['ms_per_step_median']:.2f}x ms per step "
                f"({row['graphs_compiled_timed']} graphs compiled during its timed steps)"
            )
    by_config: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in ok:
        if not row.get("compile"):
            by_config.setdefault((row["config"], row["amp"]), []).append(row)
    for (config, amp), group in sorted(by_config.items()):
        if len({r["M"] for r in group}) < 2:
            continue
        small, large = min(group, key=lambda r: r["M"]), max(group, key=lambda r: r["M"])
        lines.append(
            f"- {config}, amp {amp}: M = {large['M']} / M = {small['M']} = "
            f"{large['ms_per_step_median'] / small['ms_per_step_median']:.2f}x ms per step "
            f"({large['src_tokens_per_step'] / small['src_tokens_per_step']:.2f}x real source words per "
            f"step; peak memory {large['peak_mem_mib'] / small['peak_mem_mib']:.2f}x)"
        )
    return lines


def compiled(row: dict[str, Any]) -> str:
    """A row's compilation, for its configuration cell."""
    return f" (compiled, {row['compile']})" if row.get("compile") else ""


def curves(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[int, dict[str, Any]]]:
    """The successful rows by (config, amp, compile backend) and M, for the configurations that ran
    at two grids or more (issue 29's curve of time and peak memory against the document's length);
    a grid that ran only in another precision (a bf16 run that fell back to fp32) is a line of its own."""
    by: dict[tuple[str, str, str], dict[int, dict[str, Any]]] = {}
    for r in rows:
        if not r.get("failed"):
            by.setdefault((r["config"], r["amp"], r.get("compile", "")), {})[int(r["M"])] = r
    grids_run: dict[str, set[int]] = {}
    for (config, _, _), grids in by.items():
        grids_run.setdefault(config, set()).update(grids)
    return {key: grids for key, grids in by.items() if len(grids_run[key[0]]) > 1}


def write_plot(path: Path, payload: dict[str, Any]) -> bool:
    """ms per step (median) and peak memory against M, one line per configuration and precision of
    `curves` (log-log; a line of one grid is its marker); False, and no file, when there is none."""
    lines = curves(payload["rows"])
    if not lines:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (time_ax, mem_ax) = plt.subplots(1, 2, figsize=(10, 4.2))
    for (config, amp, backend), grids in sorted(lines.items()):
        ms = sorted(grids)
        label = f"{config} ({'fp32' if amp == 'none' else amp}{', ' + backend if backend else ''})"
        time_ax.plot(ms, [grids[m]["ms_per_step_median"] for m in ms], marker="o", label=label)
        mem_ax.plot(ms, [grids[m]["peak_mem_mib"] for m in ms], marker="o", label=label)
    env = payload["environment"]
    graphed = ", steps replayed from CUDA graphs" if payload["args"].get("cuda_graph") else ""
    for ax, what in ((time_ax, "ms per training step (median)"), (mem_ax, "peak memory (MiB)")):
        ax.set(xscale="log", yscale="log", xlabel="chunks M (the grid's N words each)", ylabel=what)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Training step against document length: {env.get('device')}{graphed}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_report(path: Path, payload: dict[str, Any]) -> None:
    env, rows = payload["environment"], payload["rows"]
    out = [
        f"# Training throughput at the paper's sizes ({payload['tag']})",
        "",
        f"Device: {env.get('device')} ({env['device_type']}); torch {env['torch']}"
        + (f", CUDA {env.get('cuda')}, Triton {env.get('triton')}" if env["device_type"] == "cuda" else "")
        + f"; {env['date_utc']} UTC; load average {env.get('load_average')}.",
        "",
        "Command:",
        "",
        "```",
        payload["command"],
        "```",
        "",
        "The real training step (`Trainer.train_step`: objective, backward, gradient renormalization, SGD) "
        f"after {payload['args']['warmup']} warm-up steps; ms per step bracketed by CUDA synchronization, data "
        "loading excluded; tokens/s counts real (unpadded) words, `real src %` is their share of the M x N grid. "
        "Vocabulary "
        f"{payload['args']['vocab_size'] or 'of the corpus'}. Peak memory: "
        + (
            "`torch.cuda.max_memory_allocated`, reset per run."
            if env["device_type"] == "cuda"
            else "the process's resident set sampled at step ends (monotone across runs in one process)."
        ),
        *(
            [
                "",
                "`--cuda-graph`: each run with `train.cuda_graph` (the forward and backward passes replayed from "
                "a CUDA graph: the first batch eager, the second captured; the optimizer steps eagerly), every "
                f"batch's targets padded to the corpus's longest ({rows[0].get('padded_target_length')} positions "
                "in the first run).",
            ]
            if payload["args"].get("cuda_graph")
            else []
        ),
        *(
            [
                "",
                f"`--compile {payload['args']['compile']}`: every configuration also ran with its objective compiled "
                f"(`train.compile = '{payload['args']['compile']}'`: forward and backward traced whole, "
                "`scg_summarize/train/compiled.py`); the eager and the compiled runs both padded their targets to "
                f"multiples of {payload['args']['pad_targets']} positions (`data.pad_targets`). A compiled row's "
                "warm-up includes its first compilations; `graphs_compiled_timed` in the JSON counts those made "
                "during its timed steps (a new target length each), which its median ms per step mostly skips.",
            ]
            if payload["args"].get("compile")
            else []
        ),
        "",
        "| config | M x N | batch | amp | kernels | steps | ms/step median | ms/step mean | tgt tok/s | "
        "src tok/s | real src % | peak MiB | params (M) | loss/token |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("failed"):
            reason = (
                f"skipped: {r['skipped']}"
                if r.get("skipped")
                else "failed: " + "; ".join(e["error"][:200] for e in r["errors"])
            )
            out.append(
                f"| {r['config']}{compiled(r)} | {r['M']} x {r['N']} | | {r['amp_requested']} | | - | "
                f"{reason.replace('|', '/')} | | | | | | | |"
            )
            continue
        amp = r["amp"] if r["amp"] == r["amp_requested"] else f"{r['amp']} (asked {r['amp_requested']})"
        out.append(
            f"| {r['config']}{compiled(r)} | {r['M']} x {r['N']} | {r['batch']} | {amp} | {r['kernels']} | "
            f"{r['steps']}{' (capped)' if r['truncated'] else ''} | {r['ms_per_step_median']:.1f} | "
            f"{r['ms_per_step_mean']:.1f} | {r['tgt_tokens_per_s']:.0f} | {r['src_tokens_per_s']:.0f} | "
            f"{100 * r['src_real_fraction']:.0f} | "
            f"{r['peak_mem_mib']:.0f} | {r['params'] / 1e6:.2f} | {r['loss_per_token']:.3f} |"
        )
    lines = ratios(rows)
    if lines:
        out += ["", "Ratios (medians of ms per step):", "", *lines]
    if curves(rows):
        out += ["", f"Curves of ms per step and peak memory against M: `{path.with_suffix('.png').name}`."]
    failures = [(r["config"], r["M"], e) for r in rows for e in r.get("errors", [])]
    if failures:
        out += ["", "Failed attempts (the row above then used the next attempt: fp32, then the reference kernels):", ""]
        out += [
            f"- {c} M = {M}, amp {e['amp']}, {KERNEL_ENV}={e['kernels_env']}: `{e['error'][:600]}`"
            for c, M, e in failures
        ]
    out += memory_markdown(rows)
    out += ["", f"Wall time of the whole script: {payload['wall_s']:.1f} s.", ""]
    path.write_text("\n".join(out))


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a prepared corpus (scg-summarize prepare)")
    parser.add_argument(
        "--configs",
        nargs="+",
        default=["STANDARD", "HIER", "C2F", "C2F+MULTI2"],
        help="named configurations run on --data",
    )
    parser.add_argument(
        "--also",
        nargs="+",
        action="append",
        default=[],
        metavar="DIR_THEN_CONFIGS",
        help="another corpus and the configurations to run on it (repeatable), e.g. "
        "--also runs/cnndm250-100x40 STANDARD C2F",
    )
    parser.add_argument(
        "--split", default="auto", help="the split to train on (auto: train, else the first non-empty split)"
    )
    parser.add_argument("--steps", type=int, default=200, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps per run")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--amp",
        nargs="+",
        choices=("none", "bf16"),
        default=["bf16"],
        help="precision(s): each configuration runs once per value",
    )
    parser.add_argument("--batch", type=int, default=0, help="batch size (0: the configuration's)")
    parser.add_argument(
        "--vocab-size",
        type=int,
        default=PAPER_VOCAB,
        help=f"model vocabulary (default {PAPER_VOCAB}: the paper's; 0: the corpus's)",
    )
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: the default)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="TABLE.KEY=VALUE",
        help="a configuration override for every run (repeatable)",
    )
    parser.add_argument("--max-seconds", type=float, default=18.0, help="cap on one run's timed steps (s)")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=150.0,
        help="the script's time budget (s): no run starts, and warm-up and timed loops stop, once it is spent",
    )
    parser.add_argument(
        "--cuda-graph",
        action="store_true",
        help="train with train.cuda_graph: each step's forward and backward passes replayed from a CUDA "
        "graph (targets padded to the corpus's longest; CUDA only)",
    )
    parser.add_argument(
        "--compile",
        default="",
        choices=("", "inductor", "aot_eager", "eager"),
        help="also run every configuration with its objective compiled by this torch.compile backend "
        "(train.compile); the eager and compiled runs then pad targets to multiples of --pad-targets",
    )
    parser.add_argument("--pad-targets", type=int, default=8, help="with --compile: data.pad_targets (default 8)")
    parser.add_argument(
        "--memory-by-line",
        type=int,
        default=0,
        metavar="N",
        help="one more step per run: the N source lines that allocated the most (benchmarks/step_memory.py)",
    )
    parser.add_argument(
        "--memory-min-mib", type=float, default=1.0, help="with --memory-by-line: ops below this are not charged"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    parser.add_argument("--tag", default="", help="results file suffix (default: the device type)")
    args = parser.parse_args(argv)
    if args.pad_targets < 0:
        parser.error(f"--pad-targets must be >= 0, got {args.pad_targets}")
    if args.cuda_graph and not str(args.device).startswith("cuda"):
        parser.error(f"--cuda-graph needs a CUDA device, got --device {args.device}")
    if args.memory_by_line < 0 or args.memory_min_mib < 0:
        parser.error("--memory-by-line and --memory-min-mib must be >= 0")
    if args.memory_by_line and (args.cuda_graph or args.compile):
        parser.error("--memory-by-line records an eager step's ops: not with --cuda-graph or --compile")
    if args.cuda_graph and args.compile:
        parser.error("--cuda-graph and --compile: one way of running the step at a time")
    start = time.perf_counter()
    deadline = start + args.budget_s
    if args.steps < 1 or args.warmup < 0 or args.batch < 0 or args.vocab_size < 0:
        parser.error("--steps must be positive; --warmup, --batch and --vocab-size non-negative")
    if args.tag and not re.fullmatch(r"[A-Za-z0-9_-]+", args.tag):
        parser.error(f"--tag {args.tag!r}: use letters, digits, '_', '-', '.'")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available")
    if args.amp != ["none"] and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        log("warning: this GPU does not support bf16; bf16 runs will fall back to fp32")
    plan: list[tuple[Path, list[str]]] = [(args.data, args.configs)]
    for item in args.also:
        if len(item) < 2:
            parser.error(f"--also {' '.join(item)}: expected a corpus folder and at least one configuration")
        plan.append((Path(item[0]), item[1:]))
    splits = {}
    for data, _ in plan:
        if not data.is_dir():
            parser.error(f"--data/--also {data}: not a folder (prepare it first, see this script's docstring)")
        splits[data] = pick_split(data, args.split)
        words = corpus_vocabulary(data)
        if args.vocab_size and words != args.vocab_size:
            parser.error(
                f"--vocab-size {args.vocab_size}, but {data} has a vocabulary of {words} words: prepare it with "
                f"`scg-summarize prepare --vocab` a vocabulary of {args.vocab_size} entries (as scripts/gpu_check.sh "
                "does), or pass --vocab-size 0 (the corpus's vocabulary)"
            )
    from scg_summarize.train.config_loading import load_config

    for _, names in plan:  # fail fast on a misspelt configuration, before any run
        for name in names:
            try:
                load_config(name)
            except ValueError as err:
                parser.error(f"--configs {name}: {err}")
    tag = args.tag or device.type
    log(
        f"train_throughput: device {device}, torch {torch.__version__}, runs: "
        + "; ".join(f"{d} ({splits[d]}): {' '.join(n)}" for d, n in plan)
        + f", amp {' '.join(args.amp)}"
    )
    rows: list[dict[str, Any]] = []
    for data, names in plan:
        for name in names:
            for amp in args.amp:
                for backend in ("", args.compile) if args.compile else ("",):
                    rows.append(run_config(name, data, splits[data], amp, args, deadline, backend))
    payload = {
        "tag": tag,
        "command": shlex.join([sys.executable, *sys.argv])
        if argv is None
        else shlex.join(["train_throughput.py", *argv]),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "environment": environment(device),
        "rows": rows,
        "ratios": ratios(rows),
        "wall_s": time.perf_counter() - start,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"train_throughput_{tag}"
    stem.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n")
    write_report(stem.with_suffix(".md"), payload)
    plotted = write_plot(stem.with_suffix(".png"), payload)
    curve = f" and {stem}.png" if plotted else ""
    log(f"wrote {stem}.json, {stem}.md{curve} ({payload['wall_s']:.1f} s)")
    return 1 if all(r.get("failed") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
