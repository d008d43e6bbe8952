"""Hypothesis strategies for random small stochastic computation graphs.

:func:`scgs` draws an :class:`SCGSpec`: a random DAG of Categorical, Bernoulli and Normal nodes
(chains, trees and diamonds arise from random parent sets), with several costs, each attached to
a step. A spec turns into a program for :func:`scg.testing.exact_gradient` (:meth:`SCGSpec.program`)
and into a particle-batched program for :func:`scg.testing.estimate_gradients_batched`
(:meth:`SCGSpec.batched`), both computing the same function of one flat parameter vector θ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.distributions import Bernoulli, Categorical, Normal

import scg
from scg.baselines.base import Baseline

__all__ = ["CostSpec", "NodeSpec", "SCGSpec", "scgs"]


@dataclass(frozen=True)
class NodeSpec:
    """A stochastic node: ``kind`` in {"categorical", "bernoulli", "normal"}, ``k`` categories."""

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

    def _layout(self) -> list[tuple[int, int]]:
        """(offset, size) of each node's parameters in θ, then one slot per cost."""
        spans, off = [], 0
        for node in self.nodes:
            size = node.k if node.kind == "categorical" else (2 if node.kind == "normal" else 1)
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

    def _run(self, theta: torch.Tensor, baseline: Baseline | None) -> None:
        """Run the graph with θ of shape (P, d): batch element p uses row p."""
        spans = self._layout()
        feats: list[torch.Tensor] = []
        for i, node in enumerate(self.nodes):
            off, size = spans[i]
            w = theta[:, off:off + size]
            own = size - len(node.parents)
            drive = sum((w[:, own + j] * feats[p] for j, p in enumerate(node.parents)),
                        torch.zeros_like(theta[:, 0]))
            est = self.estimator.get(i)
            kw: dict[str, Any] = {"name": f"v{i}", "step": i}
            if est is not None:
                kw["estimator"] = est
            elif baseline is not None and node.kind != "normal":
                kw["baseline"] = baseline
            if node.kind == "categorical":
                ramp = torch.linspace(-1.0, 1.0, node.k, dtype=theta.dtype)
                z = scg.sample(Categorical(logits=w[:, :own] + drive[:, None] * ramp), **kw)
                feats.append(z.to(theta.dtype) / max(node.k - 1, 1) - 0.5)
            elif node.kind == "bernoulli":
                b = scg.sample(Bernoulli(logits=w[:, 0] + drive), **kw)
                feats.append(b - 0.5)
            else:
                x = scg.sample(Normal(w[:, 0] + drive, torch.exp(0.3 * w[:, 1])), **kw)
                feats.append(torch.tanh(x))
        for j, (step, c) in enumerate(self.costs):
            off, _ = spans[len(self.nodes) + j]
            total = sum((feats[p] * (1.0 + 0.5 * q) for q, p in enumerate(c.parents)),
                        torch.zeros_like(theta[:, 0]))
            if c.direct:
                total = total + theta[:, off]
            scg.cost(c.scale * (total - 0.3) ** 2, name=f"c{j}", step=step)

    def program(self, theta: torch.Tensor, baseline: Baseline | None = None) -> Callable[[], None]:
        """A zero-argument program over the flat θ (d,), for ``exact_gradient``."""
        return lambda: self._run(theta.unsqueeze(0), baseline)

    def batched(self, baseline: Baseline | None = None) -> Callable[[torch.Tensor], None]:
        """The program over replicated θ (P, d), for ``estimate_gradients_batched``."""
        return lambda theta: self._run(theta, baseline)

    @property
    def has_continuous(self) -> bool:
        return any(n.kind == "normal" for n in self.nodes)


def scgs(max_nodes: int = 4, max_costs: int = 4, continuous: bool = True) -> Any:
    """A hypothesis strategy of :class:`SCGSpec` (imports hypothesis lazily)."""
    from hypothesis import strategies as st

    kinds = ["categorical", "bernoulli"] + (["normal"] if continuous else [])

    @st.composite
    def build(draw: Any) -> SCGSpec:
        n = draw(st.integers(1, max_nodes))
        nodes = []
        for i in range(n):
            kind = draw(st.sampled_from(kinds))
            k = draw(st.integers(2, 4)) if kind == "categorical" else 1
            parents = tuple(sorted(draw(st.sets(st.integers(0, i - 1), max_size=2)))) if i else ()
            nodes.append(NodeSpec(kind, k, parents))
        first = next((i for i, nd in enumerate(nodes) if nd.kind == "normal"), None)
        nodes = [NodeSpec("bernoulli", 1, nd.parents) if nd.kind == "normal" and i != first
                 else nd for i, nd in enumerate(nodes)]  # one Normal: keeps quadrature cheap
        costs = []
        for _ in range(draw(st.integers(1, max_costs))):
            step = draw(st.integers(0, n - 1))
            parents = tuple(sorted(draw(st.sets(st.integers(0, step), min_size=1, max_size=2))))
            costs.append((step, CostSpec(parents, draw(st.booleans()),
                                         draw(st.sampled_from([0.5, 1.0, 2.0])))))
        return SCGSpec(nodes, costs)

    return build()
