"""Exact expectations and gradients by enumerating every run of a program.

For a program whose stochastic nodes have finite support, E[Σ c] = Σ_runs p(run) · Σ_c c(run),
with p(run) = Π_v p(v | parents_v). Each run is replayed with its values forced (``scg.Graph``'s
``intervene`` hook), so p(run) and the costs stay differentiable functions of θ, and
``torch.autograd`` gives the exact ∇_θ E[Σ c] (and Hessians, with ``create_graph=True``).

Normal nodes are integrated by Gauss-Hermite quadrature at points fixed at the current parameters,
x_k = μ₀ + σ₀√2 t_k, with weights (w_k/√π) · p(x_k; μ, σ) / p(x_k; μ₀, σ₀): the ratio is 1 in value
and carries the whole dependence on θ (a likelihood ratio on the weights), so the gradient is a
quadrature of ∫ c(x) ∇p(x; θ) dx; moving the points instead (x = μ + σ√2 t_k) would differentiate
c and get 0 for a cost that is not differentiable in x.

What it is exact for: with K points, costs polynomial in x of degree < 2K − 2 (the ratio's
derivatives are polynomials of degree ≤ 2 in x). Smooth costs converge quickly in K but are not
exact (tanh of a wide Normal: ~1e-4 relative at K = 48). Costs that are **not smooth** in x (a step
function 1[x > a], rounding, indexing a table by ⌊x⌋) are **not** computed exactly: the error is
of the order of the weight of the point nearest the jump and falls slowly and erratically with K
(d/dμ P(x > 0.5) at μ = 0.2: 0.3628 at K = 48, 0.3805 at 96, exact 0.3814). [exact_gradient][scg.testing.exact_gradient]
therefore also integrates with K // 2 points when the program has Normal nodes and emits a
[`QuadratureWarning`][scg.testing.QuadratureWarning] when the two disagree by more than 1% of the gradient's scale.

Enumeration is exponential: a node with K values and E batch elements has K^E joint values, and
the runs multiply over nodes. The number of runs is counted along the first run before it is
enumerated (the product of every node's joint values, exact when the nodes drawn do not depend on
the values), and more than ``max_runs`` is refused with that count.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Collection, Iterator

import numpy as np
import torch
from torch.distributions import (
    Bernoulli,
    Binomial,
    Categorical,
    Distribution,
    Independent,
    Normal,
    OneHotCategorical,
)

from scg.credit.graph import Graph
from scg.credit.surrogate import objective
from scg.errors import SCGError, expect_bool
from scg.graph.structure import Structure
from scg.testing.arguments import Params, at_least, parameters, program_without_arguments, unused_parameters

__all__ = ["QuadratureWarning", "exact_expectation", "exact_gradient", "exact_hessian"]

Program = Callable[[], object]

FINITE = (Bernoulli, Binomial, Categorical, OneHotCategorical)


#: (forced value, fixed log-weight or None for log p(value), whether the weight carries the
#: likelihood ratio p(value; θ) / p(value; θ₀) of a quadrature point)
Choice = tuple[torch.Tensor, "torch.Tensor | None", bool]


class _Branch(BaseException):
    """Raised inside a run to stop it at the first node whose value is not forced yet (not an
    ``Exception``: a program's ``try/except Exception`` around a draw must not swallow it)."""

    def __init__(self, choices: list[Choice], runs: int, path: tuple[str, ...]) -> None:
        self.choices = choices
        self.runs = runs
        self.path = path


class _TooMany(BaseException):
    """Raised inside a run when the runs counted along its path exceed ``max_runs``."""

    def __init__(self, runs: int, path: tuple[str, ...]) -> None:
        self.runs = runs
        self.path = path


class QuadratureWarning(UserWarning):
    """Gauss-Hermite quadrature of a Normal node did not converge (a cost not smooth in x)."""


def _joint_values(dist: Distribution, shape: torch.Size, quadrature: int, where: str) -> tuple[int, str]:
    """How many joint values (or quadrature points) a node has, and how, e.g. ``3^2``."""
    full = shape + dist.batch_shape
    elements = int(np.prod(full)) if len(full) else 1
    if (
        isinstance(dist, Binomial)
        and dist.total_count.numel() > 1
        and bool((dist.total_count != dist.total_count.flatten()[0]).any())
    ):
        raise SCGError(
            f"{where}: a Binomial whose total_count differs between elements has no common "
            f"support to enumerate (total_count {dist.total_count.tolist()}); use one total_count, or "
            "one node per count"
        )
    k = quadrature if isinstance(dist, Normal) else int(dist.enumerate_support(expand=False).shape[0])
    return k**elements, f"{k}^{elements}"


def _finite_choices(dist: Distribution, shape: torch.Size) -> list[Choice]:
    support = dist.enumerate_support(expand=True)  # (K, *batch, *event)
    k = support.shape[0]
    full = shape + dist.batch_shape
    support = support.reshape(k, *([1] * len(shape)), *support.shape[1:]).expand(k, *full, *dist.event_shape)
    elements = int(np.prod(full)) if len(full) else 1
    flat = support.reshape((k, elements) + tuple(dist.event_shape))
    cols = torch.arange(elements)
    out: list[Choice] = []
    for combo in itertools.product(range(k), repeat=elements):
        value = flat[torch.tensor(combo, dtype=torch.long), cols]
        out.append((value.reshape(tuple(full) + tuple(dist.event_shape)), None, False))
    return out


def _normal_choices(dist: Normal, shape: torch.Size, points: int) -> list[Choice]:
    full = shape + dist.batch_shape
    elements = int(np.prod(full)) if len(full) else 1
    t, w = np.polynomial.hermite.hermgauss(points)
    loc = dist.loc.detach().expand(full)
    scale = dist.scale.detach().expand(full)
    dtype = loc.dtype
    out: list[Choice] = []
    for combo in itertools.product(range(points), repeat=elements):
        tk = torch.tensor(t[list(combo)], dtype=dtype).reshape(tuple(full))
        lw = torch.tensor(float(np.sum(np.log(w[list(combo)]))) - elements * 0.5 * math.log(math.pi), dtype=dtype)
        out.append((loc + scale * math.sqrt(2.0) * tk, lw, True))
    return out


def joint_runs(
    program: Program,
    quadrature: int,
    max_runs: int,
    *,
    where: str = "exact enumeration",
    keep: Collection[str] = (),
    finite: bool = False,
    structure: Structure | None = None,
    seen: set[str] | None = None,
) -> Iterator[tuple[Graph, torch.Tensor, list[Choice]]]:
    """Every complete run: its graph, its log-weight (log p(run), quadrature weights for
    Normals) and the forced choices, in the order the program draws its nodes.

    ``where`` names the caller in the errors. The nodes named in ``keep`` are not forced (drawn as
    their estimator draws them; the run may then move torch's generator). ``finite`` refuses a
    Normal node instead of integrating it. ``structure`` is each run's graph's (None: tracked).
    ``seen`` collects the names of the nodes drawn."""
    # (forced choices, product of the joint values of the nodes on the path, their description)
    pending: list[tuple[list[Choice], int, tuple[str, ...]]] = [([], 1, ())]
    done = 0
    grad_at_start = torch.is_grad_enabled()
    while pending:
        prefix, runs, path = pending.pop()
        position = [0]
        logw: list[torch.Tensor] = []
        kept = [False]

        def intervene(
            name: str,
            step: int | None,
            dist: Distribution,
            shape: torch.Size,
            prefix: list[Choice] = prefix,
            position: list[int] = position,
            logw: list[torch.Tensor] = logw,
            runs: int = runs,
            path: tuple[str, ...] = path,
            kept: list[bool] = kept,
        ) -> torch.Tensor | None:
            if seen is not None:
                seen.add(name)
            if name in keep:
                kept[0] = True
                return None
            i = position[0]
            position[0] += 1
            if grad_at_start and not torch.is_grad_enabled():  # (its weight's gradient would be lost
                # in the oracle as in the estimator, and the two would agree on a biased gradient)
                raise SCGError(
                    f"{where}: node '{name}' is drawn under torch.no_grad(), so the gradient of "
                    "its probability is lost, here as in the surrogate; draw it with gradients on"
                )
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
                return value.clone()  # (each run its own: the program may edit its sample in place)
            base = dist
            while isinstance(base, Independent):  # the same elements, scored jointly
                base = base.base_dist
            if finite and not isinstance(base, FINITE):
                raise SCGError(
                    f"{where}: node '{name}' has a {type(base).__name__}, which has no finite "
                    "support to enumerate; supported: Bernoulli, Binomial, Categorical, "
                    "OneHotCategorical, and Independent of these. Name the node in keep= to draw "
                    "it as its estimator does (the result is then random over its draws)"
                )
            if not isinstance(base, (*FINITE, Normal)):
                raise SCGError(
                    f"{where}: node '{name}' has a {type(dist).__name__}, "
                    "which has no finite support; supported: Bernoulli, Binomial, "
                    "Categorical, OneHotCategorical (enumerated) and Normal "
                    "(quadrature), and Independent of these"
                )
            count, how = _joint_values(base, shape, quadrature, where)
            total = runs * count
            what = "quadrature points" if isinstance(base, Normal) else "joint values"
            here = (*path, f"'{name}': {how} {what}")
            if total > max_runs:
                raise _TooMany(total, here)
            if isinstance(base, Normal):
                choices = _normal_choices(base, shape, quadrature)
            else:
                choices = _finite_choices(base, shape)
            raise _Branch(choices, total, here)

        g = Graph(intervene=intervene, warn_on_escape=False, structure=structure)
        # (an estimator's own noise as it scores a forced value, ARM's u, is scg's, not the
        # program's: it must not look like a hidden draw to the check below)
        g.scores_apart = True
        rng = torch.random.get_rng_state()
        try:
            with g:
                program()
        except _Branch as b:
            for choice in reversed(b.choices):
                pending.append(([*prefix, choice], b.runs, b.path))
            if len(pending) + done > max_runs:
                raise SCGError(f"{where}: more than max_runs={max_runs} runs") from None
            continue
        except _TooMany as t:
            raise SCGError(
                f"{where}: {t.runs} runs exceed max_runs={max_runs} (counted before "
                f"enumerating, along the first run: {' × '.join(t.path)}; a node with K values and "
                "E batch elements has K^E joint values); use a smaller batch or fewer nodes, or "
                "raise max_runs"
            ) from None
        if g.nested:  # (its draws are not forced: the enumeration opens the program's graph)
            raise SCGError(
                f"{where}: the program opened its own scg.Graph; the helpers open the graph "
                "themselves, so the program calls scg.sample and scg.cost without one"
            )
        if not kept[0] and not torch.equal(rng, torch.random.get_rng_state()):  # (every node's value was forced)
            raise SCGError(
                f"{where}: the program drew random numbers outside scg.sample (torch's "
                "generator moved during a run whose every node was given its value: dropout, "
                "torch.rand, a distribution's .sample()); the enumeration would differ from call to "
                "call. Make the program deterministic given its nodes (model.eval(), or draw with scg.sample)"
            )
        done += 1
        yield g, torch.stack(logw).sum() if logw else torch.zeros(()), prefix


def _expectation(program: Program, quadrature: int, max_runs: int) -> tuple[torch.Tensor, bool]:
    """E[Σ costs] and whether a Normal node was integrated by quadrature."""
    total: torch.Tensor | None = None
    quadrature_used = False
    for g, logw, prefix in joint_runs(program, quadrature, max_runs):
        quadrature_used = quadrature_used or any(ratio for _, _, ratio in prefix)
        if bool(torch.isneginf(logw.detach())):  # (a value of probability 0: an infinite cost there is not 0 · inf)
            continue
        term = torch.exp(logw) * objective(g)
        total = term if total is None else total + term
    assert total is not None
    return total, quadrature_used


def exact_expectation(program: Program, *, quadrature: int = 48, max_runs: int = 200_000) -> torch.Tensor:
    """E[Σ costs] of ``program``, exactly, as a differentiable function of its parameters.

    Args:
        program: a zero-argument callable that calls ``scg.sample`` and ``scg.cost``; it is run
            once per joint value of the stochastic nodes, inside a graph opened here. It must be
            deterministic given those values (parameters are captured from its closure).
        quadrature: Gauss-Hermite points per element of a Normal node (exact for costs
            polynomial in x of degree < 2K − 2, approximate otherwise: see the module docstring).
        max_runs: refuse to enumerate more runs than this (counted before enumerating).
    """
    _checked(program, quadrature, max_runs, "exact_expectation")
    return _expectation(program, quadrature, max_runs)[0]


#: relative disagreement of the K and K // 2 point quadratures that triggers a QuadratureWarning
QUADRATURE_RTOL = 1e-2


def _grad(value: torch.Tensor, params: list[torch.Tensor], where: str) -> list[torch.Tensor]:
    """∇ ``value`` for each of ``params`` (zeros where it has no influence; refused when none has)."""
    grads = torch.autograd.grad(value, params, allow_unused=True) if value.requires_grad else [None] * len(params)
    unused_parameters(grads, where)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]


