"""Reward normalization (NVIL): centre and scale the learning signal by running statistics.

Mnih & Gregor (2014), "Neural variational inference and learning in belief networks", Section 3:
the learning signal l = Ĉ_v − b_v(x) (after an input-dependent baseline) is centred by a running
mean c and divided by a running standard deviation,

    l̃ = (l − c) / max(1, √v),    c ← c + β (mean l − c),   v ← v + β (mean (l − c)² − v),

(the paper uses α = 1 − β = 0.8). As with [`EMA`][scg.baselines.EMA] the statistics used for a
batch are those from *before* it is seen, so they do not depend on the current sample.

Which parts are unbiased: the centring (−c, −b_v(x)) is a baseline and keeps the estimate
unbiased. The division multiplies the node's score-function term by 1/max(1, √v) (a data-dependent
step size per node, from past batches): the expectation becomes that factor times the true
score-function gradient, so it is unbiased only when the factor is 1 (v ≤ 1), and otherwise keeps
the *direction* of a pure score-function gradient with a single scale, not of a sum of terms with
different scales (pathwise terms are not divided). ``scale=False`` turns the division off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from scg.baselines.base import Baseline, BaselineResult
from scg.errors import SCGError, expect_bool

if TYPE_CHECKING:
    from scg.graph.nodes import Node, SampleInfo

__all__ = ["Normalized"]

Key = tuple[str, "int | None"]


class Normalized(Baseline):
    """NVIL normalization around an optional inner baseline, per (node name, step).

    Args:
        baseline: an input-dependent baseline b_v(x) applied first (e.g. ``Learned``), or None.
        beta: update rate β in (0, 1] of the running mean and variance.
        scale: divide by max(1, running std) (biased in scale, see module docstring).

    A learning signal with no elements (a batch of 0 examples) leaves the statistics as they are.
    """

    untraceable: ClassVar[str | None] = (
        "its running mean and variance are Python floats, read from the tensors every step "
        "(float(...), a host read that dynamo cannot trace)"
    )

    def __init__(self, baseline: Baseline | None = None, *, beta: float = 0.2, scale: bool = True) -> None:
        if not 0.0 < beta <= 1.0:
            raise SCGError(f"Normalized(beta): beta must be in (0, 1], got {beta!r}")
        if baseline is not None and not isinstance(baseline, Baseline):
            raise SCGError(f"Normalized(baseline): expected an scg Baseline, got {type(baseline).__name__}")
        self.inner = baseline
        self.beta = float(beta)
        self.scale = expect_bool(scale, "Normalized(scale=...)")
        # the centring is a baseline; the division rescales the score term (biased in scale)
        self.unbiased = not self.scale and (baseline is None or baseline.unbiased)
        self.stats: dict[Key, tuple[float, float]] = {}
        if baseline is not None and hasattr(baseline, "inputs"):
            self.inputs = baseline.inputs

    def __call__(self, nodes: Sequence[Node], targets: torch.Tensor, info: Sequence[SampleInfo]) -> BaselineResult:
        inner = self.inner(nodes, targets, info) if self.inner is not None else None
        base = inner.value.detach() if inner is not None else torch.zeros((), dtype=targets.dtype)
        signal = targets - base
        shape = (len(nodes),) + (1,) * (targets.dim() - 1)
        keys = [(n.name, n.step) for n in nodes]
        old = [self.stats.get(k, (0.0, 1.0)) for k in keys]
        mean = torch.tensor([m for m, _ in old], dtype=targets.dtype, device=targets.device).reshape(shape)
        var = torch.tensor([v for _, v in old], dtype=targets.dtype, device=targets.device).reshape(shape)
        flat = signal.detach().reshape(len(nodes), -1)
        centred = flat - mean.reshape(-1, 1)
        # (a batch of no elements observes nothing: its mean over none would make the statistics
        # NaN for every later step, as for EMA)
        for i, key in enumerate(keys if flat.shape[1] else ()):
            m, v = old[i]
            self.stats[key] = (
                m + self.beta * (float(flat[i].mean()) - m),
                v + self.beta * (float((centred[i] ** 2).mean()) - v),
            )
        factor = 1.0 / torch.clamp(var.sqrt(), min=1.0) if self.scale else None
        return BaselineResult(base + mean, inner.loss if inner is not None else None, factor)

    def state_dict(self) -> dict[str, Any]:
        return {
            "beta": self.beta,
            "stats": dict(self.stats),
            "inner": self.inner.state_dict() if self.inner is not None else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.beta = float(state["beta"])
        self.stats = {tuple(k): tuple(v) for k, v in state["stats"].items()}
        if self.inner is not None and state.get("inner") is not None:
            self.inner.load_state_dict(state["inner"])

    def __repr__(self) -> str:
        return f"Normalized({self.inner!r}, beta={self.beta}, scale={self.scale})"
