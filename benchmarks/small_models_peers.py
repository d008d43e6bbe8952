"""The peer libraries on ``small_models.py``'s workloads: Pyro (``TraceGraph_ELBO`` and
``JitTraceGraph_ELBO``) and Storchastic, timed per gradient step against the hand-written step.

Each workload is written as a user of that library would write it, from the same parameter
values (``small_workloads``' ``*_parts``); the gradients are not those of the hand-written twin
(each library has its own cost bookkeeping and baseline rules, listed in ``MAPPING``), so a
ratio compares the work a library does for one step of the same model, not the same numbers.

* ``sbn``: Pyro's guide q(h1|x) q(h2|h1) and model p(h2) p(h1|h2) p(x|h1) in a data plate, an
  ``nn_baseline`` per site (input x and h1; Pyro fits it to the site's downstream cost by a
  summed squared error); Storchastic: the same costs as scg's, a score function per layer with a
  learned baseline (``LearnedBaseline`` below; Storchastic applies a baseline per (sample, cost)
  pair, so h1's net is evaluated and fitted once for each of its two costs).
* ``ram``: the glimpse locations by score function (Pyro: a Normal without ``rsample``), an
  ``nn_baseline`` b(h_t) per step (Storchastic: ``LearnedBaseline``), the classification loss
  as a factor / cost.
* ``sequence``: the Categorical states in the guide, each step's emission cost as a factor of the
  model (Pyro's dense dependency graph gives each state the costs after it: reward-to-go);
  Storchastic: a cost per step.
* ``toy``: the B examples in a data plate, a score function per node without a baseline, each
  cost a factor (Pyro) or a cost (Storchastic) of its own.
* ``attention``: ``estimators.py``'s own Pyro and Storchastic versions of the loop (score
  function, no baseline; Pyro scales each step's factor by 1/B, Storchastic averages its plate).
* ``mixed``: Storchastic only (``GumbelSoftmax`` straight-through at a fixed temperature, a score
  function with its moving-average baseline, ``Reparameterization``); Pyro: not mapped (see
  ``MAPPING``).

Each library runs in its own worker process (``benchmarks/estimators.py``'s ``Worker`` and
process set-up: ``import storch`` patches torch globally). A round is the main table's round
(``small_workloads.alternate``: the hand-written step and scg's three modes, one untimed call,
then each timed in turn, the order reversed every other round: a small step's time depends on
which steps ran just before it, so the peer table's rounds keep the main table's company, though
it shows Declared only), then each worker's turn (one untimed call, then its block timed), all
on each process's thread CPU clock. Every ratio is the median
over rounds of the time ÷ the hand-written step's time in the same round (``paired_ratio``), as
in the main table.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import estimators
import small_workloads as sm
import torch
import torch.nn.functional as F
from surrogate_overhead import log
from torch.distributions import Bernoulli, Categorical, Independent, Normal, OneHotCategorical

PEERS = ("pyro", "pyro_jit", "storch")
NOT_MAPPED = "not mapped"
# How each workload maps onto each peer: what differs from scg's version, or why it is not run.
MAPPING: dict[tuple[str, str], str] = {
    ("sbn", "pyro"): "guide + model, nn_baseline per site (fitted by summed squared error)",
    ("sbn", "storch"): "learned baseline per (sample, cost) pair: h1's net fitted to each of its two costs",
    ("ram", "pyro"): "glimpses by score function (a Normal without rsample), nn_baseline b(h_t) per step",
    ("ram", "storch"): "learned baseline b(h_t) per step (LearnedBaseline)",
    ("sequence", "pyro"): "per-step factors; the dense dependency graph gives reward-to-go credit",
    (
        "sequence",
        "storch",
    ): "a cost per step (the cross-entropy against one-hot tokens: F.cross_entropy refuses plates)",
    ("toy", "pyro"): "the examples in a plate, a factor per cost; the dense dependency graph gives reward-to-go",
    ("toy", "storch"): "the examples in a plate, each cost added on its own, score functions without baselines",
    ("attention", "pyro"): "estimators.py's attention program (a factor per step, scaled by 1/B)",
    ("attention", "storch"): "estimators.py's attention program (a cost per step, the plate averaged)",
    ("attention", "pyro_jit"): NOT_MAPPED
    + ": JitTraceGraph runs it, but TorchScript optimises the traced T=30 loop on its first calls for minutes (one"
    " warm-up call at B=3 H=4: 0.2 s at T=3, 0.5 s at T=6, 3.5 s at T=12, over 2.5 min of CPU at T=30 on"
    " this machine); estimators.py times JitTraceGraph on this loop (B=32, H=64)",
    ("mixed", "storch"): "GumbelSoftmax straight-through at a fixed temperature, moving-average baseline",
    ("mixed", "pyro"): NOT_MAPPED
    + ": Pyro's ELBO adds log p(y) - log q(y) for every guide site, and the workload's straight-through"
    " node has no such term (a model site would score a relaxed density at a one-hot value)",
}


def mapping(workload: str, lib: str) -> str:
    """How ``workload`` maps onto ``lib`` (``pyro_jit``: Pyro's, unless it has its own entry)."""
    own = MAPPING.get((workload, lib))
    return own if own is not None else MAPPING[(workload, "pyro" if lib == "pyro_jit" else lib)]


def _squeezed(net: torch.nn.Module) -> torch.nn.Module:
    """A (..., 1) regression net as one value per example (Pyro checks the baseline's shape)."""
    return torch.nn.Sequential(net, torch.nn.Flatten(-2))


# --------------------------------------------------------------------------------------------
# Pyro
# --------------------------------------------------------------------------------------------


@dataclass(kw_only=True, slots=True)
class PeerStep:
    """A peer's gradient step (into ``.grad``) and the tensors it fills (known after one call:
    Pyro registers a module's parameters when the guide runs)."""

    run: Callable[[], None]
    params: Callable[[], list[torch.Tensor]]

    def zero_grad(self) -> None:
        for p in self.params():
            p.grad = None


def pyro_step(workload: str, batch: int, hidden: int, jit: bool) -> PeerStep:
    """One ``TraceGraph_ELBO`` (``jit``: ``JitTraceGraph_ELBO``) gradient step."""
    import pyro
    import pyro.distributions as pdist

    if mapping(workload, "pyro").startswith(NOT_MAPPED):
        raise NotImplementedError(mapping(workload, "pyro"))
    if workload == "attention":
        step_fn, tensors = estimators.pyro_step(sm.attention_problem(batch, hidden), "sf", jit=jit)
        return PeerStep(run=step_fn, params=lambda: tensors)
    pyro.clear_param_store()
    cache: dict[str, Any] = {}  # the guide's values the model scores (the estimators.py pattern)

    def params(**tensors: torch.Tensor) -> None:
        for name, value in tensors.items():
            pyro.param(name, value.detach().clone())

    if workload == "sbn":
        s = sm.sbn_parts(batch, hidden)
        params(q1=s.q1, q2=s.q2, p1=s.p1, px=s.px, p2=s.p2)
        b1, b2 = _squeezed(s.base1), _squeezed(s.base2)
        x = s.x

        def bern(logits: torch.Tensor) -> Any:
            return pdist.Bernoulli(logits=logits).to_event(1)

        def guide() -> None:
            pyro.module("b1", b1)
            pyro.module("b2", b2)
            with pyro.plate("data", batch):
                h1 = pyro.sample(
                    "h1", bern(x @ pyro.param("q1")), infer={"baseline": {"nn_baseline": b1, "nn_baseline_input": x}}
                )
                pyro.sample(
                    "h2",
                    bern(h1 @ pyro.param("q2")),
                    infer={"baseline": {"nn_baseline": b2, "nn_baseline_input": h1}},
                )

        def model() -> None:
            with pyro.plate("data", batch):
                h2 = pyro.sample("h2", bern(pyro.param("p2").expand(batch, hidden)))
                h1 = pyro.sample("h1", bern(h2 @ pyro.param("p1")))
                pyro.sample("x", bern(h1 @ pyro.param("px")), obs=x)

    elif workload == "ram":
        r = sm.ram_parts(batch, hidden)
        params(wx=r.wx, wl=r.wl, u=r.u, wm=r.wm, wc=r.wc)
        base = _squeezed(r.base)
        steps, sigma = 6, 0.2

        class ScoreNormal(pdist.Normal):  # type: ignore[misc]
            """Sampled without a path (``has_rsample_(False)`` is lost when a plate expands it)."""

            has_rsample = False

        def guide() -> None:
            pyro.module("base", base)
            wx, wl, u, wm = (pyro.param(n) for n in ("wx", "wl", "u", "wm"))
            h = torch.zeros(batch, hidden)
            with pyro.plate("data", batch):
                for t in range(steps):
                    mean = torch.tanh(h @ wm)
                    where = ScoreNormal(mean, sigma).to_event(1)
                    loc = pyro.sample(
                        f"loc{t}", where, infer={"baseline": {"nn_baseline": base, "nn_baseline_input": h}}
                    )
                    cache[f"loc{t}"] = mean.detach()
                    h = torch.tanh(h @ u + torch.relu(r.x @ wx + loc @ wl))
            cache["h"] = h

        def model() -> None:
            with pyro.plate("data", batch):
                for t in range(steps):
                    pyro.sample(f"loc{t}", pdist.Normal(cache[f"loc{t}"], sigma).to_event(1))
                ce = F.cross_entropy(cache["h"] @ pyro.param("wc"), r.y, reduction="none")
                pyro.factor("ce", -ce)

    elif workload == "sequence":
        q = sm.sequence_parts(batch, hidden)
        params(emb=q.emb, u=q.u, wo=q.wo, wx=q.wx)
        steps = q.tokens.shape[0]

        def guide() -> None:
            emb, u, wo = pyro.param("emb"), pyro.param("u"), pyro.param("wo")
            h = torch.zeros(batch, hidden)
            with pyro.plate("data", batch):
                for t in range(steps):
                    logits = h @ wo
                    z = pyro.sample(f"z{t}", pdist.Categorical(logits=logits))
                    h = torch.tanh(h @ u + emb[z])
                    cache[f"z{t}"] = (logits.detach(), h)

        def model() -> None:
            wx = pyro.param("wx")
            with pyro.plate("data", batch):
                for t in range(steps):
                    logits, h = cache[f"z{t}"]
                    pyro.sample(f"z{t}", pdist.Categorical(logits=logits))
                    pyro.factor(f"c{t}", -F.cross_entropy(h @ wx, q.tokens[t], reduction="none"))

    elif workload == "toy":
        p = sm.toy_parts()
        params(theta=p.theta, phi=p.phi)

        def guide() -> None:
            theta, phi = pyro.param("theta"), pyro.param("phi")
            with pyro.plate("data", batch):
                logits = theta.expand(batch, -1)
                z = pyro.sample("z", pdist.Categorical(logits=logits))
                cache["z"] = logits.detach()
                b = p.link(z)
                for t in range(sm.TOY_LINKS):
                    link = phi[t] + b
                    b = pyro.sample(f"b{t}", pdist.Bernoulli(logits=link))
                    cache[f"b{t}"] = link.detach()

        def model() -> None:
            with pyro.plate("data", batch):
                z = pyro.sample("z", pdist.Categorical(logits=cache["z"]))
                pyro.factor("c0", -p.first_cost(z))
                for t in range(sm.TOY_LINKS):
                    b = pyro.sample(f"b{t}", pdist.Bernoulli(logits=cache[f"b{t}"]))
                    pyro.factor(f"c{t + 1}", -p.chain_cost(b, t))

    else:
        raise ValueError(f"unknown workload {workload!r}")
    elbo: Any = (pyro.infer.JitTraceGraph_ELBO if jit else pyro.infer.TraceGraph_ELBO)()  # type: ignore[no-untyped-call]

    def step() -> None:
        elbo.loss_and_grads(model, guide)
        cache.clear()

    def params() -> list[torch.Tensor]:
        store: Any = pyro.get_param_store()
        return [store.get_param(name).unconstrained() for name in store.keys()]

    return PeerStep(run=step, params=params)


# --------------------------------------------------------------------------------------------
# Storchastic
# --------------------------------------------------------------------------------------------


def storch_step(workload: str, batch: int, hidden: int) -> PeerStep:
    """One Storchastic gradient step into ``.grad`` (its Methods built once: they hold state)."""
    import storch
    from storch.method.baseline import Baseline

    fits: list[Any] = []  # the learned baselines' regression losses of this step

    class LearnedBaseline(Baseline):
        """b(input) by a net, fitted to the cost by squared error in a separate backward
        (Storchastic has no input-dependent baseline of its own)."""

        def __init__(self, net: torch.nn.Module, given: Callable[[], Any]) -> None:
            super().__init__()
            self.net, self.given = net, given

        def compute_baseline(self, tensor: Any, cost_node: Any) -> torch.Tensor:
            b = self.net(self.given().detach()).squeeze(-1)
            fits.append(storch.reduce_plates((b - cost_node.detach()) ** 2))
            return b.detach()

    def learned(name: str, net: torch.nn.Module, given: Callable[[], Any]) -> Any:
        return storch.method.ScoreFunction(name, baseline_factory=lambda s, c: LearnedBaseline(net, given))

    def finish() -> None:
        storch.backward()
        if fits:
            sum(f._tensor for f in fits).backward()
            fits.clear()

    current: dict[str, Any] = {}  # the baseline nets' inputs in the running step

    if workload == "sbn":
        s = sm.sbn_parts(batch, hidden)
        m1 = learned("h1", s.base1, lambda: current["x"])
        m2 = learned("h2", s.base2, lambda: current["h1"])

        def bern(logits: Any) -> Independent:
            return Independent(Bernoulli(logits=logits), 1)

        def sbn() -> None:
            x = current["x"] = storch.denote_independent(s.x, 0, "data")
            d1 = bern(x @ s.q1)
            h1 = current["h1"] = m1(d1)
            storch.add_cost(d1.log_prob(h1) - bern(h1 @ s.px).log_prob(x), "c1")
            d2 = bern(h1 @ s.q2)
            h2 = m2(d2)
            storch.add_cost(d2.log_prob(h2) - bern(h2 @ s.p1).log_prob(h1) - bern(s.p2).log_prob(h2), "c2")
            finish()

        return PeerStep(
            run=sbn, params=lambda: [s.q1, s.q2, s.p1, s.px, s.p2, *s.base1.parameters(), *s.base2.parameters()]
        )

    if workload == "ram":
        r = sm.ram_parts(batch, hidden)
        steps, sigma = 6, 0.2
        methods = [learned(f"loc{t}", r.base, lambda: current["h"]) for t in range(steps)]

        def ram() -> None:
            h = current["h"] = storch.denote_independent(torch.zeros(batch, hidden), 0, "data")
            for t in range(steps):
                loc = methods[t](Independent(Normal(torch.tanh(h @ r.wm), sigma), 1))
                h = current["h"] = r.glimpse(h, loc)
            storch.add_cost(r.classify(h), "ce")
            finish()

        return PeerStep(run=ram, params=lambda: [r.wx, r.wl, r.u, r.wm, r.wc, *r.base.parameters()])

    if workload == "sequence":
        q = sm.sequence_parts(batch, hidden)
        steps = q.tokens.shape[0]
        methods = [storch.method.ScoreFunction(f"z{t}") for t in range(steps)]
        vocab = q.wx.shape[1]
        tokens = F.one_hot(q.tokens.t(), vocab).float()  # (B, T, V): the data plate first (cross_entropy
        # refuses Storchastic's plate dimensions in its target)

        def sequence() -> None:
            h = storch.denote_independent(torch.zeros(batch, hidden), 0, "data")
            tok = storch.denote_independent(tokens, 0, "data")
            for t in range(steps):
                z = methods[t](Categorical(logits=h @ q.wo))
                h = torch.tanh(h @ q.u + F.embedding(z, q.emb))  # q.emb[z] recurses in storch
                storch.add_cost(-(F.log_softmax(h @ q.wx, -1) * tok[..., t, :]).sum(-1), f"c{t}")
            finish()

        return PeerStep(run=sequence, params=lambda: [q.emb, q.u, q.wo, q.wx])

    if workload == "toy":
        p = sm.toy_parts()
        mz = storch.method.ScoreFunction("z")
        mb = [storch.method.ScoreFunction(f"b{t}") for t in range(sm.TOY_LINKS)]

        def toy() -> None:
            z = mz(Categorical(logits=storch.denote_independent(p.theta.expand(batch, -1), 0, "data")))
            storch.add_cost(p.first_cost(z), "c0")
            b = p.link(z)
            for t in range(sm.TOY_LINKS):
                b = mb[t](Bernoulli(logits=p.phi[t] + b))
                storch.add_cost(p.chain_cost(b, t), f"c{t + 1}")
            finish()

        return PeerStep(run=toy, params=lambda: [p.theta, p.phi])

    if workload == "attention":
        prob = sm.attention_problem(batch, hidden)
        return PeerStep(run=estimators.storch_step(prob, "sf"), params=lambda: prob.params)

    if workload == "mixed":
        m = sm.mixed_parts(batch, hidden)
        gumbel = storch.method.GumbelSoftmax(
            "y", straight_through=True, initial_temperature=sm.MIXED_TAU, min_temperature=sm.MIXED_TAU
        )
        score = storch.method.ScoreFunction(
            "z", baseline_factory="moving_average", exponential_decay=1.0 - sm.MIXED_BETA
        )
        normal = storch.method.Reparameterization("e")

        def mixed() -> None:
            x = storch.denote_independent(m.x, 0, "data")
            y = gumbel(OneHotCategorical(logits=x @ m.wa))
            storch.add_cost((y * m.price).sum(-1), "price")
            z = score(Categorical(logits=y @ m.wb + x @ m.wcx))
            e = normal(Normal(F.embedding(z, m.emb) + y @ m.wd, 1.0))
            storch.add_cost(((e - m.target) ** 2).sum(-1), "fit")
            finish()

        return PeerStep(run=mixed, params=lambda: [m.wa, m.wb, m.wcx, m.emb, m.wd])

    raise ValueError(f"unknown workload {workload!r}")


def peer_step(lib: str, workload: str, batch: int, hidden: int) -> PeerStep:
    if lib == "storch":
        return storch_step(workload, batch, hidden)
    return pyro_step(workload, batch, hidden, jit=lib == "pyro_jit")


# --------------------------------------------------------------------------------------------
# Worker processes (estimators.py's, serving these steps)
# --------------------------------------------------------------------------------------------


def _serve(conn: Any, lib: str, threads: int) -> None:
    """The worker's loop: ``build`` (workload, batch, hidden: warms up, returns one call's
    seconds), ``time`` (inner calls: seconds per call), ``grads`` (one step: the absolute sum of
    each parameter's gradient), ``stop``."""
    estimators._setup_process(lib, threads)
    step: PeerStep | None = None
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        try:
            if msg[0] == "build":
                step = peer_step(lib, *msg[1:])
                for _ in range(3):  # the JIT traces on its first calls
                    step.run()
                    step.zero_grad()
                conn.send(("ok", sm.timed(step.run, step.params(), 1)))
            elif msg[0] == "time" and step is not None:
                sm.timed(step.run, step.params(), 1)  # untimed: the caches were the other processes'
                conn.send(("ok", sm.timed(step.run, step.params(), msg[1])))
            elif msg[0] == "grads" and step is not None:  # one step's gradient sizes (a test's check)
                step.run()
                conn.send(("ok", [None if p.grad is None else float(p.grad.abs().sum()) for p in step.params()]))
                step.zero_grad()
            else:
                raise ValueError(f"unexpected request {msg[0]!r}")
        except BaseException as e:  # report everything, including RecursionError
            step = None
            conn.send(("error", estimators._error(e)))


class PeerWorker(estimators.Worker):
    """``estimators.Worker`` (timeouts, restart after a crash) serving ``_serve``."""

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, self.lib, self.threads), daemon=True)
        self.proc.start()
        child.close()


