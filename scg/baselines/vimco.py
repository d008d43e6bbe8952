"""VIMCO: leave-one-out baselines for multi-sample log-mean-exp objectives.

Mnih & Rezende (2016), "Variational inference for Monte Carlo objectives". With k i.i.d. samples
h_1..h_k ~ q(h | x) and log-weights ℓ_j = log f(x, h_j) (e.g. log p(x, h_j) − log q(h_j | x)), the
objective is the multi-sample bound L̂ = log (1/k) Σ_j exp(ℓ_j), a function of all k samples at
once. Its score-function estimator credits every h_j with the whole L̂, which is noisy; VIMCO
subtracts, for sample j, the same bound with ℓ_j replaced by the mean of the others,

    ℓ̂_{−j} = (1/(k − 1)) Σ_{i≠j} ℓ_i,   L̂_{−j} = log (1/k) (Σ_{i≠j} exp(ℓ_i) + exp(ℓ̂_{−j})),

a function of h_{−j} only (unbiased, as for any leave-one-out baseline), giving the learning
signal L̂ − L̂_{−j}: how much sample j improves the bound over a typical replacement.

In scg (costs are minimized) the cost is −L̂, a reduction of the sample dimension that must be
declared; [`VIMCO.objective`][scg.baselines.VIMCO.objective] returns it and records the log-weights::

    vimco = scg.baselines.VIMCO()
    h = scg.sample(q, n=k, name="h", baseline=vimco)
    logw = log_joint(x, h) - q.log_prob(h)          # (k, *batch)
    scg.cost(vimco.objective(logw), reduced=h)      # −log mean_j exp(logw_j)

One VIMCO object serves every latent of its objective, whatever their shapes ((k, *batch) or
(k, *batch, D) element-wise): each element of sample j gets the same b_j.

The pathwise part of VIMCO's gradient (through ℓ_j's dependence on θ, weighted by the normalized
weights) is the ordinary ∇ of that cost. The baseline value is b_j = −L̂_{−j}.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import torch

from scg.baselines.base import Baseline, BaselineResult
from scg.baselines.loo import leading_sample_size
from scg.errors import SCGError
from scg.graph.sample_positions import LOST, MIXED

if TYPE_CHECKING:
    from scg.graph.nodes import Node, SampleInfo

__all__ = ["VIMCO"]


def leave_one_out_bounds(logw: torch.Tensor) -> torch.Tensor:
    """L̂_{−j} for each j along dim 0 of ``logw`` (k, *batch) (see module docstring)."""
    k = logw.shape[0]
    others_mean = (logw.sum(0, keepdim=True) - logw) / (k - 1)  # (k, *batch)
    x = logw.unsqueeze(0).expand(k, *logw.shape).clone()  # x[j] = logw with ...
    idx = torch.arange(k, device=logw.device)
    x[idx, idx] = others_mean  # ... ℓ_j replaced by the mean of the others
    return torch.logsumexp(x, dim=1) - math.log(k)


class VIMCO(Baseline):
    """Multi-sample baseline for the cost −log mean_j exp(ℓ_j) (see the module docstring)."""

    needs_samples: ClassVar[bool] = True
    defines_cost: ClassVar[bool] = True
    untraceable: ClassVar[str | None] = (
        "objective() keeps each graph's log-weights in a dict keyed by the graph's id, a key that "
        "changes every step and that a compiled step would hold as a constant"
    )

    #: log-weights kept per graph (beyond this many graphs the oldest are dropped)
    _KEEP = 64

    def __init__(self) -> None:
        # per graph (its id): the log-weights recorded by objective()
        self._logw: dict[int, torch.Tensor] = {}
        # per graph of a tracked program: the nodes the log-weights were computed from (a mask),
        # where each sample dimension lies in them (`scg.graph.sample_positions`) and its node
        self._places: dict[int, tuple[int, dict[int, int], dict[int, str]]] = {}

    def objective(self, log_weights: torch.Tensor) -> torch.Tensor:
        """The cost −log (1/k) Σ_j exp(ℓ_j) over dim 0; remembers ℓ for this run's baseline."""
        if not isinstance(log_weights, torch.Tensor) or log_weights.dim() < 1:
            raise SCGError("VIMCO.objective(log_weights): expected a tensor (k, *batch)")
        k = log_weights.shape[0]
        if k < 2:
            raise SCGError(f"VIMCO.objective: needs k >= 2 samples along dim 0, got {k}")
        from scg.graph.graph import current_graph

        g = current_graph()
        key = -1 if g is None else g.id
        if key in self._logw:
            raise SCGError(
                "VIMCO.objective() was called twice in one graph with the same VIMCO "
                "object: its state is one set of log-weights per graph, so make one "
                "VIMCO() per cost"
            )
        if len(self._logw) >= self._KEEP:
            self._places.pop(next(iter(self._logw)), None)
            self._logw.pop(next(iter(self._logw)))
        self._logw[key] = log_weights.detach()
        if g is not None and g.tracked:
            smap = g.sample_places(log_weights) or {}
            self._places[key] = (g.mask(log_weights), smap, {u: g.nodes[u].describe() for u in smap})
        return -(torch.logsumexp(log_weights, dim=0) - math.log(k))

    def __call__(self, nodes: Sequence[Node], targets: torch.Tensor, info: Sequence[SampleInfo]) -> BaselineResult:
        logw = self._logw.get(nodes[0].graph)
        if logw is None:
            raise SCGError(
                f"VIMCO baseline of {nodes[0].describe()}: call "
                "vimco.objective(log_weights) in the same graph's program to define "
                "its cost"
            )
        for node, inf in zip(nodes, info, strict=True):
            k = leading_sample_size(node, inf, "VIMCO()")
            if k != logw.shape[0]:
                raise SCGError(
                    f"VIMCO baseline of {node.describe()}: the node has {k} samples "
                    f"but the log-weights have {logw.shape[0]} along dim 0"
                )
            self._check_sample_positions(node, inf)
        b = -leave_one_out_bounds(logw.to(targets.dtype))  # (k, *batch)
        signal = tuple(targets.shape[1:])  # (k, *batch, *the node's own elements)
        if signal[: b.dim()] != tuple(b.shape):
            raise SCGError(
                f"VIMCO baseline of {nodes[0].describe()}: log-weights of shape "
                f"{tuple(logw.shape)} (k, *batch) do not lead the node's learning "
                f"signal {signal}"
            )
        # every latent of sample j shares b_j, whatever its own shape (elements of an
        # element-wise latent are broadcast: b_j depends on the other samples only)
        b = b.reshape(1, *b.shape, *([1] * (len(signal) - b.dim())))
        return BaselineResult(b.expand_as(targets))

    def _check_sample_positions(self, node: Node, info: SampleInfo) -> None:
        """b_j = −L̂_{−j} leaves out sample j only when ℓ_j is computed from sample j of the
        node's leading sample dimension alone. Log-weights reordered or mixed along it (sorted,
        flipped, rolled, centred by their mean: the objective's value unchanged) put sample j
        into the other ℓ_i and so into b_j, a biased gradient (a 3-sample program's was
        (0.077, −0.044) against the exact (−0.491, 0.251)). Refused where a tracked graph
        followed the dimension into the log-weights (an untracked graph's values carry no
        sample positions)."""
        places = self._places.get(node.graph)
        u = info.layout[0]
        if places is None or not places[0] >> u & 1:  # (untracked, or ℓ not computed from u: b_j without it)
            return
        at = places[1].get(u, LOST)
        if at == 0:
            return
        given = "the log-weights given to VIMCO.objective"
        if at == MIXED:
            what = f"{given} mix the samples along dim 0 (a sort, flip, roll, cumulative op or a mean broadcast back)"
        elif at == LOST:
            what = (
                f"scg lost the sample dimension on the way to {given} (an index or concatenation along it, or an "
                "operation scg does not follow: declare a row-wise module with scg.declare_rowwise)"
            )
        else:
            what = f"{given} hold the sample dimension at dimension {at}, not 0"
        raise SCGError(
            f"VIMCO baseline of {node.describe()}: {what}, for the "
            f"samples of {places[2].get(u, 'its leading sample dimension')}. The baseline of sample j is the "
            "bound with log-weight j left out, so log-weight j must be computed from sample j alone, at index j; "
            "otherwise sample j enters its own baseline (a biased gradient). Pass the log-weights in sample "
            "order, without reordering or combining them along dim 0"
        )

    def __repr__(self) -> str:
        return "VIMCO()"
