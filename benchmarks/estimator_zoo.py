"""The estimator zoo (issue 26): scg's estimators for discrete latents on VAEs of real
handwritten digits, and the bias of the relaxations as the temperature varies.

``benchmarks/estimators.py`` compares *libraries* (scg, Storchastic, Pyro) on one estimator at a
time (score function, moving average, leave-one-out) on synthetic problems; this one compares
*estimators* within scg on real data, with a short training run each, which that harness (one
worker process per library, alternating timing rounds) is not built for.

Data: scikit-learn's bundled 8x8 digits (1,797 images, no download), binarised at half intensity
(pixel > 8 of 16). Model, as in the ARM / DisARM papers' linear experiments but small: D = 16
binary latents per layer, linear maps, a uniform Bernoulli prior on the top layer.

* ``1L``: z₁ ∼ q(z₁ | x) = Bern(σ(x W + b)), p(x | z₁) = Bern(σ(z₁ V + c)).
* ``2L``: z₁ | x, then z₂ | z₁ (encoder), p(z₁ | z₂), p(x | z₁) (decoder).

The cost is the negative ELBO per image, −log p(x, z) + log q(z | x), averaged over a minibatch.
Estimators (the latent layers are ``Independent(Bernoulli(...), 1)`` nodes):

* ``sf_loo2``: ``ScoreFunction(LeaveOneOut())`` with ``n=2`` (two evaluations per layer, like ARM);
* ``arm`` / ``disarm``: ``ARM()`` / ``DisARM()`` with ``n=2`` (an antithetic pair per layer);
* ``rebar``: ``REBAR`` with the relaxed negative ELBO as its control (η, λ trained by
  ``REBAR.backward``; one layer only: the relaxed cost of the lower layer would need the upper
  layer's expectation);
* ``relax``: ``RELAX`` with the control of Grathwohl et al. (2018)'s discrete experiments,
  c_φ(z) = η f(σ_λ(z)) + r_ρ(σ_λ(z)) per image: REBAR's relaxed negative ELBO plus a network r_ρ
  (Linear(16, 50), ReLU, Linear(50, 1): the architecture of Storchastic's default RELAX network,
  initialised from seed 0); η, λ and ρ trained by ``RELAX.backward`` (one layer only, as ``rebar``);
* ``st``, ``gumbel_rao``: straight-through Gumbel-sigmoid and Gumbel-Rao (m = 10) at τ = 0.5
  (biased; ``Bernoulli`` nodes, pathwise).

* ``cat``: one categorical latent z ∼ q(z | x) = Cat(softmax(x W + b)), K = 10, uniform prior,
  p(x | z) = Bern(σ(W'_z + c)), with ``sf_loo4`` (``ScoreFunction(LeaveOneOut())``, ``n=4``),
  ``unordered4`` (``UnorderedSet()``, ``n=4``, without replacement), ``rb3``
  (``RaoBlackwellized(3)``: the top 3 exactly + one sample, 4 evaluations), ``cdisarm4``
  (``CategoricalDisARM()``, ``n=4``: two antithetic pairs, 4 evaluations), ``arsm46``
  (``ARSM()``, ``n=46``: z and its K(K−1)/2 = 45 swap pseudo-actions, 46 evaluations), ``entmax``
  (``GumbelEntmax(0.5)``, 1.5-entmax relaxation, biased) and ``enumerate`` (``Enumerate()``, all
  10: no variance from z; the reference).

With two layers, ``n=2`` nodes nest: z₂ carries z₁'s pair dimension too, 2 × 2 evaluations.

Measured, one thread: (1) the variance of the encoder's gradient (trace of the covariance of n
estimates) at fixed parameters (the initialisation, seed 0) on a fixed minibatch of 50 images,
the seconds per estimate (graph, surrogate, backward), and their product; (2) training curves:
Adam (lr 3e-3, minibatches of 50) for a fixed number of steps, 3 seeds, the ELBO of 500 held-out
images (one sample each) against training seconds (evaluation time excluded).
(3) ``--bias``: the relaxations' bias against exact enumeration as the temperature varies.

Storchastic (a worker process, only if installed): its estimators of the same name on ``1L`` and
``cat``, same parameters, minibatch and seed, variance and time as above (``STORCH``). Where its
variant differs from scg's:

* ``sf_loo2`` / ``sf_loo4``: ``ScoreFunction(n_samples=2 / 4, baseline_factory="batch_average")``,
  the same estimator (scg's row reproduced draw for draw);
* ``arm`` / ``disarm``: ``ARM`` / ``DisARM`` with ``n_samples=1`` (one antithetic pair);
* ``unordered4``: ``UnorderedSetEstimator(k=4)``; ``rb3``: ``RaoBlackwellSF(n_samples=4)`` (the top 3
  and one sample, without scg's built-in baseline);
* ``rebar``: ``REBAR("z")``, control η f(σ_λ(z)) with f the cost node itself evaluated at the relaxed
  samples (the same relaxed negative ELBO as scg's). Its λ is a raw parameter initialised at 1.0, set
  to scg's τ = 0.5 here (scg learns log λ); η = 1 in both. φ's training signal differs: Storchastic
  descends ‖∂L/∂probs‖², the surrogate's gradient with respect to the node's probabilities, scg
  ‖ĝ‖² over the model parameters; φ is not stepped here, both compute that φ-gradient in the time.
  Storchastic draws z, b = H(z), z̃ | b and evaluates the cost at all three in one plate (its
  weights zero the relaxed two); scg draws b, then z | b and z̃ | b (the same joint law), and
  evaluates the relaxed cost through the callable. Not the same draws: compared in distribution;
* ``relax``: ``RELAX("z", c_phi=...)`` with c_phi(s) = f(s) + r_ρ(s), the same f and the same
  initial network as scg's ``relax``; Storchastic multiplies all of c_phi by η (scg only f: equal at
  η = 1, the fixed parameters measured), feeds it σ_λ(z) as scg's control does, λ set to 0.5 as for
  ``rebar``, and trains φ with ``rebar``'s signal. Not the same draws;
* both: Storchastic's conditional relaxed Bernoulli sample (``storch.conditional_gumbel_rsample``
  with ``bernoulli=True``) is σ((log p + log(1 + p) + log v' + log(1 + v')) / λ), not
  σ((logit p + logit v') / λ) (Tucker et al. 2017, Appendix), so z̃ is not drawn from p(z | b); the
  worker measures how often σ(z̃) falls on the wrong side of 1/2 (``conditional_mismatch``), and the
  means are z-tested against scg's. ``LAX`` is for continuous nodes (none here) and its
  ``estimator`` uses an undefined name (``derivs``) in Storchastic 0.3.7: not run.
* ``arsm46``: Storchastic 0.3.7 has no ARSM (nor any swap / pseudo-action estimator): scg's row only.

    python benchmarks/estimator_zoo.py [--quick]    # all three (about 6 CPU minutes; --quick: smoke)
    python benchmarks/estimator_zoo.py --bias       # only the bias table (seed 1)
    python benchmarks/estimator_zoo.py --models cat --stem estimator_zoo_cat   # one model's rows (no bias table)
    python benchmarks/estimator_zoo.py --docs       # rewrite docs/estimators.md's tables from the JSON

Results: ``benchmarks/results/{STEM}.{json,md,png}`` (``estimator_zoo``, ``estimator_zoo_bias``
with ``--bias``).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.distributions import Bernoulli, Independent, OneHotCategorical

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import scg  # noqa: E402
import scg.testing as st  # noqa: E402
from scg.estimators import (  # noqa: E402
    ARM,
    ARSM,
    REBAR,
    RELAX,
    CategoricalDisARM,
    DisARM,
    Enumerate,
    GumbelEntmax,
    GumbelRao,
    GumbelSoftmax,
    GumbelSparsemax,
    RaoBlackwellized,
    ScoreFunction,
    UnorderedSet,
)
from scg.estimators.arsm import pseudo_action_count  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
D = 16
TAU = 0.5
K = 10  # categories of the categorical model's latent
ESTIMATORS = (
    "sf_loo2",
    "arm",
    "disarm",
    "rebar",
    "relax",
    "st",
    "gumbel_rao",
    "sf_loo4",
    "unordered4",
    "rb3",
    "cdisarm4",
    "arsm46",
    "entmax",
    "enumerate",
)
UNBIASED = {
    *("sf_loo2", "arm", "disarm", "rebar", "relax"),
    *("sf_loo4", "unordered4", "rb3", "cdisarm4", "arsm46", "enumerate"),
}
#: the models ("1L", "2L": Bernoulli latents; "cat": one K-way categorical latent) and their estimators
MODELS = {
    "1L": ("sf_loo2", "arm", "disarm", "rebar", "relax", "st", "gumbel_rao"),
    "2L": ("sf_loo2", "arm", "disarm", "st", "gumbel_rao"),
    "cat": ("sf_loo4", "unordered4", "rb3", "cdisarm4", "arsm46", "entmax", "enumerate"),
}
#: the estimators whose control variate has parameters φ, trained by ``estimator.backward``
LEARNED = ("rebar", "relax")


def load_digits_binary() -> torch.Tensor:
    """The 1,797 8x8 digits as a (1797, 64) float tensor of 0/1 (pixel > 8 of 16)."""
    from sklearn.datasets import load_digits

    data = load_digits().data
    return torch.as_tensor(data > 8, dtype=torch.float32)


@dataclass(kw_only=True, slots=True)
class VAE:
    """The linear VAE's parameters (encoder first)."""

    model: str
    params: list[torch.Tensor]

    @property
    def layers(self) -> int:
        return 2 if self.model == "2L" else 1

    @classmethod
    def init(cls, model: str, seed: int) -> VAE:
        gen = torch.Generator().manual_seed(seed)

        def w(i: int, o: int) -> torch.Tensor:
            return (torch.randn(i, o, generator=gen) * 0.1).requires_grad_()

        def b(o: int) -> torch.Tensor:
            return torch.zeros(o).requires_grad_()

        if model == "cat":
            return cls(model=model, params=[w(64, K), b(K), w(K, 64), b(64)])
        enc = [w(64, D), b(D)] + ([w(D, D), b(D)] if model == "2L" else [])
        dec = [w(D, 64), b(64)] + ([w(D, D), b(D)] if model == "2L" else [])
        return cls(model=model, params=enc + dec)

    @property
    def encoder(self) -> list[torch.Tensor]:
        return self.params[: 2 * self.layers]


