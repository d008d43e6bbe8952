"""Hypothesis strategies for random small stochastic computation graphs.

`scgs` draws an `SCGSpec`: a random DAG of Categorical, Bernoulli and Normal nodes
(chains, trees and diamonds arise from random parent sets), with several costs, each attached to
a step. A spec turns into a program for [`scg.testing.exact_gradient`][scg.testing.exact_gradient] (`SCGSpec.program`)
and into a particle-batched program for [scg.testing.estimate_gradients_batched][scg.testing.estimate_gradients_batched]
(`SCGSpec.batched`), both computing the same function of one flat parameter vector θ.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.distributions import Bernoulli, Categorical, Independent, Normal, OneHotCategorical

import scg
from scg.baselines.base import Baseline

__all__ = ["KINDS", "CostSpec", "NodeSpec", "SCGSpec", "scgs"]

#: the node kinds a spec can hold
KINDS = ("categorical", "onehot", "indcat", "bernoulli", "normal")


@dataclass(frozen=True)
class NodeSpec:
    """A stochastic node: ``kind`` in `KINDS`, ``k`` categories.

    "categorical" (an index), "onehot" (OneHotCategorical), "indcat" (``Independent`` of two
    Categoricals, decoded jointly), "bernoulli", "normal".
    """

    kind: str
    k: int
    parents: tuple[int, ...]


@dataclass(frozen=True)
class CostSpec:
    """A cost computed from ``parents`` (node indices), optionally also directly from θ."""

    parents: tuple[int, ...]
    direct: bool
    scale: float


@dataclass
class SCGSpec:
    """A random SCG; node i and costs attached after it have step i."""

    nodes: list[NodeSpec]
    costs: list[tuple[int, CostSpec]]  # (step, cost)
    estimator: dict[int, Any] = field(default_factory=dict)
    #: ``n=`` of each node drawn with several samples (node index -> n)
    draws: dict[int, int] = field(default_factory=dict)

    def _layout(self) -> list[tuple[int, int]]:
        """(offset, size) of each node's parameters in θ, then one slot per cost."""
        spans, off = [], 0
        for node in self.nodes:
            size = {"categorical": node.k, "onehot": node.k, "indcat": 2 * node.k, "normal": 2}.get(node.kind, 1)
            size += len(node.parents)
            spans.append((off, size))
            off += size
        for _ in self.costs:
            spans.append((off, 1))
            off += 1
        return spans

    @property
    def num_params(self) -> int:
        """Length of the flat parameter vector θ."""
        off, size = self._layout()[-1]
        return off + size

    def init_params(self, seed: int = 0) -> torch.Tensor:
        """A θ in [-1, 1] (float64, requires grad) drawn with its own generator."""
        gen = torch.Generator().manual_seed(seed)
        theta = torch.rand(self.num_params, generator=gen, dtype=torch.float64) * 2 - 1
        return theta.requires_grad_()

    def _run(
        self, theta: torch.Tensor, baseline: Baseline | None, n: int | None = None, log_mean_exp: bool = False
    ) -> None:
        """Run the graph with θ of shape (P, d): batch element p uses row p. With ``n`` the first
        node draws n samples (every later node carries them: n independent trajectories); with
        ``log_mean_exp`` the costs become one, −log mean_n exp(−Σ costs) (``baseline.objective``
        when the baseline defines the cost, e.g. VIMCO)."""
        spans = self._layout()
        feats: list[torch.Tensor] = []
        first: torch.Tensor | None = None
        for i, node in enumerate(self.nodes):
            off, size = spans[i]
            w = theta[:, off : off + size]
            own = size - len(node.parents)
            drive = sum((w[:, own + j] * feats[p] for j, p in enumerate(node.parents)), torch.zeros_like(theta[:, 0]))
            est = self.estimator.get(i)
            kw: dict[str, Any] = {"name": f"v{i}", "step": i, "n": self.draws.get(i, n if i == 0 else None)}
            if est is not None:
                kw["estimator"] = est
            elif baseline is not None and node.kind != "normal":
                kw["baseline"] = baseline
            ramp = torch.linspace(-1.0, 1.0, node.k, dtype=theta.dtype)
            if node.kind == "categorical":
                z = scg.sample(Categorical(logits=w[:, :own] + drive.unsqueeze(-1) * ramp), **kw)
                feats.append(z.to(theta.dtype) / max(node.k - 1, 1) - 0.5)
            elif node.kind == "onehot":
                z = scg.sample(OneHotCategorical(logits=w[:, :own] + drive.unsqueeze(-1) * ramp), **kw)
                feats.append(z @ (ramp + 1.0) / 2.0 - 0.5)
            elif node.kind == "indcat":
                logits = w[:, :own].reshape(w.shape[0], 2, node.k) + (drive.unsqueeze(-1) * ramp).unsqueeze(-2)
                z = scg.sample(Independent(Categorical(logits=logits), 1), **kw)
                feats.append(z.to(theta.dtype).mean(-1) / max(node.k - 1, 1) - 0.5)
            elif node.kind == "bernoulli":
                z = scg.sample(Bernoulli(logits=w[:, 0] + drive), **kw)
                feats.append(z - 0.5)
            else:
                z = scg.sample(Normal(w[:, 0] + drive, torch.exp(0.3 * w[:, 1])), **kw)
                feats.append(torch.tanh(z))
            first = z if first is None else first
        costs = []
        for j, (step, c) in enumerate(self.costs):
            off, _ = spans[len(self.nodes) + j]
            total = sum((feats[p] * (1.0 + 0.5 * q) for q, p in enumerate(c.parents)), torch.zeros_like(theta[:, 0]))
            if c.direct:
                total = total + theta[:, off]
            costs.append(c.scale * (total - 0.3) ** 2)
            if not log_mean_exp:
                scg.cost(costs[-1], name=f"c{j}", step=step)
        if log_mean_exp:
            logw = -costs[0]
            for c_j in costs[1:]:
                logw = logw - c_j  # (n, P)
            objective = getattr(baseline, "objective", None)
            value = objective(logw) if objective is not None else -(torch.logsumexp(logw, 0) - math.log(logw.shape[0]))
            scg.cost(value, name="bound", step=len(self.nodes) - 1, reduced=first)

    def program(
        self, theta: torch.Tensor, baseline: Baseline | None = None, *, n: int | None = None, log_mean_exp: bool = False
    ) -> Callable[[], None]:
        """A zero-argument program over the flat θ (d,), for ``exact_gradient``."""
        return lambda: self._run(theta.unsqueeze(0), baseline, n, log_mean_exp)

    def batched(
        self, baseline: Baseline | None = None, *, n: int | None = None, log_mean_exp: bool = False
    ) -> Callable[[torch.Tensor], None]:
        """The program over replicated θ (P, d), for ``estimate_gradients_batched``."""
        return lambda theta: self._run(theta, baseline, n, log_mean_exp)


