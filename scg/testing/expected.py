"""The exact mean of an estimator: E[ĝ] over every joint value of a program's finite nodes.

An estimator draws a surrogate gradient ĝ = ∇_θ surrogate(run) from one run of the program. For
a program whose stochastic nodes have finite support its mean is a finite sum,

    E[ĝ] = Σ_runs p(run) · ∇_θ surrogate(run),    p(run) = Π_v p(v | parents_v),

over every joint value of the nodes. [`expected_estimate`][scg.testing.expected_estimate] runs
the program once per joint value with the values forced (``scg.Graph(intervene=...)``: the nodes
keep their estimators, baselines and credit), differentiates each run's surrogate and weights it
by its probability, held fixed. The estimator is unbiased exactly when E[ĝ] equals
∇_θ E[Σ costs] ([`exact_gradient`][scg.testing.exact_gradient]): the two agree to rounding
(rtol 1e-9 in float64), and a biased credit rule (a cost not credited, a baseline that depends
on its node's sample) shows as a difference of the size of the bias, with no sampling noise and
no false-failure rate, from one graph per run instead of the hundreds of graphs of the z-test of
[`check_unbiased`][scg.testing.check_unbiased].

What it covers: finite nodes (Bernoulli, Binomial, Categorical, OneHotCategorical, and
Independent of these) with small supports; the runs multiply over nodes and elements (a node with
K values and E batch elements has K^E joint values), and more than ``max_runs`` are refused
before any is run. A continuous node has no runs to sum: name it in ``keep`` to draw it as its
estimator does (every run from the same seed, so with the same noise), and the result is then
exact over the other nodes given that draw, itself random; the z-test is the check for such
programs. An estimator that draws its own values (``Enumerate()``,
measure-valued, Rao-Blackwell...) has them replaced when its node is forced, and is tested by
naming the node in ``keep``; one that draws its ``n`` samples coupled (the antithetic pairs of
DisARM, ``reducible`` False) is refused unless kept (its forced samples would be weighted as
independent draws).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import torch
from torch.distributions import Distribution

from scg.credit.graph import Graph
from scg.errors import SCGError
from scg.graph.structure import Declared
from scg.testing.arguments import (
    Params,
    at_least,
    keyword_options,
    parameters,
    program_without_arguments,
    seed_of,
)
from scg.testing.exact import joint_runs

__all__ = ["expected_estimate"]

Program = Callable[[], object]

WHERE = "expected_estimate"


def _names(keep: object) -> frozenset[str]:
    """``keep`` as a set of node names (a bare string is one name's letters: refused)."""
    if isinstance(keep, str) or not isinstance(keep, Collection):
        raise SCGError(
            f"{WHERE}: keep must be a collection of node names, e.g. ('z',), got {keep!r}"
            + (f" (a string: pass ({keep!r},))" if isinstance(keep, str) else "")
        )
    bad = [k for k in keep if not isinstance(k, str)]
    if bad:
        raise SCGError(f"{WHERE}: keep must hold node names (str), got {bad[0]!r}")
    return frozenset(keep)


def expected_estimate(
    program: Program,
    params: Params,
    *,
    keep: Collection[str] = (),
    graph_kwargs: dict[str, Any] | None = None,
    surrogate_kwargs: dict[str, Any] | None = None,
    max_runs: int = 20_000,
    seed: int = 0,
) -> list[torch.Tensor]:
    """E[∇_θ surrogate] exactly: the mean of the estimator over every joint value of the program's
    finite nodes, for each tensor in ``params``.

    E[ĝ] = Σ_runs p(run) · ∇_θ surrogate(run) (the module docstring). Each run forces the nodes'
    values through ``scg.Graph(intervene=..., **graph_kwargs)``, differentiates
    ``g.surrogate_loss(**surrogate_kwargs)`` w.r.t. ``params`` and is weighted by p(run),
    detached (the estimator's gradient is the surrogate's; the probability of the run is the
    measure it is averaged over). Compare the result with
    [`exact_gradient`][scg.testing.exact_gradient] at rtol 1e-9: equal when the estimator is
    unbiased, off by its bias when it is not.

    Args:
        program: a zero-argument callable that calls ``scg.sample`` and ``scg.cost``, run inside
            a graph opened here (as for `exact_gradient`); deterministic given its nodes' values.
        params: the tensors to differentiate with respect to (zeros where no run's surrogate
            reaches one).
        keep: names of nodes drawn as their estimator draws them instead of enumerated: an
            ``Enumerate()`` node (its own support; its surrogate is exact given the rest), or a
            continuous node (the result is then exact given its draw, random over ``seed``).
        graph_kwargs: passed to each run's ``scg.Graph`` (``structure=``, ``plates=``,
            ``strict=``...); ``intervene`` is this function's own.
        surrogate_kwargs: passed to ``surrogate_loss`` (e.g. ``{"discount": 0.5}``).
        max_runs: refuse to enumerate more runs than this (counted along the first run, before
            any is differentiated).
        seed: torch's generator is seeded with it before every run (inside
            ``torch.random.fork_rng``: the caller's state is left as it was), so that the kept
            nodes draw alike in every run (common random numbers): the result is then the exact
            mean over the enumerated nodes given the kept nodes' noise, an unbiased estimate of
            E[ĝ] over both, and the same seed gives the same result.

    The enumeration runs the program once more per run (in untracked graphs of their own, so a
    ``Cached`` structure in ``graph_kwargs`` sees only complete runs). A run of probability 0 is
    skipped.
    """
    params = parameters(params, WHERE)
    program_without_arguments(program, WHERE)
    names = _names(keep)
    graph_kwargs = keyword_options(graph_kwargs, Graph.__init__, "graph_kwargs", WHERE)
    if "intervene" in graph_kwargs:
        raise SCGError(
            f"{WHERE}: graph_kwargs has the key 'intervene', expected none: each run forces the "
            "nodes' values with its own intervention (name a node in keep= to leave it as drawn)"
        )
    surrogate_kwargs = keyword_options(surrogate_kwargs, Graph.surrogate_loss, "surrogate_kwargs", WHERE)
    max_runs = at_least(max_runs, 1, "max_runs", WHERE)
    seed = seed_of(seed, WHERE)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return _mean(program, params, names, graph_kwargs, surrogate_kwargs, max_runs, torch.random.get_rng_state())


def _mean(
    program: Program,
    params: list[torch.Tensor],
    names: frozenset[str],
    graph_kwargs: dict[str, Any],
    surrogate_kwargs: dict[str, Any],
    max_runs: int,
    state: torch.Tensor,
) -> list[torch.Tensor]:
    """The sum of the docstring, each run (of the enumeration and of the sum) from the generator
    state ``state``."""

    def seeded() -> None:  # (the enumeration's graphs are untracked: nothing watches the reset)
        torch.random.set_rng_state(state)
        program()

    seen: set[str] = set()
    prefixes = [
        [value for value, _, _ in prefix]
        for _, _, prefix in joint_runs(
            seeded, 1, max_runs, where=WHERE, keep=names, finite=True, structure=Declared(), seen=seen
        )
    ]
    missing = sorted(names - seen)
    if missing:
        raise SCGError(
            f"{WHERE}: keep names node(s) {missing} that the program never drew; its nodes are {sorted(seen)}"
        )

    total = [torch.zeros_like(p) for p in params]
    for values in prefixes:
        logp: list[torch.Tensor] = []

        def intervene(
            name: str,
            step: int | None,
            dist: Distribution,
            shape: torch.Size,
            values: list[torch.Tensor] = values,
            logp: list[torch.Tensor] = logp,
        ) -> torch.Tensor | None:
            if name in names:
                return None
            if len(logp) == len(values):
                raise SCGError(
                    f"{WHERE}: the program drew node '{name}' after the {len(values)} node(s) of its "
                    "enumeration; it must draw the same nodes given their values (a kept node's "
                    "draw must not decide which nodes are drawn)"
                )
            value = values[len(logp)]
            logp.append(dist.log_prob(value.clone()).sum().detach())  # (the weight: held fixed)
            return value.clone()  # (each run its own: the program may edit its sample in place)

        torch.random.set_rng_state(state)  # (before the graph: its tracking watches the program only)
        with Graph(intervene=intervene, **graph_kwargs) as g:
            program()
        if len(logp) != len(values):
            raise SCGError(
                f"{WHERE}: the program drew {len(logp)} node(s) in a run its enumeration found "
                f"{len(values)} in; it must draw the same nodes given their values"
            )
        _refuse_coupled(g, names)
        weight = torch.stack(logp).sum().exp() if logp else None
        if weight is not None and float(weight) == 0.0:  # (an infinite gradient there is not 0 · inf)
            continue
        loss = g.surrogate_loss(**surrogate_kwargs)
        if not loss.requires_grad:  # (nothing differentiable reached it: a zero estimate)
            continue
        for t, grad in zip(total, torch.autograd.grad(loss, params, allow_unused=True)):
            if grad is not None:
                t += grad if weight is None else weight * grad
    return total


def _refuse_coupled(g: Graph, names: frozenset[str]) -> None:
    """Refuse a forced node whose estimator draws its ``n`` samples coupled (an antithetic pair:
    ``reducible`` False): the enumeration weights each joint value by the product of the
    samples' probabilities, as for independent draws, which is not the measure the estimator
    averages over (DisARM's exact mean came out as a bias: d/dθ 0.140 against 0.244)."""
    for v in g.stochastic_nodes:
        if not v.estimator.reducible and v.name not in names:
            raise SCGError(
                f"{WHERE}: {v.describe()} uses {v.estimator!r}, whose {v.n} samples are coupled draws "
                "(antithetic pairs), not independent ones: enumerated as independent draws they are "
                "weighted by a measure the estimator does not draw from, so its mean would be wrong. "
                f"Name it in keep=({v.name!r},) to draw it as its estimator does (the result is then "
                "exact over the other nodes given its draw), or test it with check_unbiased"
            )