def peer_rows(
    repeats: int,
    batches: list[int],
    hidden: int,
    names: list[str],
    libs: tuple[str, ...] = PEERS,
    floor_s: float = 0.004,
    timeout: float = 600.0,
    budget_s: float = 30.0,
) -> list[dict[str, Any]]:
    """Per workload and batch: median ms per step of the hand-written step and scg's modes (this
    process) and each peer (its worker), in alternating rounds (see the module's docstring); each
    ratio the median over rounds of the time ÷ the hand-written step's in the same round. A row's
    rounds are capped at about ``budget_s`` seconds (at least 5; a slow peer's step is timed one
    call per block)."""
    workers = {lib: PeerWorker(lib, torch.get_num_threads(), timeout) for lib in libs}
    rows: list[dict[str, Any]] = []
    try:
        for name in names:
            work = sm.WORKLOADS[name]
            for b in batches:
                model = work.make(b, hidden)
                hand, modes = sm.steps(model)
                inner = {"hand": sm.inner_calls(hand, model.params, floor_s)}
                one_call = {}
                row: dict[str, Any] = {
                    "workload": name,
                    "label": work.label,
                    "batch": b,
                    "hidden": hidden if work.hidden else None,
                }
                live = {}
                for lib, w in workers.items():
                    row[f"{lib}_mapping"] = mapping(name, lib)
                    if row[f"{lib}_mapping"].startswith(NOT_MAPPED):
                        continue
                    status, value = w.call("build", name, b, hidden)
                    if status != "ok":
                        row[f"{lib}_error"] = value
                        continue
                    live[lib] = w
                    one_call[lib] = value
                    inner[lib] = max(1, min(50, round(floor_s / max(value, 1e-6))))
                ours: dict[str, Callable[[], None]] = {"hand": hand, **modes}  # the main table's round
                inner.update(dict.fromkeys(modes, inner["hand"]))
                times: dict[str, list[float]] = {k: [] for k in [*ours, *live]}
                ours_s = sum(sm.timed(f, model.params, 1) for f in ours.values())
                round_s = ours_s * (inner["hand"] + 0.5) + sum(one_call[k] * (inner[k] + 1) for k in live)
                reps = max(min(repeats, 5), min(repeats, int(budget_s / max(round_s, 1e-9))))
                row["repeats"] = reps
                for r in range(reps):
                    for key, sec in sm.alternate(ours, model.params, inner, flip=r % 2 == 1).items():
                        times[key].append(sec)
                    for lib, w in list(live.items()):
                        status, value = w.call("time", inner[lib])
                        if status != "ok":
                            row[f"{lib}_error"] = value
                            del live[lib], times[lib]
                        else:
                            times[lib].append(value)
                for key, secs in times.items():
                    row[f"{key}_ms"] = statistics.median(secs) * 1e3
                    if key != "hand":
                        row[f"{key}_ratio"] = sm.paired_ratio(times, key)
                row["inner"] = inner
                rows.append(row)
                log(
                    f"peers {name:9s} B={b:3d} H={row['hidden'] or '-'} hand {row['hand_ms']:.3f} ms ({reps} repeats)  "
                    + "  ".join(f"{k} {row[k + '_ratio']:.2f}" for k in times if k != "hand")
                )
    finally:
        for w in workers.values():
            w.stop()
    return rows


