"""Issue 25's small-model workloads, each with a hand-written twin: plain PyTorch REINFORCE
drawing the same values in the same order, so that its gradient equals scg's in every mode
(``tests/benchmarks/test_small_models_smoke.py``). ``small_models.py`` times them,
``small_models_peers.py`` writes them for Pyro and Storchastic from the same parameters (``*_parts``).

* ``sbn``: sigmoid belief net, 2 layers of Bernoulli units q(h1|x) q(h2|h1), negative ELBO split
  into the cost each layer influences; an input-dependent learned baseline per layer (NVIL's,
  without its variance normalisation).
* ``ram``: recurrent attention model, T = 6 Gaussian glimpse locations (score function), the
  classification loss at the end, a learned baseline b(h_t) per step.
* ``sequence``: discrete latent sequence, T = 20 Categorical states, a per-example emission cost
  per step (reward-to-go credit).
* ``mixed``: Gumbel-softmax straight-through OneHotCategorical, a Categorical by REINFORCE with an
  EMA baseline, a reparameterised Normal, per-example costs.
* ``toy``: ``estimators.py``'s toy (the values of its ``make_problem``): Categorical(5), then a
  3-step Bernoulli chain, 4 costs (reward-to-go credit), for B examples sharing the logits; no
  hidden layer.
* ``attention``: the hard-attention loop of ``surrogate_overhead.py`` and ``estimators.py`` (the
  values of ``estimators.make_problem``): T = 30 steps, a Categorical over M = 10 encoded chunks,
  the chosen chunk gathered, a tanh recurrence and a per-example cost each step (reward-to-go).
* ``chain``: N Bernoulli nodes in a chain (the per-node scan).

``sequence`` and ``attention`` share their loop (``_categorical_loop``): a Categorical per step
from the state, a recurrence and a cost per step.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

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
from torch.overrides import TorchFunctionMode

import scg

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # estimators.py, when a test imports this file by path
    sys.path.insert(0, _HERE)
import estimators  # noqa: E402

MODES = ("tracked", "cached", "declared")
# The thread's CPU time, not the wall clock: on a machine shared by many processes a step of a
# few ms is often descheduled, which inflates wall-clock times several-fold (one torch thread,
# so the step's work is all on this thread).
clock = time.thread_time
Structure = scg.Declared | scg.Cached | None
Loss = Callable[[], torch.Tensor]


def structure(mode: str) -> Structure:
    """A fresh structure of a mode: ``None`` (tracked), ``Cached`` or ``Declared``."""
    return {"tracked": None, "cached": scg.Cached(check_every=100), "declared": scg.Declared()}[mode]


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
                scg.cost(layer_costs(h1, scg.log_prob(h1)), name="c1")
                d2 = bern(h1 @ q2)
                h2 = scg.sample(d2, name="h2", baseline=bl2.given(h1))
                scg.cost(top_cost(h1, h2, scg.log_prob(h2)), name="c2")
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


def _categorical_loop(
    batch: int,
    hidden: int,
    steps: int,
    logits: Callable[[torch.Tensor], torch.Tensor],
    step: Callable[[torch.Tensor, torch.Tensor, int], tuple[torch.Tensor, torch.Tensor]],
) -> tuple[Loss, Callable[[Structure], Loss]]:
    """A state h (B, hidden) from zeros, per step a Categorical(logits(h)) state z, the recurrence
    ``step(h, z, t)`` -> (h, per-example cost): the hand-written loss (reward-to-go by a reversed
    cumsum) and scg's loss per structure (a sample and a cost per step)."""

    def hand_loss() -> torch.Tensor:
        h = torch.zeros(batch, hidden)
        logps, costs = [], []
        for t in range(steps):
            dist = Categorical(logits=logits(h), validate_args=False)
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
                    z = scg.sample(Categorical(logits=logits(h), validate_args=False), name="z", step=t)
                    h, c = step(h, z, t)
                    scg.cost(c, name="c", step=t)
            return g.surrogate_loss()

        return loss

    return hand_loss, scg_loss


def make_sequence(batch: int, hidden: int, steps: int = 20) -> Model:
    q = sequence_parts(batch, hidden, steps)
    wo = q.wo
    hand_loss, scg_loss = _categorical_loop(batch, hidden, steps, lambda h: h @ wo, q.step)
    return Model(hand_loss=hand_loss, scg_loss=scg_loss, params=[q.emb, q.u, wo, q.wx])


