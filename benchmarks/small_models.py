"""Small models, where scg's per-node Python shows: scg ÷ hand-written time per gradient step.

Issue 25's workloads, each with a hand-written twin (plain PyTorch REINFORCE drawing the same
values in the same order, so that its gradient equals scg's: ``tests/benchmarks/test_small_models_smoke.py``):

* ``sbn``: sigmoid belief net, 2 layers of Bernoulli units q(h1|x) q(h2|h1), negative ELBO split
  into the cost each layer influences; an input-dependent learned baseline per layer (NVIL's,
  without its variance normalisation).
* ``ram``: recurrent attention model, T = 6 Gaussian glimpse locations (score function), the
  classification loss at the end, a learned baseline b(h_t) per step.
* ``sequence``: discrete latent sequence, T = 20 Categorical states, a per-example emission cost
  per step (reward-to-go credit).
* ``mixed``: Gumbel-softmax straight-through OneHotCategorical, a Categorical by REINFORCE with an
  EMA baseline, a reparameterised Normal, per-example costs.

scg runs tracked (``scg.Graph()``), ``scg.Cached()`` and ``scg.Declared()``; the step is forward +
surrogate + backward, the implementations alternate in one process (``measure`` of
``surrogate_overhead.py``), one thread. ``--compile``: the whole step of ``sequence`` (T = 5)
compiled with ``torch.compile(fullgraph=True)`` (inductor), scg Declared against the hand-written
step compiled the same way; and for every workload whether its declared step captures under
``fullgraph=True`` at all (dynamo's eager backend; a refusal is recorded with its message).

Per-node cost: a chain of N Bernoulli nodes (B = 32) each followed by a cost, against the same
chain by hand: µs per ``scg.sample`` / ``scg.cost`` call (the forward's extra time; the cost
calls separated by a variant with one final cost) and the surrogate's build time per node, for
growing N (``small_models.png``). ``--profile``: cProfile's top entries of one ``sbn`` step in
Declared and tracked mode. Results: ``benchmarks/results/small_models.{json,md,png}``.

    OMP_NUM_THREADS=1 python benchmarks/small_models.py [--quick] [--compile] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.distributions import (
    Bernoulli,
    Categorical,
    Independent,
    Normal,
    OneHotCategorical,
    RelaxedOneHotCategorical,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from surrogate_overhead import CPU, log, machine, warm_up
from surrogate_overhead import measure as overhead_measure

import scg

RESULTS = Path(__file__).resolve().parent / "results"
MODES = ("tracked", "cached", "declared")
Structure = scg.Declared | scg.Cached | None
Loss = Callable[[], torch.Tensor]
# The thread's CPU time, not the wall clock: on a machine shared by many processes a step of a
# few ms is often descheduled, which inflates wall-clock times several-fold (one torch thread,
# so the step's work is all on this thread).
clock = time.thread_time


def measure(
    fns: dict[str, Callable[[], None]], params: list[torch.Tensor], repeats: int, inner: int, warm: int = 3
) -> dict[str, float]:
    """Median CPU seconds per call of each function, alternating (``surrogate_overhead.measure`` on
    the thread's CPU clock)."""
    return overhead_measure(fns, params, repeats, inner, CPU, clock=clock, warm=warm)


@dataclass(kw_only=True, slots=True)
class Model:
    """One workload: the hand-written loss, scg's loss per structure, and the parameters."""

    hand_loss: Loss
    scg_loss: Callable[[Structure], Loss]
    params: list[torch.Tensor]


class _Draw:
    """Seeded values and parameters (the same numbers for every implementation)."""

    def __init__(self, seed: int = 0) -> None:
        self.gen = torch.Generator().manual_seed(seed)

    def randn(self, *shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=self.gen) * scale

    def param(self, i: int, o: int) -> torch.nn.Parameter:
        return torch.nn.Parameter(self.randn(i, o, scale=i**-0.5))

    def linear(self, i: int) -> torch.nn.Linear:
        lin = torch.nn.Linear(i, 1)
        with torch.no_grad():
            lin.weight.copy_(self.randn(1, i, scale=i**-0.5))
            lin.bias.zero_()
        return lin


@dataclass(kw_only=True, slots=True)
class SbnParts:
    """The belief net's data x (B, 2H), encoder q1 q2, decoder p1 px, prior logits p2, baselines."""

    x: torch.Tensor
    q1: torch.nn.Parameter
    q2: torch.nn.Parameter
    p1: torch.nn.Parameter
    px: torch.nn.Parameter
    p2: torch.nn.Parameter
    base1: torch.nn.Linear
    base2: torch.nn.Linear


def sbn_parts(batch: int, hidden: int) -> SbnParts:
    d = _Draw(0)
    dim = 2 * hidden
    x = (torch.rand(batch, dim, generator=d.gen) < 0.3).float()
    q1, q2, p1, px = d.param(dim, hidden), d.param(hidden, hidden), d.param(hidden, hidden), d.param(hidden, dim)
    p2 = torch.nn.Parameter(torch.zeros(hidden))
    base1, base2 = d.linear(dim), d.linear(hidden)
    return SbnParts(x=x, q1=q1, q2=q2, p1=p1, px=px, p2=p2, base1=base1, base2=base2)


def make_sbn(batch: int, hidden: int) -> Model:
    s = sbn_parts(batch, hidden)
    x, q1, q2, p1, px, p2, base1, base2 = s.x, s.q1, s.q2, s.p1, s.px, s.p2, s.base1, s.base2
    params = [q1, q2, p1, px, p2, *base1.parameters(), *base2.parameters()]

    def bern(logits: torch.Tensor) -> Independent:
        return Independent(Bernoulli(logits=logits, validate_args=False), 1, validate_args=False)

    def layer_costs(h1: torch.Tensor, lq1: torch.Tensor) -> torch.Tensor:
        return lq1 - bern(h1 @ px).log_prob(x)  # the terms only h1 influences, (B,)

    def top_cost(h1: torch.Tensor, h2: torch.Tensor, lq2: torch.Tensor) -> torch.Tensor:
        return lq2 - bern(h2 @ p1).log_prob(h1) - bern(p2).log_prob(h2)

    def hand_loss() -> torch.Tensor:
        d1 = bern(x @ q1)
        h1 = d1.sample()
        lq1 = d1.log_prob(h1)
        ca = layer_costs(h1, lq1)
        d2 = bern(h1 @ q2)
        h2 = d2.sample()
        lq2 = d2.log_prob(h2)
        cb = top_cost(h1, h2, lq2)
        c1, c2 = (ca + cb).detach(), cb.detach()
        b1, b2 = base1(x).squeeze(-1), base2(h1).squeeze(-1)
        return (
            ca.sum()
            + cb.sum()
            + (lq1 * (c1 - b1.detach())).sum()
            + (lq2 * (c2 - b2.detach())).sum()
            + ((b1 - c1) ** 2).mean()
            + ((b2 - c2) ** 2).mean()
        )

    bl1, bl2 = scg.baselines.Learned(base1), scg.baselines.Learned(base2)

    def scg_loss(structure: Structure) -> Loss:
        def loss() -> torch.Tensor:
            with scg.Graph(structure=structure) as g:
                d1 = bern(x @ q1)
                h1 = scg.sample(d1, name="h1", baseline=bl1.given(x))
                scg.cost(layer_costs(h1, d1.log_prob(h1)), name="c1")
                d2 = bern(h1 @ q2)
                h2 = scg.sample(d2, name="h2", baseline=bl2.given(h1))
                scg.cost(top_cost(h1, h2, d2.log_prob(h2)), name="c2")
            return g.surrogate_loss()

        return loss

    return Model(hand_loss=hand_loss, scg_loss=scg_loss, params=params)


@dataclass(kw_only=True, slots=True)
class RamParts:
    """The attention model's inputs x (B, 64), labels y, weights, learned baseline; its glimpse
    step and classifier (shared with the peers' versions, ``small_models_peers.py``)."""

    x: torch.Tensor
    y: torch.Tensor
    wx: torch.nn.Parameter
    wl: torch.nn.Parameter
    u: torch.nn.Parameter
    wm: torch.nn.Parameter
    wc: torch.nn.Parameter
    base: torch.nn.Linear

    def glimpse(self, h: torch.Tensor, loc: torch.Tensor) -> torch.Tensor:
        return torch.tanh(h @ self.u + torch.relu(self.x @ self.wx + loc @ self.wl))

    def classify(self, h: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(h @ self.wc, self.y, reduction="none")  # (B,)


def ram_parts(batch: int, hidden: int) -> RamParts:
    d = _Draw(1)
    feats, classes = 64, 10
    x = d.randn(batch, feats)
    y = torch.randint(classes, (batch,), generator=d.gen)
    wx, wl, u, wm, wc = (
        d.param(feats, hidden),
        d.param(2, hidden),
        d.param(hidden, hidden),
        d.param(hidden, 2),
        d.param(hidden, classes),
    )
    return RamParts(x=x, y=y, wx=wx, wl=wl, u=u, wm=wm, wc=wc, base=d.linear(hidden))


def make_ram(batch: int, hidden: int, steps: int = 6, sigma: float = 0.2) -> Model:
    r = ram_parts(batch, hidden)
    wm, base, glimpse, classify = r.wm, r.base, r.glimpse, r.classify
    params = [r.wx, r.wl, r.u, wm, r.wc, *base.parameters()]

    def where(h: torch.Tensor) -> Independent:
        return Independent(Normal(torch.tanh(h @ wm), sigma, validate_args=False), 1, validate_args=False)

    def hand_loss() -> torch.Tensor:
        h = torch.zeros(batch, hidden)
        logps, bs = [], []
        for _ in range(steps):
            dist = where(h)
            loc = dist.sample()
            logps.append(dist.log_prob(loc))
            bs.append(base(h.detach()).squeeze(-1))
            h = glimpse(h, loc)
        c = classify(h)
        r = c.detach()
        lp, b = torch.stack(logps), torch.stack(bs)
        return c.sum() + (lp * (r - b.detach())).sum() + ((b - r) ** 2).mean(1).sum()

    learned = scg.baselines.Learned(base)

    def scg_loss(structure: Structure) -> Loss:
        def loss() -> torch.Tensor:
            h = torch.zeros(batch, hidden)
            with scg.Graph(structure=structure) as g:
                for t in range(steps):
                    loc = scg.sample(
                        where(h), name="loc", step=t, estimator=scg.ScoreFunction(), baseline=learned.given(h)
                    )
                    h = glimpse(h, loc)
                scg.cost(classify(h), name="ce")
            return g.surrogate_loss()

        return loss

    return Model(hand_loss=hand_loss, scg_loss=scg_loss, params=params)


@dataclass(kw_only=True, slots=True)
class SequenceParts:
    """The latent sequence's weights and observed tokens (T, B); its transition + emission cost."""

    emb: torch.nn.Parameter
    u: torch.nn.Parameter
    wo: torch.nn.Parameter
    wx: torch.nn.Parameter
    tokens: torch.Tensor

    def step(self, h: torch.Tensor, z: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(h @ self.u + self.emb[z])
        return h, F.cross_entropy(h @ self.wx, self.tokens[t], reduction="none")


def sequence_parts(batch: int, hidden: int, steps: int = 20, states: int = 10, vocab: int = 16) -> SequenceParts:
    d = _Draw(2)
    emb, u, wo, wx = (d.param(states, hidden), d.param(hidden, hidden), d.param(hidden, states), d.param(hidden, vocab))
    tokens = torch.randint(vocab, (steps, batch), generator=d.gen)
    return SequenceParts(emb=emb, u=u, wo=wo, wx=wx, tokens=tokens)


def make_sequence(batch: int, hidden: int, steps: int = 20) -> Model:
    q = sequence_parts(batch, hidden, steps)
    wo, step = q.wo, q.step
    params = [q.emb, q.u, wo, q.wx]

    def hand_loss() -> torch.Tensor:
        h = torch.zeros(batch, hidden)
        logps, costs = [], []
        for t in range(steps):
            dist = Categorical(logits=h @ wo, validate_args=False)
            z = dist.sample()
            logps.append(dist.log_prob(z))
            h, c = step(h, z, t)
            costs.append(c)
        c = torch.stack(costs)
        rtg = c.detach().flip(0).cumsum(0).flip(0)
        return c.sum() + (torch.stack(logps) * rtg).sum()

    def scg_loss(structure: Structure) -> Loss:
        def loss() -> torch.Tensor:
            h = torch.zeros(batch, hidden)
            with scg.Graph(structure=structure) as g:
                for t in range(steps):
                    z = scg.sample(Categorical(logits=h @ wo, validate_args=False), name="z", step=t)
                    h, c = step(h, z, t)
                    scg.cost(c, name="c", step=t)
            return g.surrogate_loss()

        return loss

    return Model(hand_loss=hand_loss, scg_loss=scg_loss, params=params)


MIXED_TAU, MIXED_BETA = 0.5, 0.1  # the Gumbel-softmax temperature, the EMA baseline's rate


@dataclass(kw_only=True, slots=True)
class MixedParts:
    """The mixed model's inputs x and targets (B, H), weights and per-state prices; its
    REINFORCE node's distribution (``choose``) and the reparameterised Normal's (``move``)."""

    x: torch.Tensor
    target: torch.Tensor
    wa: torch.nn.Parameter
    wb: torch.nn.Parameter
    wcx: torch.nn.Parameter
    emb: torch.nn.Parameter
    wd: torch.nn.Parameter
    price: torch.Tensor

    def choose(self, y: torch.Tensor) -> Categorical:
        return Categorical(logits=y @ self.wb + self.x @ self.wcx, validate_args=False)

    def move(self, y: torch.Tensor, z: torch.Tensor) -> Normal:
        return Normal(self.emb[z] + y @ self.wd, 1.0, validate_args=False)


def mixed_parts(batch: int, hidden: int, states: int = 8) -> MixedParts:
    d = _Draw(3)
    x, target = d.randn(batch, hidden), d.randn(batch, hidden)
    wa, wb, wcx, emb, wd = (
        d.param(hidden, states),
        d.param(states, states),
        d.param(hidden, states),
        d.param(states, hidden),
        d.param(states, hidden),
    )
    return MixedParts(x=x, target=target, wa=wa, wb=wb, wcx=wcx, emb=emb, wd=wd, price=d.randn(states))


def make_mixed(batch: int, hidden: int, tau: float = MIXED_TAU, beta: float = MIXED_BETA) -> Model:
    m = mixed_parts(batch, hidden)
    x, target, wa, price, choose, move = m.x, m.target, m.wa, m.price, m.choose, m.move
    states = wa.shape[1]
    params = [wa, m.wb, m.wcx, m.emb, m.wd]
    ema_hand = [torch.zeros(())]

    def hand_loss() -> torch.Tensor:
        logits = x @ wa
        soft = RelaxedOneHotCategorical(torch.as_tensor(tau, dtype=logits.dtype), logits=logits).rsample(torch.Size())
        y = F.one_hot(soft.argmax(-1), states).to(soft.dtype) + (soft - soft.detach())
        c1 = (y * price).sum(-1)
        dz = choose(y)
        z = dz.sample()
        e = move(y, z).rsample()
        c2 = ((e - target) ** 2).sum(-1)
        r = c2.detach()
        b = ema_hand[0]
        ema_hand[0] = b + beta * (r.mean() - b)
        return c1.sum() + c2.sum() + (dz.log_prob(z) * (r - b)).sum()

    ema = scg.baselines.EMA(beta)
    straight = scg.estimators.GumbelSoftmax(tau, hard=True)

    def scg_loss(structure: Structure) -> Loss:
        def loss() -> torch.Tensor:
            with scg.Graph(structure=structure) as g:
                y = scg.sample(OneHotCategorical(logits=x @ wa, validate_args=False), name="y", estimator=straight)
                scg.cost((y * price).sum(-1), name="price")
                z = scg.sample(choose(y), name="z", baseline=ema)
                e = scg.sample(move(y, z), name="e")
                scg.cost(((e - target) ** 2).sum(-1), name="fit")
            return g.surrogate_loss()

        return loss

    return Model(hand_loss=hand_loss, scg_loss=scg_loss, params=params)


WORKLOADS: dict[str, tuple[str, Callable[..., Model]]] = {
    "sbn": ("sigmoid belief net, 2 Bernoulli layers, learned (NVIL) baselines", make_sbn),
    "ram": ("recurrent attention, T=6 Gaussian glimpses, learned baseline", make_ram),
    "sequence": ("discrete latent sequence, T=20", make_sequence),
    "mixed": ("Gumbel-ST + REINFORCE (EMA) + reparameterised Normal", make_mixed),
}


def steps(model: Model) -> tuple[Callable[[], None], dict[str, Callable[[], None]]]:
    """The gradient steps (forward + surrogate + backward): hand-written and one per mode."""

    def step(loss: Loss) -> Callable[[], None]:
        def run() -> None:
            loss().backward()

        return run

    structures: dict[str, Structure] = {
        "tracked": None,
        "cached": scg.Cached(check_every=100),
        "declared": scg.Declared(),
    }
    return step(model.hand_loss), {m: step(model.scg_loss(s)) for m, s in structures.items()}


def _inner(fn: Callable[[], None], params: list[torch.Tensor], floor_s: float = 0.004) -> int:
    """Calls per timed block so that a block lasts about ``floor_s`` (one call timed)."""
    t0 = clock()
    fn()
    for p in params:
        p.grad = None
    return max(1, min(50, round(floor_s / max(clock() - t0, 1e-6))))


def overhead(
    repeats: int, batches: list[int], hidden: int, names: list[str] | None = None, floor_s: float = 0.004
) -> list[dict[str, Any]]:
    """One row per (workload, batch): median ms per step and the ratio to hand-written."""
    rows = []
    for name in names or list(WORKLOADS):
        label, make = WORKLOADS[name]
        for b in batches:
            model = make(b, hidden)
            hand, modes = steps(model)
            inner = _inner(hand, model.params, floor_s)
            med = measure({"hand": hand, **modes}, model.params, repeats, inner, 1 if floor_s == 0 else 3)
            row: dict[str, Any] = {
                "workload": name,
                "label": label,
                "batch": b,
                "hidden": hidden,
                "inner": inner,
                "hand_ms": med["hand"] * 1e3,
            }
            for m in MODES:
                row[f"{m}_ms"] = med[m] * 1e3
                row[f"{m}_ratio"] = med[m] / med["hand"]
            rows.append(row)
            log(
                f"{name:8s} B={b:3d} H={hidden} hand {row['hand_ms']:8.3f} ms  "
                + "  ".join(f"{m} {row[m + '_ratio']:.3f}" for m in MODES)
            )
    return rows


def chain(n: int, per_node_costs: bool, batch: int = 32) -> tuple[Model, Callable[[Structure], scg.Graph]]:
    """N Bernoulli nodes in a chain, a cost after each (or one cost at the end): the model and
    scg's forward pass alone (the graph returned, its surrogate not built)."""
    theta = torch.nn.Parameter(torch.zeros(n))

    def hand_loss() -> torch.Tensor:
        b = torch.zeros(batch)
        lps, costs = [], []
        for i in range(n):
            dist = Bernoulli(logits=theta[i] + b, validate_args=False)
            b = dist.sample()
            lps.append(dist.log_prob(b))
            costs.append(b)
        c = torch.stack(costs)
        credit = c.flip(0).cumsum(0).flip(0) if per_node_costs else c.sum(0)
        return c.sum() + (torch.stack(lps) * credit).sum()

    def forward(structure: Structure) -> scg.Graph:
        b = torch.zeros(batch)
        with scg.Graph(structure=structure) as g:
            bs = []
            for i in range(n):
                b = scg.sample(Bernoulli(logits=theta[i] + b, validate_args=False), name="b", step=i)
                if per_node_costs:
                    scg.cost(b, name="c", step=i)
                else:
                    bs.append(b)
            if not per_node_costs:
                scg.cost(sum(bs[1:], bs[0]), name="c")  # (B,)
        return g

    def scg_loss(structure: Structure) -> Loss:
        return lambda: forward(structure).surrogate_loss()

    return Model(hand_loss=hand_loss, scg_loss=scg_loss, params=[theta]), forward


def _phases(
    hand_loss: Loss, forward: Callable[[Structure], scg.Graph], structure: Structure, repeats: int
) -> dict[str, float]:
    """Median seconds of the hand-written loss, scg's forward (graph building) and scg's
    surrogate, alternating (two warm-up rounds dropped)."""
    fwd, sur, hand = [], [], []
    for _ in range(repeats + 2):
        t0 = clock()
        hand_loss()
        t1 = clock()
        g = forward(structure)
        t2 = clock()
        g.surrogate_loss()
        t3 = clock()
        hand.append(t1 - t0)
        fwd.append(t2 - t1)
        sur.append(t3 - t2)
    return {
        "hand": statistics.median(hand[2:]),
        "forward": statistics.median(fwd[2:]),
        "surrogate": statistics.median(sur[2:]),
    }


def per_node(repeats: int, sizes: list[int]) -> list[dict[str, Any]]:
    """µs per scg.sample / scg.cost call and surrogate build µs per node, per mode and N.

    A call's cost is scg's forward minus the hand-written loss (which also makes its surrogate
    sums), per node; the cost calls are separated by the variant with one final cost."""
    out = []
    for n in sizes:
        row: dict[str, Any] = {"N": n}
        for m in MODES:
            res = {}
            for per_cost in (True, False):
                model, forward = chain(n, per_cost)
                structure: Structure = {
                    "tracked": None,
                    "cached": scg.Cached(check_every=100),
                    "declared": scg.Declared(),
                }[m]
                res[per_cost] = _phases(model.hand_loss, forward, structure, repeats)
            both, samples = res[True], res[False]
            pair = (both["forward"] - both["hand"]) / n
            sample_only = (samples["forward"] - samples["hand"]) / n
            row[f"{m}_sample_us"] = sample_only * 1e6
            row[f"{m}_cost_us"] = (pair - sample_only) * 1e6
            row[f"{m}_surrogate_us_per_node"] = both["surrogate"] / n * 1e6
            for key, phases in (("", both), ("one_cost_", samples)):
                for phase in ("forward", "surrogate", "hand"):
                    row[f"{m}_{key}{phase}_ms"] = phases[phase] * 1e3
        out.append(row)
        log(
            f"N={n:4d} "
            + "  ".join(
                f"{m}: sample {row[m + '_sample_us']:.1f} cost {row[m + '_cost_us']:.1f} "
                f"surrogate/node {row[m + '_surrogate_us_per_node']:.1f} µs"
                for m in MODES
            )
        )
    return out


def compiled_rows(repeats: int, batch: int = 16, hidden: int = 32) -> list[dict[str, Any]]:
    """The whole step compiled with fullgraph=True: sequence (T=5) with inductor, timed; and
    whether each workload's declared step captures at all (dynamo's eager backend)."""
    rows: list[dict[str, Any]] = []
    makers: dict[str, Callable[[], Model]] = {
        "sequence": lambda: make_sequence(batch, hidden, steps=5),
        "sbn": lambda: make_sbn(batch, hidden),
        "ram": lambda: make_ram(batch, hidden),
        "mixed": lambda: make_mixed(batch, hidden),
    }
    for name, make in makers.items():
        backend = "inductor" if name == "sequence" else "eager"
        row: dict[str, Any] = {"workload": name, "batch": batch, "hidden": hidden, "backend": backend}
        start = time.perf_counter()
        torch._dynamo.reset()
        try:
            model = make()
            hand_c = torch.compile(model.hand_loss, fullgraph=True, dynamic=False, backend=backend)
            decl_c = torch.compile(model.scg_loss(scg.Declared()), fullgraph=True, dynamic=False, backend=backend)

            def run(fn: Loss) -> Callable[[], None]:
                return lambda: fn().backward()

            row["compile_s"] = warm_up([run(hand_c), run(decl_c)], CPU)
            if backend == "inductor":
                eager_hand, eager_modes = steps(model)
                med = measure(
                    {"hand": run(hand_c), "declared": run(decl_c), "eager_hand": eager_hand}, model.params, repeats, 1
                )
                row.update({k + "_ms": v * 1e3 for k, v in med.items()})
                row["ratio"] = med["declared"] / med["hand"]
            else:
                row["captured"] = True
        except Exception as e:  # a refusal or failure is the result to report
            row["error"] = f"{type(e).__name__}: {e}"[:1500]
        row["wall_s"] = time.perf_counter() - start
        rows.append(row)
        log(
            f"compile {name}: "
            + (row["error"].splitlines()[0][:200] if "error" in row else f"ok ({row.get('ratio', 'captured')})")
        )
    return rows


AREAS = (
    ("scg/graph", "scg: graph building (scg/graph)"),
    ("scg/credit", "scg: surrogate (scg/credit)"),
    ("scg/baselines", "scg: baselines"),
    ("scg/", "scg: other"),
    ("torch/distributions", "torch.distributions (Python)"),
    ("torch/", "torch, other Python"),
    ("benchmarks/", "the model's own Python"),
)
ENTRY_POINTS = {
    "scg.sample": ("scg/graph/build.py", "sample"),
    "scg.cost": ("scg/graph/build.py", "cost"),
    "surrogate_loss": ("scg/credit/surrogate.py", "surrogate_loss"),
    "backward (autograd engine)": ("~", "<method 'run_backward' of 'torch._C._EngineBase' objects>"),
}


def _area(file: str, func: str) -> str:
    if file == "~":
        return "autograd backward (C++)" if "run_backward" in func else "builtins and torch ops (C)"
    short = _short(file)
    return next((name for key, name in AREAS if short.startswith(key)), "other Python")


def profile(batch: int = 32, hidden: int = 32, calls: int = 200, top: int = 12) -> dict[str, dict[str, Any]]:
    """cProfile of ``sbn`` steps in Declared and tracked mode, on the thread's CPU clock: own
    time by area (scg's modules, torch's Python, the C ops), the cumulative time of scg's entry
    points, and the top entries by own time (µs per step)."""
    out = {}
    model = make_sbn(batch, hidden)
    _, modes = steps(model)
    for m in ("declared", "tracked"):
        fn = modes[m]
        for _ in range(3):
            fn()
        prof = cProfile.Profile(clock)
        prof.enable()
        for _ in range(calls):
            fn()
            for p in model.params:
                p.grad = None
        prof.disable()
        stats = pstats.Stats(prof, stream=io.StringIO())
        total = stats.total_tt  # type: ignore[attr-defined]
        entries, areas, entry = [], dict.fromkeys([n for _, n in AREAS], 0.0), {}
        for (file, line, func), (_, ncalls, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
            area = _area(file, func)
            areas[area] = areas.get(area, 0.0) + tt / calls * 1e6
            for name, (where, fname) in ENTRY_POINTS.items():
                if func == fname and _short(file) == where:
                    entry[name] = {"calls": ncalls / calls, "cum_us": ct / calls * 1e6}
            entries.append(
                {
                    "function": f"{_short(file)}:{line}({func})",
                    "calls": ncalls / calls,
                    "own_us": tt / calls * 1e6,
                    "cum_us": ct / calls * 1e6,
                    "own_share": tt / total,
                }
            )
        entries.sort(key=lambda e: -e["own_us"])
        out[m] = {"step_us": total / calls * 1e6, "areas": areas, "entry_points": entry, "top": entries[:top]}
        log(f"profile {m}: {total / calls * 1e6:.0f} µs per step under cProfile")
    return out


def _short(file: str) -> str:
    for key in ("/scg/", "/torch/", "/benchmarks/"):
        if key in file:
            return key.strip("/") + "/" + file.split(key, 1)[1]
    return file


def slopes(points: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per mode, least-squares slopes against N (µs per node): scg's forward over the
    hand-written one per sample + cost pair and per sample (one final cost), the cost call as
    their difference, the surrogate's build; and the fixed part of a graph (the pair fit's
    intercept, µs), which divides into the per-N values at small N."""
    ns = torch.tensor([float(p["N"]) for p in points], dtype=torch.float64)
    design = torch.stack([ns, torch.ones_like(ns)], 1)

    def fit(ys: list[float]) -> tuple[float, float]:
        sol = torch.linalg.lstsq(design, torch.tensor(ys, dtype=torch.float64)[:, None]).solution
        return float(sol[0, 0]), float(sol[1, 0])

    out = {}
    for m in MODES:
        pair, fixed = fit([(p[f"{m}_forward_ms"] - p[f"{m}_hand_ms"]) * 1e3 for p in points])
        sample, _ = fit([(p[f"{m}_one_cost_forward_ms"] - p[f"{m}_one_cost_hand_ms"]) * 1e3 for p in points])
        surrogate, surrogate_fixed = fit([p[f"{m}_surrogate_ms"] * 1e3 for p in points])
        out[m] = {
            "sample_us": sample,
            "cost_us": pair - sample,
            "pair_us": pair,
            "graph_fixed_us": fixed,
            "surrogate_us_per_node": surrogate,
            "surrogate_fixed_us": surrogate_fixed,
        }
    return out


def plot(points: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    ns = [p["N"] for p in points]
    for ax, key, title in zip(
        axes,
        ("sample_us", "cost_us", "surrogate_us_per_node"),
        ("µs per scg.sample", "µs per scg.cost", "surrogate build, µs per node"),
    ):
        for m in MODES:
            ax.plot(ns, [p[f"{m}_{key}"] for p in points], marker="o", label=m)
        ax.set_xscale("log")
        ax.set_xlabel("nodes N (chain of Bernoulli, B=32)")
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


TARGETS = {"tracked": 1.5, "cached": 1.15, "declared": 1.10}


def _slope_lines(pts: list[dict[str, Any]]) -> list[str]:
    if len(pts) < 2:
        return []
    lines = [
        "Slopes against N (least squares; µs per node) and the fixed part per graph (µs):",
        "",
        "| mode | scg.sample | scg.cost | sample + cost | fixed per graph | surrogate per node | surrogate fixed |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for m, f in slopes(pts).items():
        lines.append(
            f"| {m} | {f['sample_us']:.1f} | {f['cost_us']:.1f} | {f['pair_us']:.1f} | "
            f"{f['graph_fixed_us']:.0f} | {f['surrogate_us_per_node']:.1f} | "
            f"{f['surrogate_fixed_us']:.0f} |"
        )
    return [*lines, ""]


def _reason(error: str) -> str:
    """The first line of a compile error, or the exception dynamo observed in the traced code
    (``Unsupported: Observed exception`` hides it in its developer context)."""
    mark = "raised exception "
    for line in error.splitlines():
        if mark in line:
            return line.split(mark, 1)[1][:400]
    return error.splitlines()[0][:400]


def render(data: dict[str, Any], path: Path) -> None:
    meta = data["meta"]
    lines = [
        "# Small models: scg vs hand-written (median time per gradient step)",
        "",
        f"torch {meta['torch']}, {meta['threads']} thread(s), {meta['repeats']} alternating "
        f"repeats; load average at the start {meta['load_average_1_5_15']} on "
        f"{meta['cpus']} cores (absolute times inflated by the load; ratios alternate in one "
        f"run). Command: `{meta['command']}`.",
        "",
        "Targets at batch >= 32: tracked <= 1.5, Cached <= 1.15, Declared <= 1.10 (a miss is marked *).",
        "",
        "| workload | B | H | hand (ms) | tracked / hand | Cached / hand | Declared / hand |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data["rows"]:
        cells = []
        for m in MODES:
            miss = r["batch"] >= 32 and r[f"{m}_ratio"] > TARGETS[m]
            cells.append(f"{r[f'{m}_ratio']:.3f}{' *' if miss else ''}")
        lines.append(
            f"| {r['label']} | {r['batch']} | {r['hidden']} | {r['hand_ms']:.3f} | " + " | ".join(cells) + " |"
        )
    if data.get("compile"):
        lines += ["", "## Whole step under torch.compile(fullgraph=True)", ""]
        for c in data["compile"]:
            head = f"- `{c['workload']}` (B={c['batch']}, H={c['hidden']}, {c['backend']}): "
            if "error" in c:
                lines.append(head + "not compiled: `" + _reason(c["error"]) + "`")
            elif "ratio" in c:
                lines.append(
                    head + f"scg Declared {c['declared_ms']:.3f} ms, hand-written "
                    f"{c['hand_ms']:.3f} ms compiled: {c['ratio']:.3f}x (eager hand "
                    f"{c['eager_hand_ms']:.3f} ms; compile + warm-up {c['compile_s']:.0f} s)"
                )
            else:
                lines.append(head + "captured whole (eager backend, not timed)")
    pts = data.get("per_node")
    if pts:
        lines += [
            "",
            "## Per-node cost (chain of N Bernoulli nodes, B=32; `small_models.png`)",
            "",
            "Thread CPU time of scg's forward minus the hand-written loss's, and the surrogate's "
            "build, medians of alternating runs.",
            "",
            *_slope_lines(pts),
            "Each N (per call: the difference / N, so a per-graph constant inflates small N):",
            "",
            "| N | " + " | ".join(f"{m} sample | {m} cost | {m} surrogate/node" for m in MODES) + " |",
            "|---:|" + "---:|" * 9,
        ]
        for p in pts:
            lines.append(
                f"| {p['N']} | "
                + " | ".join(
                    f"{p[m + '_sample_us']:.1f} | {p[m + '_cost_us']:.1f} | {p[m + '_surrogate_us_per_node']:.1f}"
                    for m in MODES
                )
                + " |"
            )
    prof = data.get("profile")
    for m, p in (prof or {}).items():
        step = p["step_us"]
        lines += [
            "",
            f"## cProfile, sbn B=32 H=32, {m} ({step:.0f} µs per step under the profiler, thread CPU time)",
            "",
            "Own time by area:",
            "",
            "| area | µs / step | share |",
            "|---|---:|---:|",
        ]
        lines += [
            f"| {a} | {us:.0f} | {us / step:.1%} |"
            for a, us in sorted(p["areas"].items(), key=lambda kv: -kv[1])
            if us > 0
        ]
        lines += [
            "",
            "Entry points (cumulative):",
            "",
            "| call | calls / step | µs / step | share |",
            "|---|---:|---:|---:|",
        ]
        lines += [
            f"| `{n}` | {e['calls']:.0f} | {e['cum_us']:.0f} | {e['cum_us'] / step:.1%} |"
            for n, e in p["entry_points"].items()
        ]
        lines += [
            "",
            "Top entries by own time:",
            "",
            "| function | calls / step | own µs / step | share |",
            "|---|---:|---:|---:|",
        ]
        lines += [
            f"| `{e['function']}` | {e['calls']:.0f} | {e['own_us']:.1f} | {e['own_share']:.1%} |" for e in p["top"]
        ]
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes and 1 repeat (a smoke run; the numbers mean nothing)"
    )
    parser.add_argument("--batch", type=int, nargs="+", default=None, metavar="B")
    parser.add_argument("--hidden", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument(
        "--nodes",
        type=int,
        nargs="+",
        default=None,
        metavar="N",
        help="chain lengths of the per-node scan (default 4 16 64 256)",
    )
    parser.add_argument("--compile", action="store_true", help="add the torch.compile rows")
    parser.add_argument("--profile", action="store_true", help="add the cProfile breakdown")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--render", action="store_true", help="rewrite the .md and .png from the .json")
    parser.add_argument(
        "--add-profile", action="store_true", help="run only the cProfile breakdown and add it to the existing .json"
    )
    args = parser.parse_args(argv)
    quick = args.quick
    batches = args.batch or ([2] if quick else [1, 32, 256])
    hidden = args.hidden or (8 if quick else 32)
    repeats = args.repeats or (1 if quick else 15)
    nodes = args.nodes or ([2, 4] if quick else [4, 16, 64, 256])
    for name, v in (("batch", batches), ("nodes", nodes), ("hidden", [hidden]), ("repeats", [repeats])):
        if min(v) < 1:
            parser.error(f"--{name} must be >= 1, got {v}")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {**machine(CPU), "repeats": repeats, "batches": batches, "hidden": hidden, "quick": quick}
    if argv is not None:
        meta["command"] = "python benchmarks/small_models.py " + " ".join(argv)
    data: dict[str, Any] = {"meta": meta}
    json_path, md_path = args.out / "small_models.json", args.out / "small_models.md"
    if args.render or args.add_profile:
        data = json.loads(json_path.read_text())
        if args.add_profile:
            torch.set_num_threads(1)
            data["profile"] = profile(calls=5 if quick else 200)
            data["meta"]["profile_load_average"] = machine(CPU)["load_average_1_5_15"]
            json_path.write_text(json.dumps(data, indent=2) + "\n")
        render(data, md_path)
        plot(data["per_node"], args.out / "small_models.png")
        return data

    def save() -> None:
        json_path.write_text(json.dumps(data, indent=2) + "\n")
        render(data, md_path)

    data["rows"] = overhead(repeats, batches, hidden, floor_s=0.0 if quick else 0.004)
    save()
    data["per_node"] = per_node(repeats, nodes)
    save()
    plot(data["per_node"], args.out / "small_models.png")
    if args.profile:
        data["profile"] = profile(calls=5 if quick else 200)
        save()
    if args.compile:
        data["compile"] = compiled_rows(max(5, repeats // 2))
        save()
    log(f"wrote {json_path} and {md_path}")
    return data


if __name__ == "__main__":
    main()
