"""Helpers shared by the tests/test_estimators_*.py files (not a test module).

Exact values come from :mod:`scg.testing` (enumeration); estimates are drawn *particle-batched*:
the program receives θ replicated along a leading particle dimension (P, d) and uses row p for
batch element p only, so one graph gives P independent estimates (the gradient w.r.t. row p).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

import scg
import scg.testing as st

Batched = Callable[[torch.Tensor], object]


def estimates(batched: Batched, theta: torch.Tensor, n: int, *, seed: int = 0,
              particles: int = 2000, **surrogate_kwargs: Any) -> torch.Tensor:
    """(n, d) independent gradient estimates of ``g.surrogate_loss(**surrogate_kwargs)``."""
    return st.estimate_gradients_batched(batched, [theta], n, particles=particles, seed=seed,
                                         surrogate_kwargs=surrogate_kwargs)


def hessian_estimates(batched: Batched, theta: torch.Tensor, n: int, *, seed: int = 0,
                      **surrogate_kwargs: Any) -> torch.Tensor:
    """(n, d, d) independent Hessian estimates (second derivatives of the surrogate)."""
    d = theta.numel()
    with torch.random.fork_rng():
        torch.manual_seed(seed)
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
            (h,) = torch.autograd.grad(grad[:, j].sum(), reps, retain_graph=True,
                                       allow_unused=True)
            rows.append(torch.zeros_like(reps) if h is None else h)
    return torch.stack(rows, dim=1).detach()


def check(est: torch.Tensor, exact: torch.Tensor, alpha: float = 1e-3) -> st.UnbiasedReport:
    """z-test of estimates (n, ...) against ``exact`` (...), Bonferroni over the coordinates."""
    return st.compare(est.reshape(est.shape[0], -1), exact.reshape(-1).detach(), alpha=alpha)
