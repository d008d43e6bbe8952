"""Influence in a tracked graph: which nodes a node's value, its distribution or a cost's
declared reduction is computed from.

``scg.sample`` in a tracked graph reads a node's parents here instead of tracking every
operation of the draw: torch's own distributions keep their parameters (and nested
distributions and transforms) as tensor attributes, so the union of those tensors' masks is the
set of nodes the sample is computed from, and their foreign positions (`scg.graph.positions`)
shifted past the sample dimensions are the sample's.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.distributions import Distribution
from torch.distributions.transforms import Transform

from scg.errors import SCGError
from scg.estimators.base import Estimator
from scg.graph import positions
from scg.graph.graph import GraphRecord
from scg.graph.nodes import Location, Node, StochasticNode
from scg.graph.sample_positions import held_dims, node_value_map
from scg.graph.threads import check_untracked

__all__ = [
    "dist_foreign",
    "fresh_alias",
    "reduced_mask",
    "sample_influence",
    "scored_log_prob",
    "sum_masks",
    "torch_dist_tensors",
    "track_value",
]


def fresh_alias(g: GraphRecord, value: torch.Tensor) -> tuple[torch.Tensor, int]:
    """A fresh tensor object sharing ``value``'s data, and the mask ``value`` carried."""
    parents = g.mask(value)
    return value.view_as(value), parents


def sample_influence(
    g: GraphRecord,
    dist: Distribution,
    estimator: Estimator,
    raw: torch.Tensor,
    n_sample_dims: int,
    tensors: list[torch.Tensor] | None,
) -> tuple[torch.Tensor, int, dict[int, int]]:
    """A tracked sample's alias, parents and foreign positions (see `scg.graph.positions`).
    ``tensors``: the distribution's tensors (`torch_dist_tensors`), whose masks are the
    sample's parents; None when the draw was tracked (the parents are then the draw's mask)."""
    value, parents = fresh_alias(g, raw)
    if tensors is not None:
        dmask, foreign = dist_foreign(g, tensors, dist.batch_shape, n_sample_dims)
        parents |= dmask
    else:
        foreign = g.foreign(raw)
    if estimator.enumerates:
        # the support is not computed from the parameters: take the influence from them
        extra = sum_masks(g, [t for t in vars(dist).values() if isinstance(t, torch.Tensor)])
        if extra:
            parents |= extra
            if tensors is None:  # (another library's distribution: how its parameters line up
                # with the batch is not known; a torch distribution's are placed by `dist_foreign`)
                foreign[n_sample_dims] = foreign.get(n_sample_dims, 0) | extra
    return value, parents, foreign


def scored_log_prob(g: GraphRecord, node: StochasticNode) -> torch.Tensor | None:
    """In a tracked graph, the node's log-probability as ``scg.sample`` computed it (with
    tracking paused), marked as tracking marks ``dist.log_prob(value)`` computed under it: the
    node's own bit, lined up with its value, and the masks of the distribution's tensors at
    their positions (`dist_foreign`: a torch distribution's log-probability is computed per batch
    element, the contract the sample's own parents rest on). With sample dimensions (the node's
    own ``n=k`` or ``Enumerate()`` dimension, or another node's in its parameters) the
    log-probability is computed per sample as well: its marks are its value's (`sample_influence`,
    `track_value`: the parameters' positions moved past the node's sample dimension, where each
    sample dimension is). Under tracking, ``Categorical.log_prob`` broadcasts the parameters over
    an enumerated value's dimension with ``broadcast_tensors``, whose new dimension holds no
    samples of its own: the parents' examples were then foreign from position 0, the sample
    dimension, so ``scg.log_prob(z)`` of an enumerated ``z`` drawn from a scalar (or batched)
    score-function node ``u`` read as a mixing of ``u``'s examples (whole-plate, refused with
    ``dice=True``). None where the marks are not read from the attributes: an estimator that
    scores with another tensor, a distribution that is not torch's own, a log-probability of
    another shape than the sample and batch dimensions, data-dependent shapes or gradient breaks
    in the graph (the log-probability is then computed under tracking)."""
    lp = node.log_prob
    tracker = g.tracker
    if lp is None or type(node.estimator).log_prob is not Estimator.log_prob or tracker.any_dynamic or tracker.breaks:
        return None
    tensors = torch_dist_tensors(node.dist)
    if tensors is None:
        return None
    batch_shape = node.dist.batch_shape
    n_sample = 0 if node.n is None else 1  # (``scg.sample``'s sample shape: (n,) or ())
    if lp.shape != (node.value.shape[:1] if n_sample else torch.Size()) + batch_shape:
        return None
    with torch._C.DisableTorchFunction():  # (scg's own reads: not through the tracker)
        mask, foreign = dist_foreign(g, tensors, batch_shape, n_sample)
        if tracker.sample_dims:  # where each sample dimension is: as in the node's value
            smap = node_value_map(
                tracker.sattr, node.index if node.n is not None else None, n_sample, tensors, len(batch_shape)
            )
            if smap:
                setattr(lp, tracker.sattr, smap)
        n = lp.dim()
        fr: dict[int, int] = {}
        for p, pm in foreign.items():  # (the first position of size > 1: lp against itself, so no
            q = positions.foreign_from(p, lp, lp)  # size-1 dimension of an input is expanded)
            if q < tracker.max_dim:
                positions.merge(fr, q, pm)
        own = 1 << node.index
        if n < tracker.max_dim:  # (the node's value beyond its batch dims, an event or a class index,
            positions.merge(fr, n, own)  # is reduced: a dimension added later does not line up)
        m = mask | own
        g.set_mask(lp, m, positions.normalize(fr) if len(fr) > 1 else fr)
        if not lp.requires_grad:  # (a tracked value that does not require grad: see ``derived``)
            tracker.pending.append((lp, m))
    return lp


