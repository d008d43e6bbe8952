"""Exact expectations and gradients by enumerating every run of a program.

For a program whose stochastic nodes have finite support, E[Σ c] = Σ_runs p(run) · Σ_c c(run),
with p(run) = Π_v p(v | parents_v). Each run is replayed with its values forced (``scg.Graph``'s
``intervene`` hook), so p(run) and the costs stay differentiable functions of θ, and
``torch.autograd`` gives the exact ∇_θ E[Σ c] (and Hessians, with ``create_graph=True``).

Normal nodes are integrated by Gauss-Hermite quadrature at points fixed at the current parameters,
x_k = μ₀ + σ₀√2 t_k, with weights (w_k/√π) · p(x_k; μ, σ) / p(x_k; μ₀, σ₀): the ratio is 1 in value
and carries the whole dependence on θ (a likelihood ratio on the weights), so the gradient is
∫ c(x) ∇p(x; θ) dx also for costs that are not differentiable in x (a step function), where moving
the points (x = μ + σ√2 t_k) would differentiate c and get 0. Exact for costs polynomial in x of
degree < 2K − 2 (the ratio's derivatives are polynomials of degree ≤ 2 in x); for other smooth
costs the error falls quickly with K but is not zero, and for a step function it is of the order
of the weight of the point nearest the step (compare two values of K). A biased-looking result with
few points may be quadrature error: ``scg.testing``'s z-test is sensitive enough to see it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch.distributions import (
    Bernoulli,
    Binomial,
    Categorical,
    Distribution,
    Normal,
    OneHotCategorical,
)

from scg.errors import SCGError
from scg.graph.graph import Graph
from scg.surrogate import objective

__all__ = ["exact_expectation", "exact_gradient", "exact_hessian"]

Program = Callable[[], object]

FINITE = (Bernoulli, Binomial, Categorical, OneHotCategorical)


#: (forced value, fixed log-weight or None for log p(value), whether the weight carries the
#: likelihood ratio p(value; θ) / p(value; θ₀) of a quadrature point)
Choice = tuple[torch.Tensor, "torch.Tensor | None", bool]


class _Branch(Exception):
    """Raised inside a run to stop it at the first node whose value is not forced yet."""

    def __init__(self, choices: list[Choice]) -> None:
        self.choices = choices




def _finite_choices(dist: Distribution, shape: torch.Size, name: str,
                    max_runs: int) -> list[Choice]:
    support = dist.enumerate_support(expand=True)  # (K, *batch, *event)
    k = support.shape[0]
    full = shape + dist.batch_shape
    support = support.reshape(k, *([1] * len(shape)), *support.shape[1:]).expand(
        k, *full, *dist.event_shape)
    elements = int(np.prod(full)) if len(full) else 1
    if k**elements > max_runs:
        raise SCGError(f"exact enumeration of node '{name}': {k}^{elements} joint values exceed "
                       f"max_runs={max_runs}; use a smaller batch")
    flat = support.reshape((k, elements) + tuple(dist.event_shape))
    cols = torch.arange(elements)
    out: list[Choice] = []
    for combo in itertools.product(range(k), repeat=elements):
        value = flat[torch.tensor(combo, dtype=torch.long), cols]
        out.append((value.reshape(tuple(full) + tuple(dist.event_shape)), None, False))
    return out


def _normal_choices(dist: Normal, shape: torch.Size, name: str, points: int,
                    max_runs: int) -> list[Choice]:
    full = shape + dist.batch_shape
    elements = int(np.prod(full)) if len(full) else 1
    if points**elements > max_runs:
        raise SCGError(f"exact integration of node '{name}': {points}^{elements} quadrature points "
                       f"exceed max_runs={max_runs}; use a smaller batch")
    t, w = np.polynomial.hermite.hermgauss(points)
    loc = dist.loc.detach().expand(full)
    scale = dist.scale.detach().expand(full)
    dtype = loc.dtype
    out: list[Choice] = []
    for combo in itertools.product(range(points), repeat=elements):
        tk = torch.tensor(t[list(combo)], dtype=dtype).reshape(tuple(full))
        lw = torch.tensor(float(np.sum(np.log(w[list(combo)]))) - elements * 0.5 * math.log(math.pi),
                          dtype=dtype)
        out.append((loc + scale * math.sqrt(2.0) * tk, lw, True))
    return out


def _runs(program: Program, quadrature: int, max_runs: int) -> list[tuple[Graph, torch.Tensor]]:
    """Every complete run with its log-weight (log p(run), quadrature weights for Normals)."""
    done: list[tuple[Graph, torch.Tensor]] = []
    pending: list[list[Choice]] = [[]]
    while pending:
        prefix = pending.pop()
        position = [0]
        logw: list[torch.Tensor] = []

        def intervene(name: str, step: int | None, dist: Distribution, shape: torch.Size,
                      prefix: list[Choice] = prefix,
                      position: list[int] = position,
                      logw: list[torch.Tensor] = logw) -> torch.Tensor:
            i = position[0]
            position[0] += 1
            if i < len(prefix):
                value, lw, ratio = prefix[i]
                # (scored on a copy: the program may edit its sample in place)
                if lw is None:
                    logw.append(dist.log_prob(value.clone()).sum())
                elif ratio:  # fixed points, weights w_k · p(x_k; θ) / p(x_k; θ₀)
                    lp = dist.log_prob(value.clone()).sum()
                    logw.append(lw + (lp - lp.detach()))
                else:
                    logw.append(lw)
                return value
            if isinstance(dist, FINITE):
                raise _Branch(_finite_choices(dist, shape, name, max_runs))
            if isinstance(dist, Normal):
                raise _Branch(_normal_choices(dist, shape, name, quadrature, max_runs))
            raise SCGError(f"exact enumeration: node '{name}' has a {type(dist).__name__}, which "
                           "has no finite support; supported: Bernoulli, Binomial, Categorical, "
                           "OneHotCategorical (enumerated) and Normal (quadrature)")

        g = Graph(intervene=intervene, warn_on_escape=False)
        try:
            with g:
                program()
        except _Branch as b:
            for choice in reversed(b.choices):
                pending.append([*prefix, choice])
            if len(pending) + len(done) > max_runs:
                raise SCGError(f"exact enumeration: more than max_runs={max_runs} runs") from None
            continue
        total = torch.stack(logw).sum() if logw else torch.zeros(())
        done.append((g, total))
    return done


def exact_expectation(program: Program, *, quadrature: int = 48,
                      max_runs: int = 200_000) -> torch.Tensor:
    """E[Σ costs] of ``program``, exactly, as a differentiable function of its parameters.

    Args:
        program: a zero-argument callable that calls ``scg.sample`` and ``scg.cost``; it is run
            once per joint value of the stochastic nodes, inside a graph opened here. It must be
            deterministic given those values (parameters are captured from its closure).
        quadrature: Gauss-Hermite points per element of a Normal node.
        max_runs: refuse to enumerate more runs than this.
    """
    total: torch.Tensor | None = None
    for g, logw in _runs(program, quadrature, max_runs):
        term = torch.exp(logw) * objective(g)
        total = term if total is None else total + term
    assert total is not None
    return total


def exact_gradient(program: Program, params: Sequence[torch.Tensor], *, quadrature: int = 48,
                   max_runs: int = 200_000) -> list[torch.Tensor]:
    """Exact ∇_θ E[Σ costs] for each tensor in ``params`` (zeros where it has no influence)."""
    params = list(params)
    value = exact_expectation(program, quadrature=quadrature, max_runs=max_runs)
    grads = torch.autograd.grad(value, params, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]


def exact_hessian(program: Program, params: Sequence[torch.Tensor], *, quadrature: int = 48,
                  max_runs: int = 200_000) -> torch.Tensor:
    """Exact Hessian of E[Σ costs] w.r.t. the flattened, concatenated ``params`` (d, d)."""
    params = list(params)
    value = exact_expectation(program, quadrature=quadrature, max_runs=max_runs)
    grads = torch.autograd.grad(value, params, create_graph=True, allow_unused=True)
    flat = torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1)
                      for p, g in zip(params, grads)])
    rows = []
    for i in range(flat.shape[0]):
        if not flat[i].requires_grad:
            rows.append(torch.zeros_like(flat))
            continue
        hi = torch.autograd.grad(flat[i], params, retain_graph=True, allow_unused=True)
        rows.append(torch.cat([(torch.zeros_like(p) if h is None else h).reshape(-1)
                               for p, h in zip(params, hi)]))
    return torch.stack(rows)