def peer_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The markdown table (ratios to hand-written) and how each workload maps onto each peer."""
    libs = [lib for lib in PEERS if any(f"{lib}_mapping" in r for r in rows)]
    head = {"pyro": "Pyro TraceGraph", "pyro_jit": "Pyro JitTraceGraph", "storch": "Storchastic"}
    lines = [
        "| workload | B | H | repeats | hand (ms) | scg Declared / hand | "
        + " | ".join(f"{head[x]} / hand" for x in libs)
        + " |",
        "|---|---:|---:|---:|---:|---:|" + "---:|" * len(libs),
    ]
    for r in rows:
        cells = []
        for lib in libs:
            if f"{lib}_ratio" in r:
                cells.append(f"{r[f'{lib}_ratio']:.2f}")
            elif f"{lib}_error" in r:
                cells.append("error")
            else:
                cells.append("n/a")
        lines.append(
            f"| {r['label']} | {r['batch']} | {r['hidden'] or '-'} | {r['repeats']} | {r['hand_ms']:.3f} | "
            f"{r['declared_ratio']:.2f} | " + " | ".join(cells) + " |"
        )
    lines += ["", "How each workload maps onto each peer (n/a: not mapped; error: the message):", ""]
    seen = set()
    for r in rows:
        for lib in libs:
            shared = "pyro" if lib == "pyro_jit" and (r["workload"], lib) not in MAPPING else lib
            key = (r["workload"], shared)
            if key not in seen:
                seen.add(key)
                who = head[lib] if key[1] == "pyro_jit" else head[key[1]].split(" ")[0]
                lines.append(f"- `{r['workload']}`, {who}: {r[f'{lib}_mapping']}")
            if f"{lib}_error" in r:
                lines.append(f"- `{r['workload']}` B={r['batch']}, {head[lib]}: error `{r[f'{lib}_error']}`")
    return lines
