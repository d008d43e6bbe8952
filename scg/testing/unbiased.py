"""Statistical tests that a gradient estimator is unbiased.

`assert_unbiased` draws ``n`` independent surrogate gradients ĝ_1..ĝ_n (one fresh graph each,
under a fixed seed) and compares their mean with the exact gradient g from enumeration
([`scg.testing.exact_gradient`][scg.testing.exact_gradient]). For each coordinate j,

    z_j = (mean_j − g_j) / (s_j / √n),

with s_j the sample standard deviation. Under the null hypothesis (unbiased) each z_j is
approximately standard normal (central limit theorem), so rejecting when max_j |z_j| exceeds
z* = Φ⁻¹(1 − α / (2d)) has a false-failure rate of at most α (Bonferroni over d coordinates),
up to the normal approximation; n ≥ 500 keeps that approximation good for the bounded costs of
typical tests. Coordinates whose estimates do not vary beyond rounding (a spread within 64 machine
epsilons of the problem's scale, see [`compare`][scg.testing.compare]) must match g_j to ``atol``; every other
coordinate is z-tested, however small its gradient and standard error.
The test is deterministic: the same seed gives the same draws and the same verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from scg.credit.graph import Graph
from scg.errors import SCGError
from scg.testing.arguments import (
    Params,
    at_least,
    keyword_options,
    non_negative,
    open_unit,
    parameters,
    program_without_arguments,
    seed_of,
    unused_parameters,
)
from scg.testing.exact import exact_gradient

__all__ = [
    "UnbiasedReport",
    "assert_unbiased",
    "check_unbiased",
    "compare",
    "estimate_gradients",
    "estimate_gradients_batched",
]

Program = Callable[[], object]


def _flat(grads: Sequence[torch.Tensor | None], params: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in zip(params, grads)])


def estimate_gradients(
    program: Program,
    params: Params,
    n: int,
    *,
    seed: int = 0,
    surrogate_kwargs: dict[str, Any] | None = None,
    graph_kwargs: dict[str, Any] | None = None,
) -> torch.Tensor:
    """``n`` independent surrogate-gradient estimates, flattened: a ``(n, d)`` tensor.

    Each estimate runs ``program`` in a fresh ``scg.Graph`` and differentiates
    ``g.surrogate_loss(**surrogate_kwargs)``. The global RNG is seeded with ``seed`` inside
    ``torch.random.fork_rng``, so the caller's RNG state is left as it was.
    """
    params = parameters(params, "estimate_gradients")
    program_without_arguments(program, "estimate_gradients")
    at_least(n, 1, "n", "estimate_gradients")
    seed = seed_of(seed, "estimate_gradients")
    kwargs = keyword_options(surrogate_kwargs, Graph.surrogate_loss, "surrogate_kwargs", "estimate_gradients")
    graph_kwargs = keyword_options(graph_kwargs, Graph.__init__, "graph_kwargs", "estimate_gradients")
    out = []
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        for _ in range(n):
            with Graph(**graph_kwargs) as g:
                program()
            loss = g.surrogate_loss(**kwargs)
            grads: Sequence[torch.Tensor | None] = (
                torch.autograd.grad(loss, params, allow_unused=True) if loss.requires_grad else [None] * len(params)
            )  # nothing differentiable reached it: a zero estimate
            out.append(_flat(grads, params).detach())
    return torch.stack(out)


def estimate_gradients_batched(
    program: Callable[..., object],
    params: Params,
    n: int,
    *,
    particles: int = 256,
    seed: int = 0,
    surrogate_kwargs: dict[str, Any] | None = None,
    graph_kwargs: dict[str, Any] | None = None,
) -> torch.Tensor:
    """``n`` independent estimates from ``ceil(n / particles)`` runs: a ``(n, d)`` tensor.

    ``program(*reps)`` receives each parameter replicated along a new leading *particle*
    dimension, ``reps[i]`` of shape ``(particles, *params[i].shape)``, and must use particle p's
    copy only for the particle-p batch element of its nodes and costs. Because scg credits each
    batch element with its own costs, the gradient w.r.t. ``reps[i][p]`` is particle p's
    estimate: one forward and one backward give ``particles`` estimates. ``graph_kwargs`` are
    passed to each run's ``scg.Graph``.
    """
    params = parameters(params, "estimate_gradients_batched")
    if not callable(program):
        raise SCGError(f"estimate_gradients_batched: program must be callable, got {type(program).__name__}")
    at_least(n, 1, "n", "estimate_gradients_batched")
    at_least(particles, 1, "particles", "estimate_gradients_batched")
    seed = seed_of(seed, "estimate_gradients_batched")
    kwargs = keyword_options(surrogate_kwargs, Graph.surrogate_loss, "surrogate_kwargs", "estimate_gradients_batched")
    graph_kwargs = keyword_options(graph_kwargs, Graph.__init__, "graph_kwargs", "estimate_gradients_batched")
    out: list[torch.Tensor] = []
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        remaining = n
        while remaining > 0:
            p = min(particles, remaining)
            reps = [q.detach().unsqueeze(0).expand(p, *q.shape).clone().requires_grad_() for q in params]
            with Graph(**graph_kwargs) as g:
                program(*reps)
            loss = g.surrogate_loss(**kwargs)
            mixed = [k for k, whole in g.credit_pairs.items() if whole]
            if mixed:
                v, c = g.nodes[mixed[0][0]], g.nodes[mixed[0][1]]
                raise SCGError(
                    f"estimate_gradients_batched: {c.describe()} mixes the particles "
                    f"of {v.describe()} (scg credits it whole-plate), so the "
                    "per-particle gradients are not independent estimates; keep "
                    "particle p's computation in row p, or use estimate_gradients"
                )
            grads: Sequence[torch.Tensor | None] = (
                torch.autograd.grad(loss, reps, allow_unused=True) if loss.requires_grad else [None] * len(reps)
            )  # nothing differentiable reached it: zero estimates, as in estimate_gradients
            out.append(
                torch.cat(
                    [(torch.zeros_like(r) if gr is None else gr).reshape(p, -1) for r, gr in zip(reps, grads)], dim=1
                ).detach()
            )
            remaining -= p
    return torch.cat(out)


@dataclass
class UnbiasedReport:
    """The outcome of [`check_unbiased`][scg.testing.check_unbiased]."""

    passed: bool
    n: int
    exact: torch.Tensor
    mean: torch.Tensor
    stderr: torch.Tensor
    z: torch.Tensor
    critical: float
    p_value: float
    worst: int

    def __str__(self) -> str:
        j = self.worst
        verdict = "unbiased (not rejected)" if self.passed else "BIASED (rejected)"
        return (
            f"{verdict}: n={self.n}, d={self.exact.numel()}, max |z| = {abs(float(self.z[j])):.2f} "
            f"at coordinate {j} (critical {self.critical:.2f}, Bonferroni p = {self.p_value:.3g}); "
            f"estimate {float(self.mean[j]):.6g} ± {float(self.stderr[j]):.2g} vs exact "
            f"{float(self.exact[j]):.6g}"
            + (
                f" (its {self.n} estimates never varied: a deterministic bias, or an event rarer than about "
                f"1/{self.n} that they never drew)"
                if not self.passed and float(self.stderr[j]) == 0.0
                else ""
            )
        )


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


#: a coordinate counts as deterministic when its estimates spread by at most this many machine
#: epsilons of the problem's scale (rounding differences between runs), not by ``atol``
_ROUNDOFF_EPS = 64


def compare(estimates: torch.Tensor, exact: torch.Tensor, *, alpha: float = 1e-3, atol: float = 1e-6) -> UnbiasedReport:
    """Per-coordinate z-test of ``estimates`` (n, d) against ``exact`` (d,), Bonferroni over d.

    Scale-aware: coordinate j is z-tested whenever its estimates vary by more than rounding,
    however small the gradient (in float64 a standard error of 1e-9 is tested like one of 1; the
    float32 limit is below). Rounding is
    r = 64 · eps(dtype) · (1 + max_j (max |ĝ_j| + |g_j|)): the problem's scale, with quantities
    of order 1 as the floor (a gradient that is zero in exact arithmetic comes out as noise of
    order eps times the costs, whatever its own size). A coordinate whose estimates spread
    (max − min) by at most r is deterministic and must match g_j to ``atol · (1 + |g_j|)`` plus its
    own rounding: its spread and 64 · eps(dtype) · (1 + max |ĝ_j| + |g_j|). A coordinate with a
    non-finite estimate or exact value passes only when every estimate equals the exact value.
    A coordinate called deterministic that still varies is z-tested too, when its mean misses by
    more than its own rounding (a float32 score term of 0.01 beside a gradient of 1e4). What is
    not seen: in float32, a coordinate whose estimates and bias are all below 64·eps ≈ 7.6e-6 in
    absolute size (within rounding of quantities of order 1); scale the costs, or use float64.
    """
    alpha = open_unit(alpha, "alpha", "compare")
    atol = non_negative(atol, "atol", "compare")
    if not isinstance(estimates, torch.Tensor) or estimates.dim() != 2 or estimates.shape[0] < 1:
        found = tuple(estimates.shape) if isinstance(estimates, torch.Tensor) else type(estimates).__name__
        raise SCGError(f"compare: estimates must be a tensor (n, d) with n >= 1, got {found}")
    if not isinstance(exact, torch.Tensor) or exact.numel() != estimates.shape[1]:
        found = tuple(exact.shape) if isinstance(exact, torch.Tensor) else type(exact).__name__
        raise SCGError(
            f"compare: exact must be a tensor of {estimates.shape[1]} entries, one per column of the "
            f"estimates {tuple(estimates.shape)}, got {found}"
        )
    if estimates.shape[1] == 0:
        raise SCGError("compare: the estimates have no coordinates (shape (n, 0)): nothing would be tested")
    eps = torch.finfo(estimates.dtype if estimates.is_floating_point() else torch.double).eps
    est = estimates.double()
    ex = exact.double().reshape(-1)
    n, d = est.shape
    finite = torch.isfinite(est).all(0) & torch.isfinite(ex)  # (d,)
    safe = torch.where(finite, est, torch.zeros_like(est))  # (a non-finite value is judged apart, below)
    safe_ex = torch.where(finite, ex, torch.zeros_like(ex))
    mean = est.mean(0)
    std = est.std(0, unbiased=True) if n > 1 else torch.zeros(d, dtype=torch.double)
    se = std / math.sqrt(n)
    # the problem's scale over the finite coordinates (an infinite one made every coordinate
    # "deterministic" and passed it: one ±inf certified any bias)
    roundoff = _ROUNDOFF_EPS * eps * (1.0 + float((safe.abs().amax(0) + safe_ex.abs()).max()))
    spread = safe.amax(0) - safe.amin(0)
    degenerate = spread <= roundoff
    diff = mean - ex
    # (from the upper tail: 1 − alpha/(2d) rounds to 1 for a small alpha/(2d), an infinite critical value)
    critical = -float(torch.special.ndtri(torch.tensor(alpha / (2.0 * d), dtype=torch.double)))
    # a deterministic coordinate matches to its own rounding, not the largest coordinate's: the
    # spread its estimates show and eps at its own scale (a float32 coordinate missing its whole
    # gradient of 0.005 passed beside one of 1000)
    own = _ROUNDOFF_EPS * eps * (1.0 + safe.abs().amax(0) + safe_ex.abs())
    bad_degenerate = degenerate & (diff.abs() > atol * (1.0 + ex.abs()) + own + spread)
    # one that still varies is z-tested too, its mean off by more than its own rounding: the
    # problem's scale is a bound on the rounding, and a random coordinate far below it (a float32
    # score term of 0.01 beside a gradient of 1e4) carried a bias as large as its spread unseen
    varies = degenerate & (spread > 0) & (diff.abs() > own) & (se > 0)
    z = torch.where(degenerate & ~varies, torch.zeros_like(diff), diff / torch.where(se > 0, se, torch.ones_like(se)))
    z = torch.where(bad_degenerate, torch.full_like(z, math.inf) * diff.sign(), z)
    # a non-finite coordinate passes only when every estimate equals the exact value (inf == inf)
    same = (est == ex).all(0)
    z = torch.where(finite, z, torch.where(same, torch.zeros_like(z), torch.full_like(z, math.inf)))
    worst = int(z.abs().argmax())
    max_z = float(z.abs().max())
    p = 1.0 if math.isnan(max_z) else min(1.0, 2.0 * d * _normal_sf(max_z))
    passed = bool(max_z <= critical)
    return UnbiasedReport(passed, n, ex, mean, se, z, critical, p, worst)


def check_unbiased(
    program: Program,
    params: Params,
    n: int = 1000,
    *,
    seed: int = 0,
    alpha: float = 1e-3,
    atol: float = 1e-6,
    surrogate_kwargs: dict[str, Any] | None = None,
    exact: Sequence[torch.Tensor] | None = None,
    batched: Callable[..., object] | None = None,
    particles: int = 256,
    graph_kwargs: dict[str, Any] | None = None,
) -> UnbiasedReport:
    """Run the test of the module docstring and return its report (does not raise).

    Args:
        program: zero-argument callable calling ``scg.sample``/``scg.cost`` (see
            [`scg.testing.exact_gradient`][scg.testing.exact_gradient]).
        params: the tensors to differentiate with respect to.
        n: number of independent estimates.
        seed: RNG seed (the caller's RNG state is restored afterwards).
        alpha: false-failure rate of the test.
        atol: tolerance for coordinates whose estimates do not vary (beyond rounding).
        surrogate_kwargs: passed to ``surrogate_loss`` (e.g. ``{"discount": 0.5}``).
        exact: the exact gradient, when known; by default computed by enumeration.
        batched: the same program taking replicated parameters, to draw the estimates
            vectorized (see `estimate_gradients_batched`); ``program`` is still used for
            the exact gradient.
        particles: estimates per run of ``batched``.
        graph_kwargs: passed to each estimate's ``scg.Graph`` (e.g. ``{"structure":
            scg.Declared()}``; not to the enumeration of the exact gradient, which is tracked).

    When every rejected coordinate's estimates were all equal (missing the exact value), the
    estimates may have missed a rare event of the program (a category of probability 1e-3 is
    never drawn in 1000 runs with probability 0.37), which the z-test would call a bias:
    ``15 n`` more are drawn (seed ``seed + 1``) and the test repeated on all ``16 n``. A
    deterministic bias is rejected again; the report says when the worst coordinate never varied.
    """
    params = parameters(params, "check_unbiased")
    program_without_arguments(program, "check_unbiased")
    at_least(n, 2, "n", "check_unbiased")  # (one estimate has no spread: it would be judged deterministic)
    seed = seed_of(seed, "check_unbiased")
    surrogate_kwargs = keyword_options(surrogate_kwargs, Graph.surrogate_loss, "surrogate_kwargs", "check_unbiased")
    graph_kwargs = keyword_options(graph_kwargs, Graph.__init__, "graph_kwargs", "check_unbiased")
    if exact is not None:
        exact = list(exact)
        shapes = [tuple(p.shape) for p in params]
        found = [tuple(e.shape) if isinstance(e, torch.Tensor) else type(e).__name__ for e in exact]
        if found != shapes:
            raise SCGError(
                f"check_unbiased: exact must hold one gradient per parameter, of shapes {shapes}, got {found}"
            )
    if exact is not None and not any(bool(e.any()) for e in exact):
        # (the enumeration refuses params the program does not use; with a zero exact gradient
        # given, one run does: else all-zero estimates would match it whatever the estimator)
        probe = {k: v for k, v in (graph_kwargs or {}).items() if k != "structure"}  # (the caller's
        # structure object is not touched: a Cached one would learn this run's signature)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            with Graph(**probe) as g:
                program()
            loss = g.surrogate_loss(**dict(surrogate_kwargs or {}))
        unused_parameters(
            torch.autograd.grad(loss, params, allow_unused=True) if loss.requires_grad else [None] * len(params),
            "check_unbiased",
        )
    g_exact = _flat(exact if exact is not None else exact_gradient(program, params), params)

    def draw(count: int, draw_seed: int) -> torch.Tensor:
        if batched is not None:
            return estimate_gradients_batched(
                batched,
                params,
                count,
                particles=particles,
                seed=draw_seed,
                surrogate_kwargs=surrogate_kwargs,
                graph_kwargs=graph_kwargs,
            )
        return estimate_gradients(
            program, params, count, seed=draw_seed, surrogate_kwargs=surrogate_kwargs, graph_kwargs=graph_kwargs
        )

    estimates = draw(n, seed)
    report = compare(estimates, g_exact.detach(), alpha=alpha, atol=atol)
    if not report.passed and _never_varied(report):
        # every rejected coordinate's estimates were all equal: a deterministic bias, or a random
        # estimator whose rare event (a category of probability 1e-3) was never drawn, which
        # z = inf would call biased; 15 n more estimates tell them apart
        estimates = torch.cat([estimates, draw(_MORE * n, seed + 1)])
        report = compare(estimates, g_exact.detach(), alpha=alpha, atol=atol)
    return report


#: how many times ``n`` more estimates `check_unbiased` draws when its rejected coordinates never varied
_MORE = 15


def _never_varied(report: UnbiasedReport) -> bool:
    rejected = report.z.abs() > report.critical
    return bool(rejected.any()) and bool((report.stderr[rejected] == 0).all())


def assert_unbiased(
    program: Program,
    params: Params,
    n: int = 1000,
    *,
    seed: int = 0,
    alpha: float = 1e-3,
    atol: float = 1e-6,
    surrogate_kwargs: dict[str, Any] | None = None,
    exact: Sequence[torch.Tensor] | None = None,
    batched: Callable[..., object] | None = None,
    particles: int = 256,
    graph_kwargs: dict[str, Any] | None = None,
) -> UnbiasedReport:
    """Raise ``AssertionError`` when the surrogate gradient of ``program`` is detectably biased.

    See [`check_unbiased`][scg.testing.check_unbiased] for the arguments; returns the report when the test passes.
    """
    report = check_unbiased(
        program,
        params,
        n,
        seed=seed,
        alpha=alpha,
        atol=atol,
        surrogate_kwargs=surrogate_kwargs,
        exact=exact,
        batched=batched,
        particles=particles,
        graph_kwargs=graph_kwargs,
    )
    if not report.passed:
        raise AssertionError(str(report))
    return report