def track_value(
    g: GraphRecord,
    node: StochasticNode,
    dist: Distribution,
    raw: torch.Tensor,
    n_sample_dims: int,
    tensors: list[torch.Tensor] | None,
) -> None:
    """Mark a tracked node's value with the node, and where its sample dimensions are
    (``tensors`` as for `sample_influence`)."""
    with torch._C.DisableTorchFunction():  # (scg's own reads: not through the tracker, each a dispatch)
        value = node.value
        sources = tensors if tensors is not None else [raw]
        if not node.parents and g.grad_fns:  # parameters computed from a node outside the tracker?
            check_untracked(g, node, sources, node.parents)
        g.set_mask(value, 1 << node.index)
        base = value._base  # the draw (value is a fresh alias of it): an alias of the value made
        if base is not None and not g.mask(base):  # without a torch call, z.as_subclass(Tensor), is
            g.set_mask(base, 1 << node.index)  # a view of it and adopts its mask (scg.graph.aliases)
        tracker = g.tracker
        tracker.register_node_value(value, node.index)
        if node.n is not None or tracker.sample_dims:  # where each sample dimension is
            smap = node_value_map(
                tracker.sattr,
                node.index if node.n is not None else None,
                n_sample_dims,
                sources,
                len(dist.batch_shape) if tensors is not None else 0,
            )
            if smap:
                setattr(value, tracker.sattr, smap)
                tracker.sample_dims = True


def dist_foreign(
    g: GraphRecord, tensors: list[torch.Tensor], batch_shape: torch.Size, n_sample_dims: int
) -> tuple[int, dict[int, int]]:
    """The union of the masks of a torch distribution's tensors (`torch_dist_tensors`: its
    parameters and those of nested distributions and transforms, the nodes its samples are
    computed from), and the foreign positions of its samples w.r.t. those nodes: the
    parameters' own, shifted past the sample dimensions. A parameter broadcast to the batch shape
    is foreign from its first broadcast dimension: from 0 when it has fewer dimensions than the
    batch, else from its first size-1 dimension where the batch's is larger (a ``loc`` of shape
    ``(1, B)`` that a transform keeps unexpanded: each row of the samples reads every row of it);
    except where those dimensions hold another node's samples (in a parameter of the batch's
    rank): its positions then move behind them, and one of its own dimensions laid over them is
    foreign there."""
    out: dict[int, int] = {}
    mask = 0
    tracker = g.tracker
    batch = len(batch_shape)
    # the batch dimensions that hold another node's samples (in a parameter of the batch's rank):
    # a parameter without them is broadcast behind them, its examples lined up after them
    # (`scg.graph.sample_shifts.samples_inserted`, the same rule for a torch operation)
    held: set[int] = set()
    if tracker.sample_dims:
        for t in tensors:
            if t.dim() >= batch:
                held |= {d for d in held_dims(t, tracker.sattr) if d < batch}
    for t in tensors:
        m = tracker.mask_of(t)
        if not m:
            continue
        mask |= m
        k = batch - t.dim() if t.dim() < batch else 0  # (dimensions put in front of t's)
        if k and (not held or any(batch_shape[j] > 1 and j not in held for j in range(k))):
            out[0] = out.get(0, 0) | m
            continue
        own = {d + k for d in held_dims(t, tracker.sattr)} if held else set()
        spread = next(
            (
                j
                for j in range(k, batch)
                if batch_shape[j] > 1
                and ((t.shape[j - k] == 1 and j not in held) or (t.shape[j - k] > 1 and j in held and j not in own))
            ),
            None,
        )
        if spread is not None:
            q = spread + n_sample_dims
            out[q] = out.get(q, 0) | m
        for p, pm in tracker.foreign_of(t).items():
            q = p + k + n_sample_dims
            out[q] = out.get(q, 0) | pm
    return mask, out


