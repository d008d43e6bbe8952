"""The C2F model's scg objectives with their graph tracked, cached or declared: time per minibatch.

``train.objective.c2f_objective`` and ``train.self_critical.self_critical_objective`` build their graphs
with ``scg.Declared()`` (the causal rule is exactly the model's structure;
``tests/summarization/train/test_c2f_structure.py`` checks it against tracking). This times one
minibatch's objective and backward with the graph tracked (``scg.Graph()``), ``scg.Cached()`` and
``scg.Declared()`` (one instance each, reused from step to step as a trainer does): ``c2f`` is the
teacher-forced surrogate (``c2f_program``: the sampled forward, one cost per step), ``self-critical``
the sampled rollout of T words with its chunk and word draws and one reward (``sampled_program``; the
greedy rerun, declared, included in every row). The implementations alternate, each repeat seeded
alike (the same draws), median of ``--repeats``, one thread, on the reference kernels (CPU).

    OMP_NUM_THREADS=1 python benchmarks/c2f_objective_structure.py [--repeats 9]

Writes ``benchmarks/results/c2f_objective_structure.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from scg_summarize.data.batching import Batch
from scg_summarize.models.c2f.config import C2FConfig
from scg_summarize.models.registry import build_model
from scg_summarize.train.objective import c2f_program
from scg_summarize.train.reward import reference_ids
from scg_summarize.train.self_critical import greedy_rewards, sampled_program

import scg

RESULTS = Path(__file__).resolve().parent / "results"
#: B documents of M chunks of N words, T target tokens, vocabulary V, hidden size H
SIZES = {"B": 16, "M": 10, "N": 10, "T": 20, "V": 500, "H": 64}


def make_model_and_batch() -> tuple[torch.nn.Module, Batch]:
    """A C2F model of ``SIZES`` (seeded) and one minibatch of full-length documents and targets."""
    s = SIZES
    torch.manual_seed(0)
    config = C2FConfig(
        vocab_size=s["V"],
        attention="c2f",
        num_chunks=s["M"],
        emb_dim=32,
        hidden=s["H"],
        enc_layers=1,
        dec_layers=2,
        conv_filters=32,
        conv_width=3,
        dropout=0.0,
        init_range=0.1,
    )
    gen = torch.Generator().manual_seed(3)
    src = torch.randint(4, s["V"], (s["B"], s["M"], s["N"]), generator=gen)
    tgt = torch.randint(4, s["V"], (s["B"], s["T"]), generator=gen)
    tgt[:, 0] = 2
    ones = torch.ones_like
    return build_model(config), Batch(
        src=src, src_mask=ones(src, dtype=torch.bool), tgt=tgt, tgt_mask=ones(tgt, dtype=torch.bool)
    )


def make_step(structure: scg.Cached | scg.Declared | None, model: torch.nn.Module, batch: Batch) -> Callable[[], None]:
    """One minibatch: ``c2f_program`` in a graph of ``structure`` (None: tracked), surrogate, backward."""
    baseline = scg.baselines.EMA(0.1)

    def step() -> None:
        with scg.Graph(structure=structure) as graph:
            c2f_program(model, batch, baseline)
        graph.surrogate_loss(discount=1.0, score_scale=1.0).backward()

    return step


def make_self_critical_step(
    structure: scg.Cached | scg.Declared | None, model: torch.nn.Module, batch: Batch
) -> Callable[[], None]:
    """One self-critical minibatch: the greedy rerun's reward, ``sampled_program`` in a graph of
    ``structure`` (None: tracked), surrogate, backward."""
    refs = reference_ids(batch.tgt, batch.tgt_mask)
    max_len = SIZES["T"]

    def step() -> None:
        greedy_cost = -greedy_rewards(model, batch, refs, max_len)
        with scg.Graph(structure=structure) as graph:
            sampled_program(model, batch, refs, greedy_cost, max_len)
        graph.surrogate_loss().backward()

    return step


STRUCTURES: dict[str, Callable[[], scg.Cached | scg.Declared | None]] = {
    "tracked": lambda: None,
    "Cached": scg.Cached,
    "Declared": scg.Declared,
}


def run(repeats: int) -> dict[str, Any]:
    model, batch = make_model_and_batch()
    steps = {
        (objective, name): make(structure(), model, batch)
        for objective, make in (("c2f", make_step), ("self-critical", make_self_critical_step))
        for name, structure in STRUCTURES.items()
    }
    for step in steps.values():  # warm-up: the structures' plans, the allocator
        step()
        step()
    times: dict[tuple[str, str], list[float]] = {key: [] for key in steps}
    for i in range(repeats):
        for key, step in steps.items():
            torch.manual_seed(i)  # the same draws for every graph in this repeat
            t0 = time.perf_counter()
            step()
            times[key].append(time.perf_counter() - t0)
    ms: dict[str, dict[str, float]] = {}
    for (objective, name), t in times.items():
        ms.setdefault(objective, {})[name] = 1e3 * statistics.median(t)
    return {
        "machine": f"{platform.processor() or platform.machine()} CPU ({os.cpu_count()} cores)",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "repeats": repeats,
        "sizes": SIZES,
        "ms": ms,
        "over_declared": {obj: {name: v / row["Declared"] for name, v in row.items()} for obj, row in ms.items()},
    }


def to_markdown(result: dict[str, Any], command: str) -> str:
    s = result["sizes"]
    lines = [
        "# The C2F model's scg objectives: the graph tracked, Cached or Declared (time per minibatch)",
        "",
        f"{result['machine']}, torch {result['torch']}, {result['threads']} thread(s); B = {s['B']} documents of "
        f"M = {s['M']} chunks x N = {s['N']} words, T = {s['T']} target tokens, vocabulary {s['V']}, hidden "
        f"{s['H']}; forward, surrogate and backward; median of {result['repeats']} alternating repeats. "
        f"Command: `{command}`.",
        "",
        "| objective | graph | ms per minibatch | / Declared |",
        "|---|---|---:|---:|",
    ]
    for objective, row in result["ms"].items():
        for name, ms in row.items():
            lines.append(f"| {objective} | {name} | {ms:.1f} | {result['over_declared'][objective][name]:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    result = run(args.repeats)
    command = " ".join(["OMP_NUM_THREADS=1 python benchmarks/c2f_objective_structure.py", *sys.argv[1:]])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "c2f_objective_structure.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "c2f_objective_structure.md").write_text(to_markdown(result, command))
    print(to_markdown(result, command))


if __name__ == "__main__":
    main()