def scgs(max_nodes: int = 4, max_costs: int = 4, continuous: bool = True, kinds: Sequence[str] | None = None) -> Any:
    """A hypothesis strategy of `SCGSpec` (imports hypothesis lazily).

    ``kinds``: the node kinds to draw from (default: categorical, bernoulli, and normal when
    ``continuous``); at most one node is Normal.
    """
    from hypothesis import strategies as st

    if kinds is None:
        kinds = ["categorical", "bernoulli"] + (["normal"] if continuous else [])
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds:
        raise ValueError(f"scgs(kinds=...): expected some of {KINDS}, got {list(kinds)}")
    kinds = list(kinds)

    @st.composite
    def build(draw: Any) -> SCGSpec:
        n = draw(st.integers(1, max_nodes))
        nodes = []
        for i in range(n):
            kind = draw(st.sampled_from(kinds))
            k = draw(st.integers(2, 4 if kind != "indcat" else 3)) if kind in ("categorical", "onehot", "indcat") else 1
            parents = tuple(sorted(draw(st.sets(st.integers(0, i - 1), max_size=2)))) if i else ()
            nodes.append(NodeSpec(kind, k, parents))
        first = next((i for i, nd in enumerate(nodes) if nd.kind == "normal"), None)
        other = "bernoulli" if "bernoulli" in kinds else next((kd for kd in kinds if kd != "normal"), "bernoulli")
        nodes = [
            NodeSpec(other, 2 if other in ("categorical", "onehot", "indcat") else 1, nd.parents)
            if nd.kind == "normal" and i != first
            else nd
            for i, nd in enumerate(nodes)
        ]  # one Normal: keeps quadrature cheap
        costs = []
        for _ in range(draw(st.integers(1, max_costs))):
            step = draw(st.integers(0, n - 1))
            parents = tuple(sorted(draw(st.sets(st.integers(0, step), min_size=1, max_size=2))))
            costs.append((step, CostSpec(parents, draw(st.booleans()), draw(st.sampled_from([0.5, 1.0, 2.0])))))
        return SCGSpec(nodes, costs)

    return build()
