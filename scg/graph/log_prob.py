"""``scg.log_prob``: a stochastic node's log-probability, computed once per node."""

from __future__ import annotations

import torch

from scg.errors import SCGError
from scg.estimators.base import Estimator
from scg.graph.graph import GraphRecord, current_graph
from scg.graph.influence import scored_log_prob
from scg.graph.nodes import StochasticNode, caller_location

__all__ = ["log_prob"]


def log_prob(value: torch.Tensor | StochasticNode) -> torch.Tensor:
    """log p(v | parents(v)): the log-probability of a stochastic node's value under its
    distribution, the tensor ``dist.log_prob(value)`` computes (the same value, differentiable in
    the distribution's parameters in the same way), computed once per node.

    Use it where the program needs the log-probability of its own sample (an ELBO's
    log q(z | x), a KL or entropy term) instead of calling ``dist.log_prob(value)`` again::

        z = scg.sample(q, name="z")
        scg.cost(scg.log_prob(z) - p.log_prob(z), name="kl")

    ``scg.sample`` already computes it for the node's score term, and that tensor is returned.
    In a tracked graph it is marked as if computed under tracking (costs computed from it
    depend on the node and on the distribution's parameters, at their positions:
    `scg.graph.influence.scored_log_prob`). It is computed on the first call (and the same
    tensor returned by later calls) where the node's estimator needs none (``Pathwise``), scores
    with another tensor (``ARM``), or, tracked, where the marks are not read from the
    distribution's attributes (a distribution of another library, sample dimensions). Do not
    write into the tensor in place: the surrogate may use it.

    Args:
        value: the tensor ``scg.sample`` returned in the open graph (or its `StochasticNode`).

    Returns:
        Shape ``sample_shape + dist.batch_shape`` (the node's ``n`` or enumeration dimension
        first).

    Raises:
        SCGError: outside a graph; ``value`` not a stochastic node of the open graph; the value
            written in place since it was drawn, where the log-probability is computed on
            demand.
    """
    g = current_graph()
    if g is None:
        raise SCGError(
            f"scg.log_prob(value) at {caller_location()} was called outside a graph; call it inside "
            "the `with scg.Graph() as g:` block that drew the value"
        )
    node = _stochastic_node(g, value)
    got = node.dist_log_prob
    if got is not None:
        return got
    if node.estimator.relaxed and not getattr(node.estimator, "hard", False):  # (straight-through: a discrete value)
        raise SCGError(
            f"scg.log_prob(value) at {caller_location()}: {node.describe()} is drawn by {node.estimator!r}, "
            f"whose value is a relaxation outside the support of {type(node.dist).__name__}: the distribution "
            "has no log-probability for it (score its discrete value, or use the relaxed distribution's own "
            "log_prob, e.g. RelaxedOneHotCategorical)"
        )
    if not g.tracked and node.log_prob is not None and type(node.estimator).log_prob is Estimator.log_prob:
        got = node.log_prob  # the score term's tensor: dist.log_prob(value), computed by scg.sample
    elif g.tracked and (got := scored_log_prob(g, node)) is not None:
        pass  # the same tensor, marked as tracking would have marked it
    else:
        v = node.value
        if node.version is not None and v._version != node.version:
            raise SCGError(
                f"scg.log_prob(value) at {caller_location()}: the value of {node.describe()} was written in "
                "place after it was drawn, so its log-probability can no longer be computed; call "
                "scg.log_prob before the write (or write into a copy)"
            )
        got = node.dist.log_prob(v.clone() if node.private else v)
    node.dist_log_prob = got
    return got


def _stochastic_node(g: GraphRecord, value: object) -> StochasticNode:
    """The stochastic node of the open graph whose value (or which) ``value`` is (the user's
    line is found for an error only: nothing records it)."""
    if isinstance(value, StochasticNode):
        if value.index < len(g.nodes) and g.nodes[value.index] is value:
            return value
        raise SCGError(
            f"scg.log_prob(value) at {caller_location()}: expected a stochastic node of the open graph, "
            f"found {value.describe()} of another graph"
        )
    if not isinstance(value, torch.Tensor):
        raise SCGError(
            f"scg.log_prob(value) at {caller_location()}: expected the tensor scg.sample returned, "
            f"found {type(value).__name__}"
        )
    for node in reversed(g.stochastic):  # (usually the newest node)
        if node.value is value:
            return node
    other = next((n for n in g.nodes if n.value is value), None)
    if other is None:
        found = (
            "a tensor that is not the value of a node of the open graph (computed from a sample, "
            "or drawn in another graph)"
        )
    elif other.index in g.nested:
        found = f"the value of {g.nested[other.index]}, drawn in a scg.Graph nested inside it"
    else:
        found = f"the value of {other.describe()}"
    raise SCGError(
        f"scg.log_prob(value) at {caller_location()}: expected the tensor scg.sample returned in the "
        f"open graph, found {found}"
    )