#: attribute values that hold no tensor (``torch.Size`` is a tuple of ints: not walked)
_LEAVES = (torch.Size, int, float, str, type(None))
_TORCH_DISTRIBUTIONS = "torch.distributions."


def torch_dist_tensors(dist: object) -> list[torch.Tensor] | None:
    """The tensors a distribution holds, each once (its tensor attributes, and those of the
    distributions, transforms and sequences nested in it, to depth 6), when ``dist`` and every
    distribution and transform nested in it are torch's own classes, whose parameters are
    tensor attributes (so a sample's parents are their masks); None for anything else (a user
    Transform with parameters in a closure or a dict), which is drawn under tracking, where the
    operations that use them are seen. One walk of the attributes for both questions."""
    if isinstance(dist, torch.Tensor):
        return [dist]
    out: list[torch.Tensor] = []
    return out if _walk(dist, 0, out) else None


def _walk(obj: object, depth: int, out: list[torch.Tensor]) -> bool:
    """Collect the tensors of a distribution or transform ``obj`` into ``out``; False when it or
    one nested in it is not torch's own (or the nesting is deeper than 6)."""
    if depth > 6 or not type(obj).__module__.startswith(_TORCH_DISTRIBUTIONS):
        return False
    return _walk_values(vars(obj).values() if hasattr(obj, "__dict__") else (), depth, out)


def _walk_values(values: Iterable[object], depth: int, out: list[torch.Tensor]) -> bool:
    for v in values:
        if isinstance(v, torch.Tensor):
            for seen in out:  # (a parameter is often held twice: ``logits`` and ``_param``)
                if seen is v:
                    break
            else:
                out.append(v)
        elif isinstance(v, _LEAVES):
            continue
        elif isinstance(v, (Distribution, Transform)):
            if not _walk(v, depth + 1, out):
                return False
        elif isinstance(v, (list, tuple)):
            if depth >= 6 or not _walk_values(v, depth + 1, out):
                return False
    return True


def sum_masks(g: GraphRecord, values: object) -> int:
    """The union of the masks of ``values`` (tensors, nodes, or nested sequences of them)."""
    if isinstance(values, torch.Tensor):
        return g.mask(values)
    if isinstance(values, Node):
        return 1 << g.node(values).index
    if isinstance(values, (list, tuple)):
        m = 0
        for v in values:
            m |= sum_masks(g, v)
        return m
    return 0


def reduced_mask(g: GraphRecord, reduced: object, name: str | None, location: Location | str) -> int:
    """The mask of the multi-sample nodes a cost declares ``reduced=`` (their values or nodes);
    refuses anything else, naming the cost."""
    items = list(reduced) if isinstance(reduced, (list, tuple)) else [reduced]
    mask = 0
    for r in items:
        if not isinstance(r, (torch.Tensor, Node)):
            raise SCGError(
                f"scg.cost(name={name!r}, reduced=...) at {location}: expected node "
                f"values or nodes, got {type(r).__name__}"
            )
        try:
            node = g.node(r)
        except SCGError:
            raise SCGError(
                f"scg.cost(name={name!r}, reduced=...) at {location}: pass the value "
                "returned by scg.sample (or its node), not a tensor computed from "
                "it"
            ) from None
        if not isinstance(node, StochasticNode) or node.n is None:
            raise SCGError(
                f"scg.cost(name={name!r}, reduced=...) at {location}: "
                f"{node.describe()} has no sample dimension (draw it with n=k)"
            )
        if node.enumerated:
            raise SCGError(
                f"scg.cost(name={name!r}, reduced=...) at {location}: "
                f"{node.describe()} is enumerated; its dimension is weighted by "
                "p(value) and cannot be reduced by the cost"
            )
        estimator = node.estimator
        if estimator is not None and not estimator.reducible:
            raise SCGError(
                f"scg.cost(name={name!r}, reduced=...) at {location}: {node.describe()} is drawn with "
                f"{type(estimator).__name__}(), whose {node.n} slices are coupled evaluations whose weights sum "
                "to zero: a cost reduced over them is the same on every slice and cancels, so its gradient "
                "would be zero. Keep the slices in the cost, or draw the node with an estimator of "
                "independent samples (ScoreFunction, n=k)"
            )
        mask |= 1 << node.index
    return mask