@dataclass(kw_only=True, slots=True)
class AttentionParts:
    """The hard-attention loop's encoded chunks enc (B, M, H), targets (T, B, H) and weights w, u,
    q (``estimators.make_problem("attention")``'s values); its attention scores and recurrence
    (``surrogate_overhead.py``'s ``attend`` and ``recur``)."""

    enc: torch.Tensor
    target: torch.Tensor
    w: torch.Tensor
    u: torch.Tensor
    q: torch.Tensor
    rows: torch.Tensor

    def attend(self, h: torch.Tensor) -> torch.Tensor:
        return torch.bmm(self.enc, (h @ self.q)[:, :, None]).squeeze(-1)  # (B, M)

    def step(self, h: torch.Tensor, z: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(self.enc[self.rows, z] @ self.w + h @ self.u)  # (B, H)
        return h, ((h - self.target[t]) ** 2).sum(-1)  # (B,)


def attention_problem(batch: int, hidden: int, steps: int = 30, chunks: int = 10) -> estimators.Problem:
    """``estimators.py``'s attention problem at this size (its peers' versions run on it)."""
    return estimators.make_problem("attention", {"T": steps, "B": batch, "M": chunks, "H": hidden})


def attention_parts(batch: int, hidden: int, steps: int = 30, chunks: int = 10) -> AttentionParts:
    prob = attention_problem(batch, hidden, steps, chunks)
    w, u, q = prob.params
    enc, target = prob.data["enc"], prob.data["target"]
    return AttentionParts(enc=enc, target=target, w=w, u=u, q=q, rows=torch.arange(batch))


def make_attention(batch: int, hidden: int, steps: int = 30, chunks: int = 10) -> Model:
    a = attention_parts(batch, hidden, steps, chunks)
    hand_loss, scg_loss = _categorical_loop(batch, hidden, steps, a.attend, a.step)
    return Model(hand_loss=hand_loss, scg_loss=scg_loss, params=[a.w, a.u, a.q])


@dataclass(kw_only=True, slots=True)
class ToyParts:
    """The toy's logits, shared by the B examples: theta (5,) of the Categorical, phi (3,) of the
    Bernoulli chain (``estimators.make_problem("toy")``'s values); its costs and links."""

    theta: torch.Tensor
    phi: torch.Tensor

    @staticmethod
    def first_cost(z: torch.Tensor) -> torch.Tensor:
        return (z.float() - 2.0) ** 2

    @staticmethod
    def link(z: torch.Tensor) -> torch.Tensor:
        return z.float() / 4.0  # the chain's first input

    @staticmethod
    def chain_cost(b: torch.Tensor, t: int) -> torch.Tensor:
        return b * (t + 1.0)


TOY_LINKS = 3


def toy_parts() -> ToyParts:
    theta, phi = estimators.make_problem("toy", {}).params
    return ToyParts(theta=theta, phi=phi)


def make_toy(batch: int, hidden: int = 0) -> Model:
    """The toy for ``batch`` examples (``hidden`` is not used: the toy has no hidden layer; it is
    taken so that every workload is made alike)."""
    p = toy_parts()
    theta, phi = p.theta, p.phi

    def hand_loss() -> torch.Tensor:
        d0 = Categorical(logits=theta.expand(batch, -1), validate_args=False)
        z = d0.sample()
        lps, costs = [d0.log_prob(z)], [p.first_cost(z)]
        b = p.link(z)
        for t in range(TOY_LINKS):
            d = Bernoulli(logits=phi[t] + b, validate_args=False)
            b = d.sample()
            lps.append(d.log_prob(b))
            costs.append(p.chain_cost(b, t))
        # z influences every cost; b_t the costs t + 1 .. (its own and the later ones)
        c = torch.stack(costs)
        rtg = c.detach().flip(0).cumsum(0).flip(0)
        return c.sum() + (torch.stack(lps) * rtg).sum()

    def scg_loss(structure: Structure) -> Loss:
        def loss() -> torch.Tensor:
            with scg.Graph(structure=structure) as g:
                z = scg.sample(Categorical(logits=theta.expand(batch, -1), validate_args=False), name="z")
                scg.cost(p.first_cost(z), name="c0")
                b = p.link(z)
                for t in range(TOY_LINKS):
                    b = scg.sample(Bernoulli(logits=phi[t] + b, validate_args=False), name="b", step=t)
                    scg.cost(p.chain_cost(b, t), name="c", step=t)
            return g.surrogate_loss()

        return loss

    return Model(hand_loss=hand_loss, scg_loss=scg_loss, params=[theta, phi])


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
        soft = RelaxedOneHotCategorical(
            torch.as_tensor(tau, dtype=logits.dtype), logits=logits, validate_args=False
        ).rsample(torch.Size())
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


class Workload(NamedTuple):
    """A workload's label, its maker ``make(batch, hidden)``, and whether it has a hidden size
    (the toy has none: its rows are made once, at the first hidden size, and show H as -)."""

    label: str
    make: Callable[..., Model]
    hidden: bool = True


WORKLOADS: dict[str, Workload] = {
    "sbn": Workload("sigmoid belief net, 2 Bernoulli layers, learned (NVIL) baselines", make_sbn),
    "ram": Workload("recurrent attention, T=6 Gaussian glimpses, learned baseline", make_ram),
    "sequence": Workload("discrete latent sequence, T=20", make_sequence),
    "mixed": Workload("Gumbel-ST + REINFORCE (EMA) + reparameterised Normal", make_mixed),
    "toy": Workload("toy: Categorical(5), then 3 Bernoulli, 4 costs", make_toy, hidden=False),
    "attention": Workload("hard attention, T=30 Categorical(10) glimpses", make_attention),
}


class EmptyMode(TorchFunctionMode):
    """A ``TorchFunctionMode`` that only calls each function: what torch charges any tracker
    written as a Python function mode (scg's tracked graphs are one), before the tracker does any
    work. The hand-written step run under it is the floor of a tracked step's time."""

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        return func(*args, **kwargs) if kwargs else func(*args)


def under_empty_mode(step: Callable[[], None]) -> Callable[[], None]:
    """``step`` (forward and backward) with an `EmptyMode` pushed around it, as a tracked graph pushes its tracker."""

    def run() -> None:
        with EmptyMode():
            step()

    return run


def steps(model: Model) -> tuple[Callable[[], None], dict[str, Callable[[], None]]]:
    """The gradient steps (forward + surrogate + backward): hand-written and one per mode."""

    def step(loss: Loss) -> Callable[[], None]:
        def run() -> None:
            loss().backward()

        return run

    return step(model.hand_loss), {m: step(model.scg_loss(structure(m))) for m in MODES}


@dataclass(kw_only=True, slots=True)
class Chain:
    """The per-node scan's chain of N Bernoulli nodes: the model (hand-written loss, scg's loss)
    and its two phases on each side: scg's forward (graph built, surrogate not) against the
    hand-written forward (the same draws, log-probabilities and the user's costs), scg's
    surrogate against the hand-written loss's assembly (credit, products, sums)."""

    model: Model
    forward: Callable[[Structure], scg.Graph]
    hand_forward: Callable[[], tuple[list[torch.Tensor], list[torch.Tensor]]]
    hand_assemble: Callable[[list[torch.Tensor], list[torch.Tensor]], torch.Tensor]


def chain(n: int, per_node_costs: bool, batch: int = 32) -> Chain:
    """N Bernoulli nodes in a chain, a cost after each (or one cost, their sum, at the end)."""
    theta = torch.nn.Parameter(torch.zeros(n))

    def hand_forward() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        b = torch.zeros(batch)
        lps, costs = [], []
        for i in range(n):
            dist = Bernoulli(logits=theta[i] + b, validate_args=False)
            b = dist.sample()
            lps.append(dist.log_prob(b))
            costs.append(b)
        if not per_node_costs:
            costs = [sum(costs[1:], costs[0])]  # the user's one cost, as scg's forward computes it
        return lps, costs

    def hand_assemble(lps: list[torch.Tensor], costs: list[torch.Tensor]) -> torch.Tensor:
        c = torch.stack(costs)
        credit = c.flip(0).cumsum(0).flip(0) if per_node_costs else c[0]
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

    model = Model(hand_loss=lambda: hand_assemble(*hand_forward()), scg_loss=scg_loss, params=[theta])
    return Chain(model=model, forward=forward, hand_forward=hand_forward, hand_assemble=hand_assemble)


def inner_calls(fn: Callable[[], None], params: list[torch.Tensor], floor_s: float = 0.004) -> int:
    """Calls per timed block so that a block lasts about ``floor_s`` (one call timed, then the
    gradients cleared)."""
    return max(1, min(50, round(floor_s / max(timed(fn, params, 1), 1e-6))))


def timed(fn: Callable[[], None], params: list[torch.Tensor], inner: int) -> float:
    """Thread CPU seconds per call over ``inner`` calls (the gradients cleared after each)."""
    t0 = clock()
    for _ in range(inner):
        fn()
        for p in params:
            p.grad = None
    return (clock() - t0) / inner


def alternate(
    fns: dict[str, Callable[[], None]], params: list[torch.Tensor], inner: dict[str, int], flip: bool
) -> dict[str, float]:
    """One round of the alternation, the same in the main table and the peers' rounds: one untimed
    call of the round's first function (the caches are whatever ran before: another process, the
    last round), then each function's block of ``inner`` calls timed in turn, in the given order
    or, with ``flip``, reversed (so that no function always runs first). Seconds per call."""
    order = list(fns)[::-1] if flip else list(fns)
    timed(fns[order[0]], params, 1)
    return {k: timed(fns[k], params, inner[k]) for k in order}


def paired_ratio(times: dict[str, list[float]], key: str, base: str = "hand") -> float:
    """The median over rounds of ``key``'s time ÷ ``base``'s in the same round. The machine's speed
    drifts from round to round (other processes, a shared host: even the thread's CPU time of one
    step varies 2x under load), and both times of a round share its speed; a ratio of the two
    medians can pair a slow-round median with a fast-round one."""
    return statistics.median(a / b for a, b in zip(times[key], times[base]))
