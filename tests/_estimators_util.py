"""Helpers shared by the statistical tests (not a test module).

Estimates are drawn *particle-batched*: the program receives θ replicated along a leading particle
dimension (P, d) and uses row p for batch element p only, so one graph gives P independent
estimates (the gradient w.r.t. row p). Exact values come from :mod:`scg.testing` (enumeration, one
graph per run) or, for the same particle-batched programs, from :func:`exact_expectation_batched`:
the same enumeration with one *run per row*, so a graph of a few hundred runs costs one forward
pass instead of a few hundred (``test_core_unbiased.py`` checks that both agree).

An estimator's own mean, exactly, is ``scg.testing.expected_estimate``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.distributions import Distribution, Independent, Normal

import scg
import scg.testing as st

Batched = Callable[[torch.Tensor], object]


class _Expand(Exception):
    """Stops a pass at the first node that has no forced value yet, with its choices per row."""

    def __init__(self, values: torch.Tensor, fixed: torch.Tensor | None, k: int) -> None:
        self.values, self.fixed, self.k = values, fixed, k


@functools.cache
def _hermite(quadrature: int) -> tuple[np.ndarray, np.ndarray]:
    """The Gauss-Hermite points and weights (computed once per size: most programs have no Normal)."""
    return np.polynomial.hermite.hermgauss(quadrature)


def _choices(dist: Distribution, rows: int, quadrature: int) -> _Expand:
    """Every value of a node for each of ``rows`` runs: run r, choice j becomes row r·K + j."""
    if isinstance(dist, Normal):  # Gauss-Hermite points fixed at the current parameters
        t, w = _hermite(quadrature)
        loc = dist.loc.detach().expand(rows)
        pts = torch.as_tensor(t, dtype=loc.dtype) * math.sqrt(2.0)
        values = (loc[:, None] + dist.scale.detach().expand(rows)[:, None] * pts).reshape(-1)
        lw = torch.as_tensor(np.log(w) - 0.5 * math.log(math.pi), dtype=loc.dtype)
        return _Expand(values, lw.repeat(rows), len(t))
    if isinstance(dist, Independent):  # (rows,) vectors of independent finite elements: every joint value
        elements = dist.base_dist.enumerate_support(expand=False).reshape(-1)  # (k,)
        size = dist.event_shape.numel()
        joint = torch.cartesian_prod(*[elements] * size).reshape(-1, *dist.event_shape)  # (k^size, *event)
        k = joint.shape[0]
        return _Expand(joint.repeat(rows, *[1] * len(dist.event_shape)), None, k)
    support = dist.enumerate_support(expand=True)  # (K, rows, *event)
    k = support.shape[0]
    return _Expand(support.movedim(0, 1).reshape(rows * k, *support.shape[2:]), None, k)


def exact_expectation_batched(batched: Batched, theta: torch.Tensor, *, quadrature: int = 48) -> torch.Tensor:
    """E[Σ costs] of a particle-batched program, exactly, as a differentiable function of θ.

    The enumeration of ``scg.testing.exact_expectation`` (finite nodes enumerated; a Normal node
    integrated by Gauss-Hermite points fixed at the current parameters, the likelihood ratio on
    the weights), with every run a row of one graph: each pass runs ``batched`` on θ replicated
    once per run and stops at the first node without a forced value, whose choices multiply the
    rows. Each node's batch shape must be the rows (one element per run).
    """
    values: list[torch.Tensor] = []  # node i's forced value in every run
    fixed: list[torch.Tensor | None] = []  # its quadrature log-weights (None: log p(value))
    while True:
        rows = values[0].shape[0] if values else 1
        logw: list[torch.Tensor] = []

        def intervene(
            name: str,
            step: int | None,
            dist: Distribution,
            shape: torch.Size,
            rows: int = rows,
            logw: list[torch.Tensor] = logw,
            values: list[torch.Tensor] = values,
            fixed: list[torch.Tensor | None] = fixed,
        ) -> torch.Tensor:
            if len(shape) or tuple(dist.batch_shape) != (rows,):
                raise ValueError(
                    f"exact_expectation_batched: node {name!r} has batch shape "
                    f"{tuple(shape + dist.batch_shape)}, expected ({rows},): one "
                    "element per run"
                )
            i = len(logw)
            if i == len(values):
                raise _choices(dist, rows, quadrature)
            lp = dist.log_prob(values[i].clone()).reshape(rows, -1).sum(1)
            f = fixed[i]
            logw.append(lp if f is None else f + (lp - lp.detach()))
            return values[i]

        try:  # declared: values and costs are all a pass needs (tracking would double its CPU)
            with scg.Graph(intervene=intervene, warn_on_escape=False, structure=scg.Declared()) as g:
                batched(theta.unsqueeze(0).expand(rows, *theta.shape))
        except _Expand as e:
            values = [v.repeat_interleave(e.k, 0) for v in values] + [e.values]
            fixed = [None if f is None else f.repeat_interleave(e.k, 0) for f in fixed] + [e.fixed]
            continue
        total = sum(c.value.reshape(rows, -1).sum(1) for c in g.cost_nodes)
        assert isinstance(total, torch.Tensor), "the program has no cost node"
        return (torch.stack(logw).sum(0).exp() * total).sum() if logw else total.sum()


def exact_gradient_batched(batched: Batched, theta: torch.Tensor, *, quadrature: int = 48) -> torch.Tensor:
    """Exact ∇_θ E[Σ costs] (see :func:`exact_expectation_batched`)."""
    value = exact_expectation_batched(batched, theta, quadrature=quadrature)
    (grad,) = torch.autograd.grad(value, theta, allow_unused=True)
    return torch.zeros_like(theta) if grad is None else grad


def exact_hessian_batched(batched: Batched, theta: torch.Tensor, *, quadrature: int = 48) -> torch.Tensor:
    """Exact Hessian of E[Σ costs] w.r.t. θ (d,): a (d, d) tensor."""
    value = exact_expectation_batched(batched, theta, quadrature=quadrature)
    (grad,) = torch.autograd.grad(value, theta, create_graph=True)
    rows = []
    for j in range(theta.numel()):
        if not grad[j].requires_grad:
            rows.append(torch.zeros_like(theta))
            continue
        (h,) = torch.autograd.grad(grad[j], theta, retain_graph=True, allow_unused=True)
        rows.append(torch.zeros_like(theta) if h is None else h)
    return torch.stack(rows).detach()


def estimates(
    batched: Batched, theta: torch.Tensor, n: int, *, seed: int = 0, particles: int = 2000, **surrogate_kwargs: Any
) -> torch.Tensor:
    """(n, d) independent gradient estimates of ``g.surrogate_loss(**surrogate_kwargs)``."""
    return st.estimate_gradients_batched(
        batched, [theta], n, particles=particles, seed=seed, surrogate_kwargs=surrogate_kwargs
    )


def hessian_estimates(
    batched: Batched, theta: torch.Tensor, n: int, *, seed: int = 0, **surrogate_kwargs: Any
) -> torch.Tensor:
    """(n, d, d) independent Hessian estimates (second derivatives of the surrogate)."""
    d = theta.numel()
    with torch.random.fork_rng():
        torch.default_generator.manual_seed(seed)  # (torch.manual_seed also formats the stack for lazy CUDA seeding)
        reps = theta.detach().unsqueeze(0).expand(n, d).clone().requires_grad_()
        with scg.Graph() as g:
            batched(reps)
        loss = g.surrogate_loss(**surrogate_kwargs)
        (grad,) = torch.autograd.grad(loss, reps, create_graph=True)
        rows = []
        for j in range(d):
            if not grad[:, j].requires_grad:
                rows.append(torch.zeros_like(reps))
                continue
            (h,) = torch.autograd.grad(grad[:, j].sum(), reps, retain_graph=True, allow_unused=True)
            rows.append(torch.zeros_like(reps) if h is None else h)
    return torch.stack(rows, dim=1).detach()


def check(est: torch.Tensor, exact: torch.Tensor, alpha: float = 1e-3) -> st.UnbiasedReport:
    """z-test of estimates (n, ...) against ``exact`` (...), Bonferroni over the coordinates."""
    return st.compare(est.reshape(est.shape[0], -1), exact.reshape(-1).detach(), alpha=alpha)
