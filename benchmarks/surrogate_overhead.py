"""Time per gradient step: scg's surrogate vs the same estimator written by hand in plain torch.

Workloads (both with the score-function estimator and per-example credit):

* ``hard_attention``: a T=30-step hard-attention loop, batch 32, M=10 chunks, hidden 256 (and 64).
  At each step a Categorical over the chunks is sampled, the chosen chunk gathered with
  ``H[arange(B), z]``, a tanh recurrence updated and a per-example cost added. The hand-written
  reference computes the reward-to-go with a reversed cumsum and one surrogate sum.
* ``toy``: Categorical(5) then a 3-step Bernoulli chain, 4 costs.

Runs alternate between the two implementations (to share machine noise), and the report gives
medians and the ratio scg / hand-written. Results: ``benchmarks/results/surrogate_overhead.{json,md}``.

    python benchmarks/surrogate_overhead.py [--repeats 40]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.distributions import Bernoulli, Categorical

import scg

RESULTS = Path(__file__).resolve().parent / "results"


def make_attention(hidden: int, batch: int = 32, chunks: int = 10, steps: int = 30):  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(0)
    enc = torch.randn(batch, chunks, hidden, generator=gen)
    w = torch.nn.Parameter(torch.randn(hidden, hidden, generator=gen) / hidden**0.5)
    u = torch.nn.Parameter(torch.randn(hidden, hidden, generator=gen) / hidden**0.5)
    q = torch.nn.Parameter(torch.randn(hidden, hidden, generator=gen) / hidden**0.5)
    target = torch.randn(steps, batch, hidden, generator=gen)
    params = [w, u, q]
    rows = torch.arange(batch)

    def hand() -> None:
        h = torch.zeros(batch, hidden)
        logps, costs = [], []
        for t in range(steps):
            scores = torch.bmm(enc, (h @ q)[:, :, None]).squeeze(-1)  # (B, M)
            d = Categorical(logits=scores, validate_args=False)
            z = d.sample()
            logps.append(d.log_prob(z))
            h = torch.tanh(enc[rows, z] @ w + h @ u)
            costs.append(((h - target[t]) ** 2).sum(-1))
        c = torch.stack(costs)
        rtg = c.detach().flip(0).cumsum(0).flip(0)
        loss = (torch.stack(logps) * rtg).sum() + c.sum()
        loss.backward()

    def with_scg() -> None:
        h = torch.zeros(batch, hidden)
        with scg.Graph() as g:
            for t in range(steps):
                scores = torch.bmm(enc, (h @ q)[:, :, None]).squeeze(-1)  # (B, M)
                z = scg.sample(Categorical(logits=scores, validate_args=False), name="z", step=t)
                h = torch.tanh(enc[rows, z] @ w + h @ u)
                scg.cost(((h - target[t]) ** 2).sum(-1), name="c", step=t)
        g.surrogate_loss().backward()

    return hand, with_scg, params


def make_toy():  # type: ignore[no-untyped-def]
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

    def with_scg() -> None:
        with scg.Graph() as g:
            z = scg.sample(Categorical(logits=theta, validate_args=False), name="z")
            scg.cost((z.float() - 2.0) ** 2, name="c0")
            b = z.float() / 4.0
            for t in range(3):
                b = scg.sample(Bernoulli(logits=phi[t] + b, validate_args=False), name="b", step=t)
                scg.cost(b * (t + 1.0), name="c", step=t)
        g.surrogate_loss().backward()

    return hand, with_scg, [theta, phi]


def measure(fns: dict[str, Callable[[], None]], params: list[torch.Tensor],
            repeats: int, inner: int) -> dict[str, float]:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1 keeps timings stable on a shared machine)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = []
    for label, (hand, ours, params), inner in [
        ("hard_attention T=30 B=32 H=256", make_attention(256), 1),
        ("hard_attention T=30 B=32 H=64", make_attention(64), 2),
        ("toy Categorical(5)+3 Bernoulli, 4 costs", make_toy(), 20),
    ]:
        med = measure({"hand": hand, "scg": ours}, params, args.repeats, inner)
        rows.append({"workload": label, "hand_ms": med["hand"] * 1e3, "scg_ms": med["scg"] * 1e3,
                     "ratio": med["scg"] / med["hand"]})
        print(f"{label:45s} hand {med['hand'] * 1e3:8.3f} ms  scg {med['scg'] * 1e3:8.3f} ms  "
              f"ratio {med['scg'] / med['hand']:.3f}")
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"torch": torch.__version__, "python": platform.python_version(),
            "machine": platform.machine(), "threads": torch.get_num_threads(),
            "repeats": args.repeats, "target_ratio": 1.10}
    (args.out / "surrogate_overhead.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                                 indent=2) + "\n")
    lines = ["# Surrogate overhead: scg vs hand-written (median time per gradient step)", "",
             f"torch {meta['torch']}, {meta['threads']} threads, {args.repeats} alternating "
             "repeats. Reproduce: `python benchmarks/surrogate_overhead.py`.", "",
             "| workload | hand-written (ms) | scg (ms) | ratio |", "|---|---:|---:|---:|"]
    lines += [f"| {r['workload']} | {r['hand_ms']:.3f} | {r['scg_ms']:.3f} | {r['ratio']:.3f} |"
              for r in rows]
    (args.out / "surrogate_overhead.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