def _bern_logp(logits: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Σ over the last dim of log Bern(value; σ(logits)) (also for relaxed values in (0, 1))."""
    return (value * logits - torch.nn.functional.softplus(logits)).sum(-1)


def neg_elbo_terms(model: VAE, x: torch.Tensor, z1: torch.Tensor, z2: torch.Tensor | None) -> torch.Tensor:
    """−log p(x, z) + log q(z | x) per image, broadcast over the sample dimensions."""
    p = model.params
    we1, be1 = p[0], p[1]
    if model.model == "cat":  # z one-hot: log q(z | x) − log(1/K) − log p(x | z)
        logq = ((x @ we1 + be1).log_softmax(-1) * z1).sum(-1)
        return -_bern_logp(z1 @ p[2] + p[3], x) + math.log(K) + logq
    if model.layers == 1:
        wd1, bd1 = p[2], p[3]
        return -_bern_logp(z1 @ wd1 + bd1, x) - _bern_logp(torch.zeros_like(z1), z1) + _bern_logp(x @ we1 + be1, z1)
    we2, be2, wd1, bd1, wd2, bd2 = p[2:8]
    assert z2 is not None
    z1b = z1.expand(z2.shape)  # z₂ carries z₁'s sample dims (newest first)
    return (
        -_bern_logp(z1b @ wd1 + bd1, x)
        - _bern_logp(z2 @ wd2 + bd2, z1b)
        - _bern_logp(torch.zeros_like(z2), z2)
        + _bern_logp(x @ we1 + be1, z1b)
        + _bern_logp(z1b @ we2 + be2, z2)
    )


def control_network(seed: int = 0) -> torch.nn.Sequential:
    """r_ρ: Linear(D, 50), ReLU, Linear(50, 1) (Storchastic's default RELAX network), initialised
    from ``seed`` without touching the global random stream."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(D, 50), torch.nn.ReLU(), torch.nn.Linear(50, 1))


class RelaxControl(torch.nn.Module):
    """RELAX's control for the one-layer VAE: c_φ(z) = (η f(σ_λ(z)) + r_ρ(σ_λ(z))) / B, with f the
    negative ELBO per image at the relaxed sample and B the minibatch (the cost is per image / B).
    ``x`` is the current minibatch (set before each step)."""

    def __init__(self, model: VAE, x: torch.Tensor, *, temperature: float, eta: float) -> None:
        super().__init__()
        self.model, self.x = model, x
        self.eta = torch.nn.Parameter(torch.tensor(eta))
        self.log_temperature = torch.nn.Parameter(torch.tensor(math.log(temperature)))
        self.net = control_network()

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(z / self.log_temperature.exp())
        f = neg_elbo_terms(self.model, self.x, s, None)
        return (self.eta * f + self.net(s).squeeze(-1)) / self.x.shape[0]


def set_minibatch(name: str, estimator: Any, model: VAE, x: torch.Tensor) -> None:
    """Point a learned control's relaxed cost at the minibatch ``x`` (``rebar``, ``relax``)."""
    if name == "rebar":
        estimator.relaxed_cost = lambda s: neg_elbo_terms(model, x, s, None) / x.shape[0]
    elif name == "relax":
        estimator.control.x = x


def _estimator(name: str, model: VAE, x: torch.Tensor) -> tuple[Any, int | None, bool]:
    """(estimator, n, whether the node is a Bernoulli rather than Independent(Bernoulli))."""
    if name == "sf_loo2":
        return ScoreFunction(scg.baselines.LeaveOneOut()), 2, False
    if name == "arm":
        return ARM(), 2, False
    if name == "disarm":
        return DisARM(), 2, False
    if name == "rebar":  # the control: the relaxed cost of the node, per image like the cost
        return REBAR(lambda s: neg_elbo_terms(model, x, s, None) / x.shape[0], temperature=TAU, eta=1.0), None, False
    if name == "relax":
        return RELAX(RelaxControl(model, x, temperature=TAU, eta=1.0)), None, False
    if name == "st":
        return GumbelSoftmax(TAU, hard=True), None, True
    if name == "gumbel_rao":
        return GumbelRao(TAU, m=10), None, True
    if name == "sf_loo4":
        return ScoreFunction(scg.baselines.LeaveOneOut()), 4, False
    if name == "unordered4":
        return UnorderedSet(), 4, False
    if name == "rb3":
        return RaoBlackwellized(3), None, False
    if name == "cdisarm4":
        return CategoricalDisARM(), 4, False
    if name == "arsm46":  # z and its K(K-1)/2 swap pseudo-actions
        return ARSM(), pseudo_action_count(K), False
    if name == "entmax":
        return GumbelEntmax(TAU), None, False
    if name == "enumerate":
        return Enumerate(), None, False
    raise ValueError(name)


def program(model: VAE, x: torch.Tensor, name: str, estimator: Any = None) -> Any:
    """One run of the VAE in the open graph; returns the estimator (REBAR's is trained)."""
    est, n, plain = _estimator(name, model, x)
    est = estimator if estimator is not None else est
    p = model.params

    def node(logits: torch.Tensor, label: str) -> torch.Tensor:
        if model.model == "cat":
            return scg.sample(OneHotCategorical(logits=logits), name=label, n=n, estimator=est)
        d = Bernoulli(logits=logits) if plain else Independent(Bernoulli(logits=logits), 1)
        return scg.sample(d, name=label, n=n, estimator=est)

    z1 = node(x @ p[0] + p[1], "z1")
    z2 = node(z1 @ p[2] + p[3], "z2") if model.layers == 2 else None
    scg.cost(neg_elbo_terms(model, x, z1, z2) / x.shape[0], name="neg_elbo")  # per image: credit per image
    return est


def one_step(model: VAE, x: torch.Tensor, name: str, estimator: Any) -> None:
    """Accumulate one gradient estimate into the parameters' ``.grad``."""
    with scg.Graph() as g:
        program(model, x, name, estimator)
    loss = g.surrogate_loss()
    if name in LEARNED:
        estimator.backward(loss, model.params)
    else:
        loss.backward()


def variance_and_time(model_name: str, name: str, n_est: int, x: torch.Tensor) -> dict[str, Any]:
    model = VAE.init(model_name, 0)
    est = _estimator(name, model, x)[0]
    grads = []
    torch.manual_seed(1)
    one_step(model, x, name, est)  # warm-up
    start = time.perf_counter()
    for _ in range(n_est):
        for q in model.params:
            q.grad = None
        one_step(model, x, name, est)
        grads.append(torch.cat([q.grad.reshape(-1) for q in model.encoder if q.grad is not None]))
    secs = (time.perf_counter() - start) / n_est
    g = torch.stack(grads).double()
    var = float(g.var(0).sum())
    centred = (g - g.mean(0)) ** 2
    se = float(centred.sum(1).std() / math.sqrt(n_est))  # standard error of the trace
    return {
        "model": model_name,
        "estimator": name,
        "variance": var,
        "variance_se": se,
        "seconds_per_estimate": secs,
        "variance_x_seconds": var * secs,
        "mean": g.mean(0).tolist(),
        "se": (g.std(0) / math.sqrt(n_est)).tolist(),
    }


def interleaved_seconds(
    model_name: str, names: Sequence[str], x: torch.Tensor, rounds: int, per: int
) -> dict[str, float]:
    """Seconds per estimate, the median over rounds that alternate between the estimators (the
    machine is shared: alternating spreads the load over all of them alike)."""
    setups = {}
    for name in names:
        model = VAE.init(model_name, 0)
        setups[name] = (model, _estimator(name, model, x)[0])
        one_step(model, x, name, setups[name][1])  # warm-up
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for name, (model, est) in setups.items():
            start = time.perf_counter()
            for _ in range(per):
                for q in model.params:
                    q.grad = None
                one_step(model, x, name, est)
            times[name].append((time.perf_counter() - start) / per)
    return {name: sorted(t)[len(t) // 2] for name, t in times.items()}


@torch.no_grad()
def heldout_elbo(model: VAE, x: torch.Tensor) -> float:
    gen = torch.Generator().manual_seed(123)
    p = model.params
    if model.model == "cat":
        idx = torch.multinomial(torch.softmax(x @ p[0] + p[1], -1), 1, generator=gen).squeeze(-1)
        return -float(neg_elbo_terms(model, x, torch.nn.functional.one_hot(idx, K).to(x.dtype), None).mean())
    z1 = torch.bernoulli(torch.sigmoid(x @ p[0] + p[1]), generator=gen)
    z2 = torch.bernoulli(torch.sigmoid(z1 @ p[2] + p[3]), generator=gen) if model.layers == 2 else None
    return -float(neg_elbo_terms(model, x, z1, z2).mean())


def train_curve(
    model_name: str, name: str, seed: int, steps: int, every: int, train: torch.Tensor, test: torch.Tensor
) -> dict[str, Any]:
    model = VAE.init(model_name, seed)
    est = _estimator(name, model, train[:50])[0]
    params = model.params + (est.parameters if name in LEARNED else [])
    opt = torch.optim.Adam(params, lr=3e-3)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    curve = [(0.0, heldout_elbo(model, test))]
    elapsed = 0.0
    for step in range(1, steps + 1):
        x = train[torch.randint(len(train), (50,), generator=gen)]
        start = time.perf_counter()
        opt.zero_grad()
        set_minibatch(name, est, model, x)  # a learned control's relaxed cost closes over this minibatch
        one_step(model, x, name, est)
        opt.step()
        elapsed += time.perf_counter() - start
        if step % every == 0:
            curve.append((elapsed, heldout_elbo(model, test)))
    return {"model": model_name, "estimator": name, "seed": seed, "curve": curve}


# ----------------------------------------------------------------------------- Storchastic

STORCH = (
    ("1L", "sf_loo2"),
    ("1L", "arm"),
    ("1L", "disarm"),
    ("1L", "rebar"),
    ("1L", "relax"),
    ("cat", "sf_loo4"),
    ("cat", "unordered4"),
    ("cat", "rb3"),
)


def storch_variance(model_name: str, name: str, n_est: int, x0: torch.Tensor) -> dict[str, Any]:
    """The same measurement with Storchastic's estimator on the one-layer VAEs (run in its own
    process: ``import storch`` patches torch globally)."""
    import storch

    model = VAE.init(model_name, 0)
    we, be, wd, bd = model.params
    if name in ("sf_loo2", "sf_loo4"):
        method = storch.method.ScoreFunction("z", n_samples=int(name[-1]), baseline_factory="batch_average")
    elif name == "unordered4":
        method = storch.method.UnorderedSetEstimator("z", k=4)
    elif name == "rb3":  # the top 3 and one sample of the rest; no built-in baseline (scg's rb3 has one)
        method = storch.method.RaoBlackwellSF("z", n_samples=4)
    elif name == "rebar":  # its relaxed cost: the cost node at the relaxed samples
        method = storch.method.REBAR("z", n_samples=1)
    elif name == "relax":  # c_phi(s) = f(s) + r_ρ(s), scg's relax control at η = 1
        control = StorchRelaxControl(model, x0)
        method = storch.method.RELAX("z", n_samples=1, c_phi=control)
    else:
        method = (storch.method.ARM if name == "arm" else storch.method.DisARM)("z", n_samples=1)
    if name in LEARNED:
        with torch.no_grad():
            method.temperature.fill_(TAU)  # its λ starts at 1.0; scg's at τ = 0.5

    def step() -> None:
        x = storch.denote_independent(x0, 0, "batch")
        if name == "relax":
            control.x = x
        if model_name == "cat":
            z = method(OneHotCategorical(logits=x @ we + be)).float()
            logq = ((x @ we + be).log_softmax(-1) * z).sum(-1)
            cost = -_bern_logp(z @ wd + bd, x) + math.log(K) + logq
        else:
            z = method(Bernoulli(logits=x @ we + be)).float()
            cost = -_bern_logp(z @ wd + bd, x) - _bern_logp(torch.zeros_like(z), z) + _bern_logp(x @ we + be, z)
        storch.add_cost(cost, "neg_elbo")  # Storchastic averages the batch plate
        storch.backward()

    torch.manual_seed(1)
    step()
    grads = []
    start = time.perf_counter()
    for _ in range(n_est):
        for q in model.params:
            q.grad = None
        step()
        grads.append(torch.cat([q.grad.detach().reshape(-1) for q in model.encoder]))  # REBAR/RELAX: create_graph
    secs = (time.perf_counter() - start) / n_est
    g = torch.stack(grads).double()
    var = float(g.var(0).sum())
    se = float(((g - g.mean(0)) ** 2).sum(1).std() / math.sqrt(n_est))
    return {
        "model": model_name,
        "estimator": name,
        "variance": var,
        "variance_se": se,
        "seconds_per_estimate": secs,
        "variance_x_seconds": var * secs,
        "mean": g.mean(0).tolist(),
        "se": (g.std(0) / math.sqrt(n_est)).tolist(),
    }


class StorchRelaxControl(torch.nn.Module):
    """Storchastic's ``c_phi`` for ``relax``: f(s) + r_ρ(s) per image at its relaxed sample s = σ_λ(z)
    (Storchastic multiplies it by η and averages the batch plate); the same r_ρ as scg's."""

    def __init__(self, model: VAE, x: torch.Tensor) -> None:
        super().__init__()
        self.model, self.x = model, x
        self.net = control_network()

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        return neg_elbo_terms(self.model, self.x, s, None) + self.net(s).squeeze(-1)


def storch_conditional_mismatch(x0: torch.Tensor, draws: int) -> float:
    """How often Storchastic's conditional relaxed Bernoulli sample z̃ | b (``bernoulli=True``) lands
    on the other side of 1/2 than b: 0 for a draw from p(z | b). At the 1L encoder's initial
    probabilities on the fixed minibatch, ``draws`` draws of b, seed 2."""
    import storch

    we, be = VAE.init("1L", 0).params[:2]
    with torch.no_grad():
        probs = torch.sigmoid(x0 @ we + be).expand(draws, *x0.shape[:1], D)
        gen = torch.Generator().manual_seed(2)
        b = torch.bernoulli(probs, generator=gen)
        torch.manual_seed(2)
        s = storch.conditional_gumbel_rsample(b, probs, True, torch.tensor(TAU))
    return float(((s > 0.5).float() != b).float().mean())


def run_storch(n_est: int) -> tuple[list[dict[str, Any]], str, float | None]:
    """Storchastic's rows from a worker process and its conditional sample's mismatch, or why there
    are none."""
    import subprocess

    try:
        import importlib.metadata as md

        version = md.version("storchastic")
    except md.PackageNotFoundError:
        return [], "Storchastic is not installed (`pip install storchastic`): no comparison.", None
    proc = subprocess.run(
        [sys.executable, __file__, "--storch-worker", str(n_est)], capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        return [], f"Storchastic {version} failed with torch {torch.__version__}: {proc.stderr.strip()[-500:]}", None
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out["rows"], f"Storchastic {version}, torch {torch.__version__}", out["conditional_mismatch"]


# ----------------------------------------------------------------------------- relaxation bias

TAB = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
THETA = (0.3, -0.2, 0.5, 0.7)
RELAXATIONS: dict[str, Callable[[float], Any]] = {
    "Gumbel-softmax": lambda t: GumbelSoftmax(t),
    "straight-through": lambda t: GumbelSoftmax(t, hard=True),
    "Gumbel-Rao (m=10)": lambda t: GumbelRao(t, m=10),
    "Gumbel-sparsemax": lambda t: GumbelSparsemax(t),
    "sparsemax straight-through": lambda t: GumbelSparsemax(t, hard=True),
    "Gumbel-entmax (α = 1.5)": lambda t: GumbelEntmax(t),
    "1.5-entmax straight-through": lambda t: GumbelEntmax(t, hard=True),
}


def bias_table(temps: Sequence[float], n: int) -> list[dict[str, Any]]:
    def prog(est: Any = None) -> Callable[[torch.Tensor], None]:
        def run(th: torch.Tensor) -> None:
            kw = {} if est is None else {"estimator": est}
            y = scg.sample(OneHotCategorical(logits=th[:, :3]), name="y", **kw)
            scg.cost((y @ TAB + th[:, 3]) ** 2, name="c")

        return run

    th = torch.tensor(THETA, dtype=torch.float64, requires_grad=True)
    exact = st.exact_gradient(lambda: prog()(th.unsqueeze(0)), [th])[0]
    rows = []
    for name, make in RELAXATIONS.items():
        for t in temps:
            est = st.estimate_gradients_batched(prog(make(t)), [th], n, particles=2000, seed=1)
            report = st.compare(est, exact.detach())
            rows.append(
                {
                    "estimator": name,
                    "temperature": t,
                    "max_abs_bias": float((est.mean(0) - exact)[:3].abs().max()),
                    "variance": float(est[:, :3].var(0).sum()),
                    "max_z": float(report.z.abs().max()),
                    "critical": report.critical,
                    "exact": exact.tolist(),
                }
            )
    return rows


def bias_markdown(rows: list[dict[str, Any]]) -> list[str]:
    temps = sorted({r["temperature"] for r in rows}, reverse=True)
    out = ["| estimator | " + " | ".join(f"τ = {t:g}" for t in temps) + " |", "|---|" + "---:|" * len(temps)]
    for name in RELAXATIONS:
        cells = []
        for t in temps:
            r = next(r for r in rows if r["estimator"] == name and r["temperature"] == t)
            cells.append(f"{r['max_abs_bias']:.2f} / {r['variance']:.3g} / {r['max_z']:.0f}")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


# ----------------------------------------------------------------------------- report


def write_markdown(res: dict[str, Any], path: Path) -> None:
    lines = [
        "# Estimator zoo (issue 26)",
        "",
        f"*{res['meta']['command']}; {res['meta']['when']}; "
        f"torch {res['meta']['torch']}, 1 thread, {res['meta']['machine']}.*",
        "",
    ]
    if res.get("variance"):
        lines += [
            "## VAEs on binarised 8x8 digits: encoder-gradient variance at fixed parameters",
            "",
            "Models: 1L / 2L, one / two layers of 16 Bernoulli latents; cat, one categorical latent (K = 10). "
            "The last column is relative to the model's score function with leave-one-out (sf_loo2 / sf_loo4).",
            "",
            "| model | estimator | unbiased | variance (± se) | ms / estimate | variance × s | vs score function |",
            "|---|---|---|---:|---:|---:|---:|",
        ]
        for model in MODELS:
            rows = [r for r in res["variance"] if r["model"] == model]
            ref = next((r for r in rows if r["estimator"] in ("sf_loo2", "sf_loo4")), None)
            for r in rows:
                rel = r["variance_x_seconds"] / ref["variance_x_seconds"] if ref else float("nan")
                lines.append(
                    f"| {model} | {r['estimator']} | {'yes' if r['estimator'] in UNBIASED else '**no**'} | "
                    f"{r['variance']:.4g} ± {r['variance_se']:.2g} | {1e3 * r['seconds_per_estimate']:.1f} | "
                    f"{r['variance_x_seconds']:.3g} | {rel:.2f}x |"
                )
        lines.append("")
    if res.get("training"):
        lines += [
            "## Training: held-out ELBO (500 images, nats) after the step budget, mean ± sd over 3 seeds",
            "",
            "| model | estimator | steps | training s | final ELBO |",
            "|---|---|---:|---:|---:|",
        ]
        for model in MODELS:
            for name in MODELS[model]:
                runs = [r for r in res["training"] if r["model"] == model and r["estimator"] == name]
                if not runs:
                    continue
                fin = torch.tensor([r["curve"][-1][1] for r in runs])
                secs = sum(r["curve"][-1][0] for r in runs) / len(runs)
                sd = float(fin.std()) if len(fin) > 1 else 0.0
                lines.append(
                    f"| {model} | {name} | {res['meta']['steps']} | {secs:.1f} | {float(fin.mean()):.2f} ± {sd:.2f} |"
                )
        lines += ["", f"The curves (ELBO against training seconds) are in `{path.stem}.png`.", ""]
    if res.get("bias"):
        lines += [
            "## Relaxations: bias against exact enumeration",
            "",
            "max |bias| / variance / max |z| (critical 3.66); see docs/estimators.md.",
            "",
        ]
        lines += bias_markdown(res["bias"]) + [""]
    if res.get("storchastic"):
        lines += [
            "## The same estimators in Storchastic (1L and cat, same parameters and minibatch)",
            "",
            res["storchastic"],
            "",
        ]
        if res.get("storch_rows"):
            lines += [
                "| model | estimator | scg variance | Storchastic variance | means: max abs z | scg ms "
                "| Storchastic ms | time ratio |",
                "|---|---|---:|---:|---:|---:|---:|---:|",
            ]
            for r in res["storch_rows"]:
                if "error" in r:
                    lines.append(f"| {r['model']} | {r['estimator']} | | crash: {r['error']} | | | | |")
                    continue
                mine = next(m for m in res["variance"] if m["model"] == r["model"] and m["estimator"] == r["estimator"])
                lines.append(
                    f"| {r['model']} | {r['estimator']} | {mine['variance']:.4g} ± {mine['variance_se']:.2g} | "
                    f"{r['variance']:.4g} ± {r['variance_se']:.2g} | {r['max_z_vs_scg']:.3g} | "
                    f"{1e3 * mine['seconds_per_estimate']:.1f} | {1e3 * r['seconds_per_estimate']:.1f} | "
                    f"{r['seconds_per_estimate'] / mine['seconds_per_estimate']:.2f}x |"
                )
            lines += [
                "",
                "Both from seed 1 at the same parameters and minibatch. 'means: max abs z': the largest z-score "
                "of the difference of the two mean gradients over the encoder coordinates (about 3.9-4.2 is "
                "the Bonferroni critical value at 1e-3). Storchastic is timed in its own process (`import storch` "
                "patches torch), at another moment of the shared machine; scg's times are medians of rounds "
                "alternating between its estimators. Only sf_loo2 / sf_loo4 are the same estimator draw for "
                "draw. rebar / relax: Storchastic's `REBAR` / `RELAX` with its temperature set to scg's 0.5 "
                "(its default 1.0) and, for relax, scg's control (c_phi(s) = f(s) + r(s), the same network "
                "r; Storchastic scales all of it by eta, scg only f: equal at eta = 1); their control "
                "parameters are not stepped (both compute their gradient, Storchastic of the squared "
                "gradient with respect to the node's probabilities, scg of the squared gradient of the model "
                "parameters). Storchastic draws z first, scg b first: the same law, not the same draws. "
                "arsm46 has no row: Storchastic 0.3.7 has no ARSM.",
                "",
            ]
            mismatch = res.get("storch_conditional_mismatch")
            if mismatch is not None:
                lines += [
                    "Storchastic's conditional relaxed Bernoulli sample z̃ | b (`storch.conditional_gumbel_rsample`, "
                    "used by its REBAR and RELAX) falls on the other side of 1/2 than b in "
                    f"{100 * mismatch:.1f}% of draws at the 1L encoder's initial probabilities on the minibatch "
                    "(a draw from p(z | b) never does): it computes (log p + log(1 + p) + log v' + log(1 + v')) / "
                    "temperature where Tucker et al. (2017) have (logit p + logit v') / temperature.",
                    "",
                ]
    path.write_text("\n".join(lines))


def write_plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = [m for m in MODELS if any(r["model"] == m for r in res["training"])]
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 4), sharey=False, squeeze=False)
    titles = {"1L": "1 Bernoulli layer", "2L": "2 Bernoulli layers", "cat": "1 categorical latent (K = 10)"}
    for ax, model in zip(axes[0], models):
        for i, name in enumerate(ESTIMATORS):
            runs = [r for r in res["training"] if r["model"] == model and r["estimator"] == name]
            for j, r in enumerate(runs):
                xs, ys = zip(*r["curve"])
                ax.plot(xs, ys, color=f"C{i}", alpha=0.8, label=name if j == 0 else None)
        ax.set_title(titles[model])
        ax.set_xlabel("training seconds (1 thread)")
        ax.set_ylabel("held-out ELBO (nats)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# ----------------------------------------------------------------------------- docs/estimators.md

DOCS = REPO / "docs" / "estimators.md"
#: how docs/estimators.md names each row (the report uses the short names)
DOC_LABELS = {
    "sf_loo2": "`ScoreFunction(LeaveOneOut())`, n=2",
    "arm": "`ARM()`, n=2",
    "disarm": "`DisARM()`, n=2",
    "rebar": "`REBAR` (η, λ trained)",
    "relax": "`RELAX`, REBAR's control + a network (η, λ, ρ trained)",
    "st": f"straight-through, τ = {TAU:g} (biased)",
    "gumbel_rao": f"`GumbelRao({TAU:g})` (biased)",
    "sf_loo4": "`ScoreFunction(LeaveOneOut())`, n=4",
    "unordered4": "`UnorderedSet()`, n=4",
    "rb3": "`RaoBlackwellized(3)` (4 evaluations)",
    "cdisarm4": "`CategoricalDisARM()`, n=4 (two pairs)",
    "arsm46": f"`ARSM()`, n={pseudo_action_count(K)} (z and its {pseudo_action_count(K) - 1} swap pseudo-actions)",
    "entmax": f"`GumbelEntmax({TAU:g})` (biased)",
    "enumerate": f"`Enumerate()` ({K} evaluations, exact)",
}
#: Storchastic's estimator beside scg's, as in ``storch_variance``
STORCH_LABELS = {
    "sf_loo2": '`ScoreFunction(n_samples=2, baseline_factory="batch_average")`',
    "arm": "`ARM(n_samples=1)`",
    "disarm": "`DisARM(n_samples=1)`",
    "rebar": f"`REBAR()`, temperature set to {TAU:g}",
    "relax": f"`RELAX(c_phi=...)`, the same control, temperature {TAU:g}",
    "sf_loo4": '`ScoreFunction(n_samples=4, baseline_factory="batch_average")`',
    "unordered4": "`UnorderedSetEstimator(k=4)`",
    "rb3": "`RaoBlackwellSF(n_samples=4)`",
}
#: scg's side of the Storchastic table where it differs from ``DOC_LABELS``
STORCH_SCG_LABELS = {"rebar": "`REBAR`", "relax": "`RELAX` (the control above)", "rb3": "`RaoBlackwellized(3)`"}


def _sig(v: float) -> str:
    """Three significant digits, trailing zeros kept (2.80), no trailing point (392)."""
    return "0" if v == 0 else f"{v:#.3g}".rstrip(".")


def _minus(text: str) -> str:
    return text.replace("-", "−")


def docs_tables(res: dict[str, Any]) -> dict[str, list[str]]:
    """The two tables of docs/estimators.md's digits-VAE section, rendered from a full run's JSON:
    ``variance`` (variance, time, variance × time relative to the score function, held-out ELBO) and
    ``storchastic`` (scg's and Storchastic's variance, the z-test of their means, the time ratio)."""
    seeds = len({r["seed"] for r in res["training"]})
    var = [
        f"| model | estimator | variance | ms / estimate | variance × time vs score function "
        f"| held-out ELBO after {res['meta']['steps']} steps ({seeds} seeds) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for model in MODELS:
        rows = [r for r in res["variance"] if r["model"] == model]
        ref = next(r for r in rows if r["estimator"] in ("sf_loo2", "sf_loo4"))["variance_x_seconds"]
        best = min(
            (r["variance_x_seconds"] for r in rows if r["estimator"] in UNBIASED and r["variance"] > 0),
            default=None,
        )
        for r in rows:
            rel = r["variance_x_seconds"] / ref
            cell = "0" if rel == 0 else f"{rel:.2f}x"
            if r["variance_x_seconds"] == best:
                cell = f"**{cell}**"
            fin = torch.tensor(
                [t["curve"][-1][1] for t in res["training"] if t["model"] == model and t["estimator"] == r["estimator"]]
            )
            sd = float(fin.std()) if len(fin) > 1 else 0.0
            var.append(
                f"| {model} | {DOC_LABELS[r['estimator']]} | {_sig(r['variance'])} | "
                f"{1e3 * r['seconds_per_estimate']:.1f} | {cell} | {_minus(f'{float(fin.mean()):.2f}')} ± {sd:.2f} |"
            )
    peer = [
        "| model | scg / Storchastic estimator | scg variance | Storchastic variance | means: max \\|z\\| vs scg "
        "| Storchastic time / scg's |",
        "|---|---|---:|---:|---:|---:|",
    ]
    storch = {(r["model"], r["estimator"]): r for r in res["storch_rows"]}
    for mine in res["variance"]:
        key = (mine["model"], mine["estimator"])
        if key not in storch and key != ("cat", "arsm46"):
            continue
        label = STORCH_SCG_LABELS.get(mine["estimator"], DOC_LABELS[mine["estimator"]])
        head = f"| {mine['model']} | {label} / "
        r = storch.get(key)
        if r is None:
            peer.append(f"{head}none (Storchastic has no ARSM) | {_sig(mine['variance'])} | | | |")
        elif "error" in r:
            peer.append(
                f"{head}{STORCH_LABELS[mine['estimator']]} | {_sig(mine['variance'])} | "
                f"crash: `{r['error'].split(':')[0]}` | | |"
            )
        else:
            z = r["max_z_vs_scg"]
            peer.append(
                f"{head}{STORCH_LABELS[mine['estimator']]} | {_sig(mine['variance'])} | {_sig(r['variance'])} | "
                f"{f'{z:.0e}' if z < 0.01 else _sig(z)} | "
                f"{r['seconds_per_estimate'] / mine['seconds_per_estimate']:.2f}x |"
            )
    return {"variance": var, "storchastic": peer}


def write_docs(res: dict[str, Any], path: Path = DOCS) -> None:
    """Replace each table of ``docs_tables`` in ``path`` between its markers
    ``<!-- estimator_zoo.py --docs: NAME -->`` and ``<!-- end NAME -->``."""
    text = path.read_text()
    for name, lines in docs_tables(res).items():
        begin, end = f"<!-- estimator_zoo.py --docs: {name} -->", f"<!-- end {name} -->"
        head, sep, rest = text.partition(begin)
        old, sep2, tail = rest.partition(end)
        if not sep or not sep2:
            raise SystemExit(f"{path}: expected the markers {begin!r} ... {end!r} around the {name} table, found none")
        text = head + begin + "\n\n" + "\n".join(lines) + "\n\n" + end + tail
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    parser.add_argument("--bias", action="store_true", help="only the relaxation bias table")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--stem", default=None, help="results file names (default estimator_zoo[_bias])")
    parser.add_argument(
        "--docs", action="store_true", help="only rewrite docs/estimators.md's tables from OUT/STEM.json"
    )
    parser.add_argument("--storch-worker", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.distributions.Distribution.set_default_validate_args(False)  # as in estimators.py, everywhere
    if args.docs:
        write_docs(json.loads((args.out / f"{args.stem or 'estimator_zoo'}.json").read_text()))
        return
    if args.storch_worker:
        fixed = load_digits_binary()[torch.randperm(1797, generator=torch.Generator().manual_seed(0))[:50]]
        rows = []
        for model, name in STORCH:
            try:
                rows.append(storch_variance(model, name, args.storch_worker, fixed))
            except Exception as e:  # recorded, not hidden: the report says which crashed and why
                import storch

                storch.reset()  # a crash leaves Storchastic's global graph half built
                rows.append({"model": model, "estimator": name, "error": f"{type(e).__name__}: {str(e)[:300]}"})
        print(json.dumps({"rows": rows, "conditional_mismatch": storch_conditional_mismatch(fixed, 200)}))
        return
    n_est, steps, every, seeds, n_bias = (20, 20, 10, 2, 2000) if args.quick else (200, 150, 15, 3, 8000)
    res: dict[str, Any] = {
        "meta": {
            "command": "python benchmarks/estimator_zoo.py"
            + (" --quick" if args.quick else "")
            + (" --bias" if args.bias else "")
            + ("" if args.models == list(MODELS) else " --models " + " ".join(args.models))
            + (f" --stem {args.stem}" if args.stem else ""),
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "torch": torch.__version__,
            "machine": platform.machine(),
            "steps": steps,
            "n_estimates": n_est,
        }
    }
    models = {m: MODELS[m] for m in args.models}
    t0 = time.perf_counter()
    if not args.bias:
        data = load_digits_binary()
        perm = torch.randperm(len(data), generator=torch.Generator().manual_seed(0))
        train, test = data[perm[:-500]], data[perm[-500:]]
        fixed = train[:50]
        res["variance"] = []
        for model in models:
            for name in models[model]:
                row = variance_and_time(model, name, n_est, fixed)
                print(
                    f"variance {model} {name}: {row['variance']:.4g} {1e3 * row['seconds_per_estimate']:.1f} ms",
                    flush=True,
                )
                res["variance"].append(row)
        for model in models:
            secs = interleaved_seconds(model, models[model], fixed, rounds=7, per=max(2, n_est // 20))
            for r in res["variance"]:
                if r["model"] == model:
                    r["seconds_per_estimate"] = secs[r["estimator"]]
                    r["variance_x_seconds"] = r["variance"] * secs[r["estimator"]]
        res["storch_rows"], res["storchastic"], res["storch_conditional_mismatch"] = run_storch(n_est)
        res["storch_rows"] = [r for r in res["storch_rows"] if r["model"] in models]
        for r in res["storch_rows"]:
            if "mean" in r:  # same seed, same parameters: compare the mean gradients coordinate by coordinate
                mine = next(m for m in res["variance"] if m["model"] == r["model"] and m["estimator"] == r["estimator"])
                a, b = torch.tensor(mine["mean"]), torch.tensor(r["mean"])
                se = (torch.tensor(mine["se"]) ** 2 + torch.tensor(r["se"]) ** 2).sqrt().clamp_min(1e-12)
                r["max_z_vs_scg"] = float(((a - b) / se).abs().max())
                r["max_abs_diff_of_means"] = float((a - b).abs().max())
        for r in res["variance"] + res["storch_rows"]:
            r.pop("mean", None)
            r.pop("se", None)
        print(res["storchastic"], flush=True)
        res["training"] = []
        for model in models:
            for name in models[model]:
                for seed in range(seeds):
                    row = train_curve(model, name, seed, steps, every, train, test)
                    print(f"train {model} {name} seed {seed}: {row['curve'][-1]}", flush=True)
                    res["training"].append(row)
    if args.bias or len(models) == len(MODELS):
        res["bias"] = bias_table((2.0, 1.0, 0.5, 0.25, 0.1), n_bias)
    res["meta"]["total_seconds"] = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.stem or ("estimator_zoo_bias" if args.bias else "estimator_zoo")
    (args.out / f"{stem}.json").write_text(json.dumps(res, indent=1))
    write_markdown(res, args.out / f"{stem}.md")
    if res.get("training"):
        write_plot(res, args.out / f"{stem}.png")
    if res.get("bias"):
        print("\n".join(bias_markdown(res["bias"])))
    print(f"total {res['meta']['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
