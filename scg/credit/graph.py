"""[`scg.Graph`][scg.Graph]: the graph users open, a record (`scg.graph.graph.GraphRecord`) with its
surrogate.

The record sits below inference and imports nothing of it; this class, in the credit layer,
adds ``surrogate_loss`` (Algorithm 1 through the credit plan, `scg.credit.surrogate`). Drawing
and ``networkx`` export take a graph: ``scg.viz.draw(g)``, ``scg.viz.to_networkx(g)``.
"""

from __future__ import annotations

import torch

from scg.credit.surrogate import surrogate_loss
from scg.graph.graph import GraphRecord

__all__ = ["Graph"]


class Graph(GraphRecord):
    """A stochastic computation graph (Schulman, Heess, Weber & Abbeel 2015).

    Open it with ``with scg.Graph() as g:``; inside, [`scg.sample`][scg.sample] adds stochastic nodes and
    [`scg.cost`][scg.cost] adds cost nodes, and every torch operation is watched to find which costs each
    stochastic node influences. After the block, [`surrogate_loss`][scg.Graph.surrogate_loss] builds the surrogate whose
    gradient is an unbiased estimate of ∇_θ E[Σ costs] (Algorithm 1).

    A graph records one run of the program: it is entered once and its surrogate built once.

    Args:
        warn_on_escape: warn ([`InfluenceLostWarning`][scg.InfluenceLostWarning]) when a tracked value leaves
            tensor land, e.g. through ``.item()``, ``bool()``, ``x in z``, ``np.asarray`` or a
            data-dependent shape (``len(z.nonzero())``), and
            ([`UntrackedRandomnessWarning`][scg.UntrackedRandomnessWarning]) when a random draw outside
            ``scg.sample`` uses tracked values.
        strict: raise [`InfluenceLostError`][scg.InfluenceLostError] instead of each of those warnings.
        plates: how many leading batch dimensions of each stochastic node are *plates*
            (independent examples credited with their own costs), unless ``scg.sample(...,
            plates=)`` says otherwise. ``None`` (default): all batch dimensions, each verified
            by tracking; batch dimensions beyond the plates share their credit
            (``docs/tracking.md``).
        intervene: ``intervene(name, step, dist, sample_shape)`` is asked for each stochastic
            node's value before it is sampled; a tensor it returns is used instead of a draw
            (``None``: sample as usual). Used for enumeration (``scg.testing``), greedy reruns
            (self-critical baselines) and replaying recorded choices.
        structure: a [`scg.Declared`][scg.Declared] or [`scg.Cached`][scg.Cached] object held across graphs:
            the influence relation is declared, or learned from earlier tracked graphs, so
            this graph is not tracked (no torch function mode is pushed) and its surrogate
            reuses the plan of earlier graphs with the same signature
            (`scg.graph.structure`, ``docs/performance.md``). ``None`` (default): tracked.
    """

    def surrogate_loss(
        self,
        *,
        discount: float | None = None,
        dice: bool = False,
        dice_lambda: float | None = None,
        score_scale: float = 1.0,
        check_finite: bool = True,
    ) -> torch.Tensor:
        """The surrogate loss of Algorithm 1 (see [`scg.surrogate_loss`][scg.surrogate_loss])."""
        return surrogate_loss(
            self,
            discount=discount,
            dice=dice,
            dice_lambda=dice_lambda,
            score_scale=score_scale,
            check_finite=check_finite,
        )
