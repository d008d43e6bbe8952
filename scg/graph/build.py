"""Building a graph: ``scg.sample``, ``scg.cost``, ``scg.deterministic``, ``scg.influenced_by``, and
``scg.log_prob`` (a stochastic node's log-probability, computed once)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING

import torch
from torch.distributions import Distribution

from scg.baselines.base import check_baseline
from scg.errors import SCGError
from scg.estimators.base import Estimator
from scg.estimators.defaults import default_for
from scg.graph.graph import GraphRecord, current_graph, eager_graph
from scg.graph.influence import (
    fresh_alias,
    is_torch_distribution,
    reduced_mask,
    sample_influence,
    sum_masks,
    track_value,
)
from scg.graph.nodes import (
    BaselineInputs,
    CostNode,
    DeterministicNode,
    Location,
    Node,
    StochasticNode,
    caller_location,
)
from scg.graph.threads import check_untracked

if TYPE_CHECKING:
    from scg.baselines.base import Baseline

__all__ = ["cost", "deterministic", "influenced_by", "log_prob", "sample"]

#: the sample shape of a node drawn once (no sample dimension)
_ONE = torch.Size(())


def _open_graph(fn: str, name: str | None) -> tuple[GraphRecord, Location | str]:
    """The open graph and the user's line that called ``scg.<fn>`` (one compile check for both).
    ``scg.sample`` and ``scg.cost``, which run for every node, do the same inline."""
    compiling = torch.compiler.is_compiling()
    g = current_graph(True) if compiling else eager_graph()
    location = caller_location(compiling)
    if g is None:
        raise _outside_graph(fn, name, location)
    return g, location


def _outside_graph(fn: str, name: str | None, location: Location | str) -> SCGError:
    return SCGError(
        f"scg.{fn}(name={name!r}) at {location} was called outside a graph; "
        "call it inside a `with scg.Graph() as g:` block (in a worker thread: run the "
        "worker under g.wrap(fn) or `with g.in_thread():`)"
    )


def _check_plates(plates: object, fn: str, name: str | None, location: Location | str) -> None:
    if plates is not None and (isinstance(plates, bool) or not isinstance(plates, int) or plates < 0):
        raise SCGError(
            f"scg.{fn}(name={name!r}, plates=...) at {location}: expected None or an int >= 0, got {plates!r}"
        )


def sample(
    dist: Distribution,
    *,
    name: str | None = None,
    estimator: Estimator | None = None,
    baseline: Baseline | None = None,
    step: int | None = None,
    n: int | None = None,
    plates: int | None = None,
) -> torch.Tensor:
    """Add a stochastic node ``v ~ dist`` to the open graph and return its value.

    Args:
        dist: any ``torch.distributions.Distribution``; its parameters may depend on θ and on
            other nodes.
        name: the node's name (unique together with ``step``); default ``sample_<i>``.
        estimator: how the node is differentiated. Default: `scg.Pathwise` when
            ``dist.has_rsample``, else `scg.ScoreFunction`.
        baseline: a baseline b_v subtracted from the node's downstream cost Ĉ_v.
        step: the time step of the node (for ``surrogate_loss(discount=γ)`` and per-step
            baselines).
        n: draw ``n`` independent samples along a new leading dimension; the objective then
            averages every cost computed from them over that dimension (the rule for sample
            dimensions is in `scg.credit.sample_dims`).
        plates: how many leading batch dimensions of the node are *plates*: independent
            examples, each credited with its own cost elements (verified by tracking: where a
            cost mixes them, the node falls back to whole-batch credit). Batch dimensions after
            the plates share their credit (e.g. ``plates=1`` for a bit vector ``(B, D)`` decoded
            jointly). Default: the graph's ``plates`` (all batch dimensions).

    Returns:
        The sample, of shape ``(n,) + dist.batch_shape + dist.event_shape`` (no ``n`` dim if None).
        With ``estimator=scg.estimators.Enumerate()``: every value of the support, of shape
        ``(K,) + dist.batch_shape + dist.event_shape``; costs are then weighted by p(value).
    """
    # (`_open_graph` inline: this runs for every node, and the user's frame is then our caller's)
    compiling = torch.compiler.is_compiling()
    g = current_graph(True) if compiling else eager_graph()
    location = caller_location(compiling)
    if g is None:
        raise _outside_graph("sample", name, location)
    if not isinstance(dist, Distribution):
        raise SCGError(
            f"scg.sample(name={name!r}) at {location}: expected a torch.distributions."
            f"Distribution, got {type(dist).__name__}"
        )
    if estimator is None:
        estimator = default_for(dist)
    elif not isinstance(estimator, Estimator):
        raise SCGError(
            f"scg.sample(name={name!r}, estimator=...) at {location}: expected an "
            f"scg Estimator, got {type(estimator).__name__}"
        )
    node_baseline = baseline if baseline is not None else estimator.baseline
    if node_baseline is not None:
        check_baseline(node_baseline, "scg.sample", name, location)
        if baseline is not None and estimator.baseline is not None:
            raise SCGError(
                f"scg.sample(name={name!r}) at {location}: a baseline was given both to "
                "the estimator and as baseline=; give one"
            )
        if baseline is not None and not estimator.score:
            raise SCGError(
                f"scg.sample(name={name!r}) at {location}: baseline= needs a "
                f"score-function estimator, but {estimator!r} adds no score term"
            )
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise SCGError(f"scg.sample(name={name!r}, n=...) at {location}: n must be a positive int, got {n!r}")
        if not estimator.multi_sample:
            raise SCGError(
                f"scg.sample(name={name!r}, n={n}) at {location}: {estimator!r} does not support several "
                "samples per node"
            )
    if plates is not None:
        _check_plates(plates, "sample", name, location)
    shape = _ONE if n is None else torch.Size((n,))
    enumerated = estimator.enumerates
    tracked = g.tracked
    parents = 0
    foreign: dict[int, int] = {}
    if not (tracked or enumerated or g.intervene is not None):
        # the untracked common case (Declared, Cached between its tracked graphs): `_draw` and
        # `_scored` inline, with nothing to pause or count
        try:
            value = estimator.draw(dist, shape)
        except SCGError as e:
            raise SCGError(f"scg.sample(name={name!r}) at {location}: {e}") from None
        private = not value.requires_grad
        log_prob = (
            _log_prob(dist, estimator, value.clone() if private else value, shape, name, location)
            if estimator.score
            else None
        )
    else:
        raw = (
            _drawn_first(g, dist, estimator, name, step, shape, location)
            if enumerated or g.intervene is not None
            else None
        )
        if raw is not None and enumerated:
            n = int(raw.shape[0])
            shape = torch.Size((n,))
        if tracked:
            # torch's own distributions keep their parameters as tensor attributes: the sample's
            # parents are the union of their masks, so drawing and scoring need no per-operation
            # tracking
            fast = is_torch_distribution(dist)
            with g.paused() if fast else nullcontext():
                drawn = raw if raw is not None else _draw(g, estimator, dist, shape, name, location)
                value, parents, foreign = sample_influence(g, dist, estimator, drawn, len(shape), fast)
                private, log_prob = _scored(g, dist, estimator, value, shape, name, location)
        else:
            value = raw if raw is not None else _draw(g, estimator, dist, shape, name, location)
            private, log_prob = _scored(g, dist, estimator, value, shape, name, location)
    baseline_inputs = None if node_baseline is None else _baseline_inputs(g, node_baseline)
    node = StochasticNode(
        index=len(g.nodes),
        name=g.node_name(name, "stochastic", step, location),
        value=value,
        parents=parents,
        step=step,
        location=location,
        foreign=foreign,
        graph=g.id,
        dist=dist,
        estimator=estimator,
        baseline=node_baseline,
        log_prob=log_prob,
        n=n,
        private=private,
        plates=plates if plates is not None else g.plates,
        enumerated=enumerated,
        version=None if g.id < 0 else value._version,  # (no version counters while dynamo traces)
        baseline_inputs=baseline_inputs,
    )
    g.record(node)
    if tracked:
        track_value(g, node, dist, drawn, len(shape), fast)
        outer = g.outer
        if outer is not None:
            outer.foreign_sample(value, node)
    return value


def log_prob(value: torch.Tensor | StochasticNode) -> torch.Tensor:
    """log p(v | parents(v)): the log-probability of a stochastic node's value under its
    distribution, the tensor ``dist.log_prob(value)`` computes (the same value, differentiable in
    the distribution's parameters in the same way), computed once per node.

    Use it where the program needs the log-probability of its own sample (an ELBO's
    log q(z | x), a KL or entropy term) instead of calling ``dist.log_prob(value)`` again::

        z = scg.sample(q, name="z")
        scg.cost(scg.log_prob(z) - p.log_prob(z), name="kl")

    ``scg.sample`` already computes it for the node's score term: in an untracked graph
    (``structure=Declared(...)`` or ``Cached(...)``) that tensor is returned. It is computed on
    the first call (and the same tensor returned by later calls) where the node's estimator
    needs none (``Pathwise``), scores with another tensor (``ARM``), or the graph is tracked
    (computed under tracking there, so that the costs computed from it are seen to depend on the
    node and on the distribution's parameters). Do not write into the tensor in place: the
    surrogate may use it.

    Args:
        value: the tensor ``scg.sample`` returned in the open graph (or its `StochasticNode`).

    Returns:
        Shape ``sample_shape + dist.batch_shape`` (the node's ``n`` or enumeration dimension
        first).

    Raises:
        SCGError: outside a graph; ``value`` not a stochastic node of the open graph; the value
            written in place since it was drawn (before the log-probability was computed).
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
    if not g.tracked and node.log_prob is not None and type(node.estimator).log_prob is Estimator.log_prob:
        got = node.log_prob  # the score term's tensor: dist.log_prob(value), computed by scg.sample
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


def _drawn_first(
    g: GraphRecord,
    dist: Distribution,
    estimator: Estimator,
    name: str | None,
    step: int | None,
    shape: torch.Size,
    location: Location | str,
) -> torch.Tensor | None:
    """The value of an enumerated node (its support) or the graph's intervention, drawn before
    the node's own draw; None when the estimator draws as usual."""
    if estimator.enumerates:  # (the estimator's own draws, e.g. measure-valued points, are scg's)
        return _draw(g, estimator, dist, shape, name, location)
    if g.intervene is None:
        return None
    try:
        return _intervention(g, name, step, dist, shape)
    except SCGError as e:
        raise SCGError(f"scg.sample(name={name!r}) at {location}: {e}") from None


def _draw(
    g: GraphRecord,
    estimator: Estimator,
    dist: Distribution,
    shape: torch.Size,
    name: str | None,
    location: Location | str,
) -> torch.Tensor:
    """``estimator.draw`` as scg's own computation (the tracker does not report its random
    draws); its errors name the node."""
    if g.tracked:
        g.tracker.drawing += 1
    try:
        return estimator.draw(dist, shape)
    except SCGError as e:
        raise SCGError(f"scg.sample(name={name!r}) at {location}: {e}") from None
    finally:
        if g.tracked:
            g.tracker.drawing -= 1


def _scored(
    g: GraphRecord,
    dist: Distribution,
    estimator: Estimator,
    value: torch.Tensor,
    shape: torch.Size,
    name: str | None,
    location: Location | str,
) -> tuple[bool, torch.Tensor | None]:
    """Whether the value is scored on a private copy (it does not require grad, so the program
    may edit its sample in place, ``tok.masked_fill_(done, pad)``, without breaking backward),
    and the node's log-probability (None when its estimator needs none), as scg's own
    computation."""
    private = not value.requires_grad
    if not (estimator.score or estimator.enumerates):
        return private, None
    if g.tracked:
        g.tracker.drawing += 1
    try:
        return private, _log_prob(dist, estimator, value.clone() if private else value, shape, name, location)
    finally:
        if g.tracked:
            g.tracker.drawing -= 1


def _intervention(
    g: GraphRecord, name: str | None, step: int | None, dist: Distribution, shape: torch.Size
) -> torch.Tensor | None:
    """The graph's ``intervene`` hook for this node: its value (checked to have the node's shape)
    or None to draw as usual. In a tracked graph the hook's own draws (replays, reruns) are scg's."""
    assert g.intervene is not None
    auto = name if name is not None else g.next_name("stochastic")
    if g.tracked:
        g.tracker.drawing += 1
    try:
        raw = g.intervene(auto, step, dist, shape)
    finally:
        if g.tracked:
            g.tracker.drawing -= 1
    if raw is not None:
        expected_shape = shape + dist.batch_shape + dist.event_shape
        if not isinstance(raw, torch.Tensor) or raw.shape != expected_shape:
            got = tuple(raw.shape) if isinstance(raw, torch.Tensor) else type(raw).__name__
            raise SCGError(
                f"the graph's intervention returned {got}, expected a tensor of shape {tuple(expected_shape)}"
            )
    return raw


def _baseline_inputs(g: GraphRecord, baseline: object) -> BaselineInputs | None:
    """What a baseline's declared ``inputs`` (``Learned.given(...)``) are computed from, and their
    version counters; None for a baseline without inputs."""
    inputs = getattr(baseline, "inputs", None)
    if inputs is None:
        return None
    return BaselineInputs(mask=sum_masks(g, inputs), versions=_versions(inputs))


def _versions(values: object) -> list[tuple[torch.Tensor, int]]:
    """(tensor, version counter) for each tensor in ``values``: writes after it are detected."""
    if isinstance(values, torch.Tensor):
        return [(values, values._version)]
    if isinstance(values, (list, tuple)):
        return [x for v in values for x in _versions(v)]
    return []


def _log_prob(
    dist: Distribution,
    estimator: Estimator,
    value: torch.Tensor,
    shape: torch.Size,
    name: str | None,
    location: Location | str,
) -> torch.Tensor:
    try:
        log_prob = estimator.log_prob(dist, value)
    except SCGError as e:
        raise SCGError(f"scg.sample(name={name!r}) at {location}: {e}") from None
    except NotImplementedError:
        raise SCGError(
            f"scg.sample(name={name!r}) at {location}: {type(dist).__name__} does not "
            "implement log_prob, which the score-function estimator needs"
        ) from None
    expected = dist.batch_shape if not shape else shape + dist.batch_shape
    if log_prob.shape != expected:
        raise SCGError(
            f"scg.sample(name={name!r}) at {location}: log_prob has shape "
            f"{tuple(log_prob.shape)}, expected sample_shape + batch_shape = {tuple(expected)}"
        )
    return log_prob


def cost(
    value: torch.Tensor,
    *,
    name: str | None = None,
    step: int | None = None,
    baseline: Baseline | None = None,
    reduced: torch.Tensor | Node | Sequence[torch.Tensor | Node] | None = None,
) -> torch.Tensor:
    """Add a cost node. The objective is E[sum of all elements of all costs] (minimized).

    Args:
        value: a floating-point tensor; its leading dimensions line up with the batch dimensions
            of the stochastic nodes it depends on, so each example's log-probability is credited
            with that example's own cost.
        name: the node's name (unique together with ``step``); default ``cost_<i>``.
        step: the time step of the cost (for ``surrogate_loss(discount=γ)``).
        baseline: subtracted from the cost before it is credited to stochastic nodes (Algorithm
            1's ĉ ← ĉ − b_c), e.g. an ``EMA`` per decoder step as in the C2F paper.
        reduced: multi-sample node(s) (their values or nodes) whose sample dimension ``value``
            has already reduced itself, e.g. with a log-mean-exp (VIMCO, IWAE). Without it, a
            cost influenced by a node drawn with ``n=k`` must carry that node's sample
            dimension, and the objective averages over it (`scg.credit.sample_dims`).

    Returns:
        ``value`` itself, for chaining.
    """
    compiling = torch.compiler.is_compiling()  # (`_open_graph` inline, as in `sample`)
    g = current_graph(True) if compiling else eager_graph()
    location = caller_location(compiling)
    if g is None:
        raise _outside_graph("cost", name, location)
    if not isinstance(value, torch.Tensor):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise SCGError(
                f"scg.cost(name={name!r}) at {location}: got a Python number ({value!r}); a cost "
                "must be a tensor so that scg can see which stochastic nodes it depends on"
                + (" (it is not finite)" if not math.isfinite(value) else "")
            )
        raise SCGError(f"scg.cost(name={name!r}) at {location}: expected a tensor, got {type(value).__name__}")
    if not value.is_floating_point():
        raise SCGError(
            f"scg.cost(name={name!r}) at {location}: a cost must be a floating-point "
            f"tensor, got dtype {value.dtype}; convert it with .float()"
        )
    baseline_inputs = None
    if baseline is not None:
        check_baseline(baseline, "scg.cost", name, location)
        baseline_inputs = _baseline_inputs(g, baseline)
    tracked = g.tracked  # (untracked: the parents come from the graph's structure)
    vmask = g.mask(value) if tracked else 0
    reduced_nodes = reduced_mask(g, reduced, name, location) if reduced is not None else 0
    node = CostNode(
        index=len(g.nodes),
        name=g.node_name(name, "cost", step, location),
        value=value,
        parents=vmask,
        step=step,
        location=location,
        foreign=g.foreign(value) if tracked else {},
        graph=g.id,
        baseline=baseline,
        # (no version counters while dynamo traces: a graph opened then has no id)
        version=None if g.id < 0 else value._version,
        reduced=reduced_nodes,
        baseline_inputs=baseline_inputs,
    )
    g.record(node)
    if tracked:
        check_untracked(g, node, [value], vmask)
    return value


def deterministic(value: torch.Tensor, *, name: str, step: int | None = None) -> torch.Tensor:
    """Record a named deterministic node (a square in the paper's drawings) and return its value.

    Only for inspection and drawing: influence flows through it unchanged.
    """
    g, location = _open_graph("deterministic", name)
    if not isinstance(value, torch.Tensor):
        raise SCGError(f"scg.deterministic(name={name!r}) at {location}: expected a tensor, got {type(value).__name__}")
    if not g.tracked:
        g.record(_deterministic_node(g, name, step, value, 0, location, {}))
        return value
    foreign = g.foreign(value)
    alias, parents = fresh_alias(g, value)
    node = g.record(_deterministic_node(g, name, step, alias, parents, location, foreign))
    g.set_mask(alias, 1 << node.index)
    return alias


def _deterministic_node(
    g: GraphRecord,
    name: str,
    step: int | None,
    value: torch.Tensor,
    parents: int,
    location: Location | str,
    foreign: dict[int, int],
) -> DeterministicNode:
    return DeterministicNode(
        index=len(g.nodes),
        name=g.node_name(name, "deterministic", step, location),
        value=value,
        parents=parents,
        step=step,
        location=location,
        foreign=foreign,
        graph=g.id,
    )


def influenced_by(value: torch.Tensor, *sources: torch.Tensor | Node, per_element: bool = False) -> torch.Tensor:
    """Declare that ``value`` depends on ``sources`` through a path scg cannot see.

    Use it where a sample left tensor land (``.item()``, Python ``if``) and came back::

        if bool(z == 0):                         # InfluenceLostWarning points here
            c = loss_a(x)
        else:
            c = loss_b(x)
        scg.cost(scg.influenced_by(c, z))        # c depends on z through the branch

    Returns a new tensor sharing ``value``'s data whose influence includes the sources'. scg
    cannot know which elements of the sources each element of ``value`` depends on, so the
    sources get whole-plate credit from it (`scg.credit.plates`), unless ``per_element=True``
    declares that ``value[i, ...]`` depends on element ``i`` of each source only (their leading
    dimensions line up).

    In a graph that is not tracked (``scg.Graph(structure=scg.Declared(...))``) the declared
    structure is the whole relation: ``value`` is returned unchanged.
    """
    g, location = _open_graph("influenced_by", None)
    if not isinstance(value, torch.Tensor):
        raise SCGError(f"scg.influenced_by at {location}: value must be a tensor, got {type(value).__name__}")
    if not g.tracked:
        return value
    extra = 0
    for i, s in enumerate(sources):
        if not isinstance(s, (torch.Tensor, Node)):
            raise SCGError(
                f"scg.influenced_by at {location}: source {i} is a {type(s).__name__}; pass the "
                "tensor it was computed from (e.g. the sample), not a Python value"
            )
        m = sum_masks(g, s)
        if m == 0:
            raise SCGError(
                f"scg.influenced_by at {location}: source {i} was not computed from any node of the open graph"
            )
        extra |= m
    foreign = g.foreign(value)
    if not per_element:  # a declared dependency: no per-element claim
        foreign[0] = foreign.get(0, 0) | extra
    alias, parents = fresh_alias(g, value)
    g.set_mask(alias, parents | extra, foreign)
    return alias
