"""Self-critical baseline: the cost of a greedy rerun of the same program.

Rennie, Marcheret, Mroueh, Ross & Goel (2017), "Self-critical sequence training for image
captioning": the baseline of a sampled sequence ŵ^s is the reward of the sequence ŵ^g the
*current* model produces by greedy (argmax) decoding, b = r(ŵ^g), so that samples better than
the model's own test-time output are reinforced and worse ones suppressed.

In scg the greedy decoding is the same program rerun under
``scg.Graph(intervene=scg.estimators.greedy)`` (every sample replaced by its distribution's mode),
typically under ``torch.no_grad()``. Its cost does not depend on the sampled run's random choices,
so b_v is independent of v and the estimate is unbiased (Theorem 2 of Schulman et al. 2015). scg
checks the part it can see in a tracked graph: a greedy cost computed *in the same graph* from the
node itself (given as a tensor, or returned by the callable; for the callable, also from a node
drawn after it) is an error.

The greedy cost is lined up with each node's learning signal Ĉ_v like a cost: leading (batch)
dimensions align, extra trailing dimensions are summed (so a per-position cost becomes the
sequence total), and when the node has sample dimensions (``n=k``) that the greedy cost lacks it
is broadcast over them. For per-node values (e.g. the greedy cost-to-go of each step) pass a
callable ``node -> tensor``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from scg.baselines.base import Baseline, BaselineResult
from scg.errors import SCGError
from scg.graph.tracking import mask_attribute

if TYPE_CHECKING:
    from scg.graph.nodes import Node, SampleInfo

__all__ = ["SelfCritical"]


class _NodesRead(TorchFunctionMode):
    """Which of a graph's nodes a callable's result is computed from: each torch call's tensor
    outputs get the union of its tensor inputs' masks (the graph's attribute ``attr``), as the
    tracker's masks do (without positions)."""

    def __init__(self, attr: str) -> None:
        super().__init__()
        self.attr = attr

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        m = 0
        for a in tree_leaves((args, kwargs)):
            if isinstance(a, torch.Tensor):
                m |= getattr(a, self.attr, 0)
        if m:
            for o in tree_leaves(out):
                if isinstance(o, torch.Tensor):
                    setattr(o, self.attr, getattr(o, self.attr, 0) | m)
        return out


class SelfCritical(Baseline):
    """b_v = the cost of a greedy rerun (a tensor, or ``greedy(node) -> tensor``).

    Args:
        greedy: the greedy run's cost, e.g. computed under
            ``scg.Graph(intervene=scg.estimators.greedy)``; detached when used.
    """

    def __init__(self, greedy: torch.Tensor | Callable[[Node], torch.Tensor]) -> None:
        if isinstance(greedy, torch.Tensor):
            if not bool(torch.isfinite(greedy).all()):
                raise SCGError("SelfCritical(greedy): the greedy cost is not finite")
            self.inputs: tuple[torch.Tensor, ...] = (greedy,)
        elif not callable(greedy):
            raise SCGError(f"SelfCritical(greedy): expected a tensor or a callable, got {type(greedy).__name__}")
        self.greedy = greedy

    def _value(self, node: Node, target: torch.Tensor, info: SampleInfo) -> torch.Tensor:
        from scg.credit.sample_dims import align_batch_to_node

        attr = mask_attribute(node.graph)
        if isinstance(self.greedy, torch.Tensor):
            v = self.greedy
        else:
            with _NodesRead(attr):  # (called as the surrogate is built: the graph's tracking is over)
                v = self.greedy(node)
        if not isinstance(v, torch.Tensor):
            raise SCGError(
                f"SelfCritical baseline of {node.describe()}: the callable returned "
                f"{type(v).__name__}, expected a tensor"
            )
        # (a tracked graph's value carries the nodes it was computed from: bit i for node i; the
        # node's own bit or a later node's means the value was not known before the node's draw)
        mask = getattr(v, attr, 0)
        if mask and not isinstance(self.greedy, torch.Tensor):
            if node.kind == "stochastic" and mask >> node.index:
                raise SCGError(
                    f"SelfCritical baseline of {node.describe()}: the callable returned a greedy cost "
                    "computed from the node's own sample (or from a node drawn after it); a baseline may "
                    "only use information from before the sample (Theorem 2), otherwise the estimate is "
                    "biased. Compute the greedy cost in its own run, e.g. under "
                    "scg.Graph(intervene=scg.estimators.greedy)"
                )
            if node.kind == "cost":  # (any node of this graph may influence the cost, through others)
                raise SCGError(
                    f"SelfCritical baseline of {node.describe()}: the callable returned a greedy cost "
                    "computed from this graph's stochastic nodes; subtracted from the cost, it would "
                    "bias the gradient of every node it depends on that influences the cost (Theorem 2). "
                    "Compute the greedy cost in its own run, e.g. under "
                    "scg.Graph(intervene=scg.estimators.greedy), or attach the baseline to a node"
                )
        v = v.detach().to(target.dtype)
        lead = tuple(info.sizes)
        if lead and tuple(v.shape[: len(lead)]) != lead:
            v = v.reshape((1,) * len(lead) + tuple(v.shape))
        if lead:
            v = v.expand(*lead, *v.shape[len(lead) :])
        layout = tuple(range(len(lead)))
        sizes = dict(enumerate(lead))
        try:
            return align_batch_to_node(v.unsqueeze(0), layout, layout, target.shape, node, node, sizes)[0]
        except SCGError:  # (its message would name the node twice, as the cost and the node)
            raise SCGError(
                f"SelfCritical baseline of {node.describe()}: the greedy cost has shape {tuple(v.shape)}, "
                f"which does not line up with the node's batch shape {tuple(target.shape)} (its leading "
                "dimensions must match the node's; trailing ones are summed)"
            ) from None

    def __call__(self, nodes: Sequence[Node], targets: torch.Tensor, info: Sequence[SampleInfo]) -> BaselineResult:
        values = [self._value(node, t, inf) for node, t, inf in zip(nodes, targets, info, strict=True)]
        return BaselineResult(torch.stack(values))

    def __repr__(self) -> str:
        kind = "tensor" if isinstance(self.greedy, torch.Tensor) else "callable"
        return f"SelfCritical({kind})"
