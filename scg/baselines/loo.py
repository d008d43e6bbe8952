"""Leave-one-out baseline over the k samples of a multi-sample node.

Kool, van Hoof & Welling (2019), "Buy 4 REINFORCE samples, get a baseline for free!": with k
i.i.d. samples v_1..v_k and learning signals Ĉ_1..Ĉ_k, sample i uses the mean of the *others*,

    b_i = (1 / (k − 1)) Σ_{j≠i} Ĉ_j.

b_i is a function of samples j ≠ i only, which are independent of v_i, so
E[∇log p(v_i) b_i] = E[∇log p(v_i)] E[b_i] = 0 and the estimate stays unbiased (Theorem 2 of
Schulman et al. 2015 with the other samples as "information from elsewhere"). The k/(k − 1)
detail: the estimator is often written with the plain mean Ĉ̄ = (1/k) Σ_j Ĉ_j,

    (1/(k − 1)) Σ_i ∇log p(v_i) (Ĉ_i − Ĉ̄)  =  (1/k) Σ_i ∇log p(v_i) (Ĉ_i − b_i),

since Ĉ_i − Ĉ̄ = ((k − 1)/k)(Ĉ_i − b_i): subtracting the plain mean with the usual 1/k average
would shrink the gradient by (k − 1)/k (biased); scg's surrogate averages with 1/k, so this class
returns b_i and the result is the unbiased form on the right.

Which dimension: the leading dimension of the node's learning signal, which must be a sample
dimension of size ≥ 2 drawn i.i.d. (``scg.sample(..., n=k)`` on the node itself, or on an ancestor
whose k dimension the node carries: k independent trajectories). Not an enumerated dimension,
and not one a cost reduced (``scg.cost(..., reduced=...)``: then Ĉ_j depends on v_i; use
``VIMCO`` there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import torch

from scg.baselines.base import Baseline, BaselineResult
from scg.errors import SCGError

if TYPE_CHECKING:
    from scg.graph.nodes import Node, SampleInfo

__all__ = ["LeaveOneOut", "leading_sample_size"]


def leading_sample_size(node: Node, info: SampleInfo, who: str) -> int:
    """k of the node's leading sample dimension (``info``: its sample layout); SCGError (naming
    the node) if it has none."""
    if node.kind == "cost":  # (subtracted from a cost, the other samples' costs would be a baseline
        # that depends on every node upstream of them that has no sample dimension: biased)
        raise SCGError(
            f"{who} on {node.describe()}: a leave-one-out baseline is a baseline of a node drawn with n=k "
            "(it uses the node's other samples); attach it to that node, scg.sample(..., n=k, "
            f"baseline={who})"
        )
    if not info.layout:
        raise SCGError(
            f"{who} of {node.describe()}: the node has no sample dimension; draw it "
            "(or an ancestor) with scg.sample(..., n=k), k >= 2"
        )
    if info.enumerated[0]:
        raise SCGError(f"{who} of {node.describe()}: its leading dimension is an enumeration, not independent samples")
    k = int(info.sizes[0])
    if k < 2:
        raise SCGError(f"{who} of {node.describe()}: needs k >= 2 samples, got n={k}")
    return k


class LeaveOneOut(Baseline):
    """b_i = mean of the other k − 1 samples' learning signals (unbiased; see module docstring)."""

    needs_samples: ClassVar[bool] = True

    def __call__(self, nodes: Sequence[Node], targets: torch.Tensor, info: Sequence[SampleInfo]) -> BaselineResult:
        for node, inf in zip(nodes, info, strict=True):
            leading_sample_size(node, inf, "LeaveOneOut()")
            if inf.joint:
                raise SCGError(
                    f"LeaveOneOut() of {node.describe()}: a cost it influences reduced its sample "
                    "dimension (scg.cost(..., reduced=...)), so every sample's signal depends on "
                    "sample i and the leave-one-out mean would bias the estimate; use "
                    "scg.baselines.VIMCO() for log-mean-exp objectives"
                )
        k = int(targets.shape[1])
        total = targets.sum(dim=1, keepdim=True)
        return BaselineResult((total - targets) / (k - 1))

    def __repr__(self) -> str:
        return "LeaveOneOut()"