def _checked(program: object, quadrature: object, max_runs: object, where: str) -> None:
    program_without_arguments(program, where)
    at_least(quadrature, 1, "quadrature", where)
    at_least(max_runs, 1, "max_runs", where)


def exact_gradient(
    program: Program,
    params: Params,
    *,
    quadrature: int = 48,
    max_runs: int = 200_000,
    check_quadrature: bool = True,
) -> list[torch.Tensor]:
    """Exact ∇_θ E[Σ costs] for each tensor in ``params`` (zeros where it has no influence).

    Exact for finite nodes; for Normal nodes a quadrature (see the module docstring). With
    ``check_quadrature`` a program with Normal nodes is integrated again with ``quadrature // 2``
    points, and a `QuadratureWarning` names the disagreement when the two gradients differ
    by more than 1% of the gradient's largest entry: the cost is then probably not smooth in a
    Normal node's value (a step function, rounding, indexing), where the result is approximate.

    Not at a boundary probability: a value of probability exactly 0 (``Bernoulli(probs=θ)`` at
    θ = 0) is skipped, and torch clamps its log-probability, so the one-sided derivative through
    it (f(1) − f(0) there) is missing; the estimators miss it alike, and `check_unbiased` would
    pass them. Test at interior parameters.
    """
    params = parameters(params, "exact_gradient")
    _checked(program, quadrature, max_runs, "exact_gradient")
    expect_bool(check_quadrature, "exact_gradient(check_quadrature=...)")
    value, quadrature_used = _expectation(program, quadrature, max_runs)
    grads = _grad(value, params, "exact_gradient")
    if check_quadrature and quadrature_used and quadrature >= 4:
        coarse = _grad(_expectation(program, quadrature // 2, max_runs)[0], params, "exact_gradient")
        fine_flat = torch.cat([g.detach().reshape(-1) for g in grads])
        coarse_flat = torch.cat([g.detach().reshape(-1) for g in coarse])
        diff = (fine_flat - coarse_flat).abs()
        if diff.numel() and float(diff.max()) > QUADRATURE_RTOL * float(fine_flat.abs().max()) + 1e-12:
            j = int(diff.argmax())
            warnings.warn(
                f"exact_gradient: the Gauss-Hermite quadrature of a Normal node has not converged: "
                f"{quadrature} points give {float(fine_flat[j]):.6g} and {quadrature // 2} give "
                f"{float(coarse_flat[j]):.6g} at coordinate {j}. The cost is probably not smooth "
                "in the node's value (a step function, rounding, indexing) or varies quickly over "
                "its width; quadrature is approximate there, not exact: raise quadrature=, or "
                "test with a discrete node",
                QuadratureWarning,
                stacklevel=2,
            )
    return grads


def exact_hessian(program: Program, params: Params, *, quadrature: int = 48, max_runs: int = 200_000) -> torch.Tensor:
    """Exact Hessian of E[Σ costs] w.r.t. the flattened, concatenated ``params`` (d, d)."""
    params = parameters(params, "exact_hessian")
    _checked(program, quadrature, max_runs, "exact_hessian")
    value = _expectation(program, quadrature, max_runs)[0]
    grads = (
        torch.autograd.grad(value, params, create_graph=True, allow_unused=True)
        if value.requires_grad
        else (None,) * len(params)
    )
    unused_parameters(grads, "exact_hessian")
    flat = torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in zip(params, grads)])
    rows = []
    for i in range(flat.shape[0]):
        if not flat[i].requires_grad:
            rows.append(torch.zeros_like(flat))
            continue
        hi = torch.autograd.grad(flat[i], params, retain_graph=True, allow_unused=True)
        rows.append(torch.cat([(torch.zeros_like(p) if h is None else h).reshape(-1) for p, h in zip(params, hi)]))
    return torch.stack(rows)
