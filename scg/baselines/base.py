"""The baseline interface.

A baseline b_v is subtracted from the downstream cost Ĉ_v of a stochastic node (or from a single
cost ĉ, Algorithm 1's ``ĉ ← ĉ − b_c``). Theorem 2 of Schulman et al. (2015): the gradient estimate
stays unbiased as long as b_v does not depend on v or on anything v influences. Baselines are
objects the user holds: their state (running averages, learned weights) lives in them, not in scg.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from scg.errors import SCGError

if TYPE_CHECKING:
    from scg.graph.nodes import Node, SampleInfo

__all__ = ["Baseline", "BaselineResult", "check_baseline"]


@dataclass
class BaselineResult:
    """``value``: b for each node, broadcastable to the stacked targets ``(n, *shape)``.

    ``loss``: an extra term whose gradient trains the baseline (e.g. a regression loss), or None.

    ``scale``: a positive factor the learning signal is multiplied by after subtracting
    ``value``, broadcastable like ``value`` (reward normalization, e.g. ``Normalized``), or None.
    """

    value: torch.Tensor
    loss: torch.Tensor | None = None
    scale: torch.Tensor | None = None


class Baseline:
    """Base class. ``__call__`` evaluates the baseline for a group of nodes at once.

    Args of ``__call__``:
        nodes: the nodes (stochastic nodes for node baselines, cost nodes for cost baselines) that
            share this baseline object and whose targets have the same shape.
        targets: ``(len(nodes), *shape)``, detached: Ĉ_v for node baselines, c for cost baselines.
            A baseline may *update* its state from the targets, but the value it returns must not
            depend on them (it would then be correlated with the score and bias the estimate),
            except where the estimator's theory allows it (leave-one-out over independent samples).
        info: the sample layout of each node (`SampleInfo`: its leading
            sample dimensions, their sizes, whether each is an enumeration, and whether a cost
            reduced the node's sample dimension), computed by the credit plan.
    """

    # Declared capabilities (read by the capability-driven tests and by users):
    #: E[∇ surrogate] stays ∇ E[Σ costs] (an instance may say otherwise: ``Normalized(scale=True)``)
    unbiased: bool = True
    #: needs the node drawn with ``n=k`` i.i.d. samples, k ≥ 2 (leave-one-out over samples)
    needs_samples: ClassVar[bool] = False
    #: the cost must be built by the baseline's ``objective(log_weights)`` (``VIMCO``)
    defines_cost: ClassVar[bool] = False
    #: why a step compiled with ``torch.compile`` cannot apply this baseline (the traced
    #: surrogate, `scg.credit.traced`, refuses it naming the node and this reason); None: it can
    untraceable: ClassVar[str | None] = None

    def __call__(self, nodes: Sequence[Node], targets: torch.Tensor, info: Sequence[SampleInfo]) -> BaselineResult:
        raise NotImplementedError

    def batch_key(self) -> object:
        """Nodes whose baselines have the same key are given to one call (of the first node's
        baseline), each with its own ``node.baseline``: the object itself by default; the bound
        copies of one ``Learned`` share theirs, so one call predicts for all their nodes."""
        return self

    def state_dict(self) -> dict[str, Any]:
        """Serializable state (for checkpoints)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore [`state_dict`][scg.baselines.Baseline.state_dict]'s output."""
        del state


def check_baseline(baseline: object, call: str, name: str | None, location: object) -> None:
    """Refuse (SCGError naming the call, node and place) a ``baseline=`` that is not a Baseline."""
    if baseline is None or isinstance(baseline, Baseline):
        return
    raise SCGError(
        f"{call}(name={name!r}) at {location}: baseline={baseline!r} is a {type(baseline).__name__}, "
        "not an scg baseline (names such as 'ema' are not looked up). Pass a baseline object: "
        "scg.baselines.EMA(beta) (running average), Constant(b), Learned(module).given(h), "
        "LeaveOneOut() or VIMCO() (with n=k), SelfCritical(greedy_cost), Normalized(inner); "
        "as baseline=b or in the estimator, scg.ScoreFunction(baseline=b)"
    )
