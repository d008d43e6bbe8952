"""``scg.sample``: draw a stochastic node's value, score it for its estimator and record the node
(in a tracked graph, with the influences of the distribution's parameters on its value)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING

import torch
from torch.distributions import Distribution

from scg.baselines.base import check_baseline
from scg.errors import InfluenceLostWarning, SCGError
from scg.estimators.base import Estimator
from scg.estimators.defaults import default_for
from scg.graph.build import baseline_inputs, check_plates, outside_graph
from scg.graph.graph import GraphRecord, current_graph, eager_graph, is_compiling
from scg.graph.influence import sample_influence, torch_dist_tensors, track_value
from scg.graph.nodes import Location, StochasticNode, caller_location

if TYPE_CHECKING:
    from scg.baselines.base import Baseline

__all__ = ["sample"]

#: the sample shape of a node drawn once (no sample dimension)
_ONE = torch.Size(())
#: the draw of a distribution that is not torch's own: tracked (a reusable no-op context)
_NOT_PAUSED = nullcontext()
#: ``torch.is_grad_enabled``, read once (asked for every node; dynamo knows it by identity)
_grad_enabled = torch.is_grad_enabled


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
    # (`open_graph` inline: this runs for every node, and the user's frame is then our caller's)
    compiling = is_compiling()
    g = current_graph(True) if compiling else eager_graph()
    location = caller_location(compiling)
    if g is None:
        raise outside_graph("sample", name, location)
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
        check_plates(plates, "sample", name, location)
    shape = _ONE if n is None else torch.Size((n,))
    if plates is not None and plates > len(dist.batch_shape):
        raise SCGError(
            f"scg.sample(name={name!r}, plates={plates}) at {location}: the node has "
            f"{len(dist.batch_shape)} batch dimension(s) (batch shape {tuple(dist.batch_shape)}), fewer than its plates"
        )
    enumerated = estimator.enumerates
    tracked = g.tracked
    nested = g.outer is not None
    parents = 0
    foreign: dict[int, int] = {}
    raw, intervened = (
        _drawn_first(g, dist, estimator, name, step, shape, location)
        if enumerated or g.intervene is not None
        else _NOT_DRAWN
    )
    if intervened and enumerated:  # (the intervention's value replaces the draw: nothing to enumerate)
        estimator, enumerated, node_baseline = default_for(dist), False, baseline
    if raw is not None and enumerated:
        n = int(raw.shape[0])
        shape = torch.Size((n,))
    if tracked:
        # torch's own distributions keep their parameters as tensor attributes: the sample's
        # parents are the union of their masks, so drawing and scoring need no per-operation
        # tracking (``tensors`` None: another library's distribution, drawn under tracking)
        tensors = torch_dist_tensors(dist)
        tracker = g.tracker
        tracker.drawing += 1  # (the random calls in here are scg's own: the draw, its scoring)
        if nested:  # (and not hidden randomness to the graphs this one is nested in)
            _outer_drawing(g, 1)
        try:
            with g.paused() if tensors is not None else _NOT_PAUSED:
                if raw is None:
                    raw = _draw(estimator, dist, shape, name, location)
                drawn = raw
                value, parents, foreign = sample_influence(g, dist, estimator, drawn, len(shape), tensors)
                private, log_prob, kept = _scored(dist, estimator, value, shape, name, location, g.scores_apart)
        finally:
            tracker.drawing -= 1
            if nested:
                _outer_drawing(g, -1)
    else:  # (Declared, and Cached between its tracked graphs: nothing to pause; nested, the draw is
        # counted in the trackers of the graphs it is nested in, which see it)
        if nested:
            _outer_drawing(g, 1)
        try:
            value = raw if raw is not None else _draw(estimator, dist, shape, name, location)
            private, log_prob, kept = _scored(dist, estimator, value, shape, name, location, g.scores_apart)
        finally:
            if nested:
                _outer_drawing(g, -1)
    if g.grad_at_open and not compiling and not _grad_enabled() and estimator.score:
        warnings.warn(  # (a no_grad block inside a training graph, a reentrant checkpoint's forward)
            f"scg.sample(name={name!r}) at {location} drew under torch.no_grad() in a graph opened with "
            "gradients on: its score term has no gradient, so the node's effect on the costs is missing "
            "from the gradient. Draw it with gradients on (a greedy rerun goes in its own graph, opened "
            "under no_grad; torch.utils.checkpoint: use_reentrant=False, around the networks only)",
            InfluenceLostWarning,
            stacklevel=2,
        )
    inputs = None if node_baseline is None else baseline_inputs(g, node_baseline)
    node = g.new_node(StochasticNode, name, "stochastic", step, location, value, parents, foreign)
    node.dist = dist
    node.estimator = estimator
    node.baseline = node_baseline
    node.log_prob = log_prob
    node.dist_log_prob = None
    node.n = n
    node.private = private
    node.drawn = kept
    node.plates = plates if plates is not None else g.plates
    node.enumerated = enumerated
    node.baseline_inputs = inputs
    g.record(node)
    if tracked:
        track_value(g, node, dist, drawn, len(shape), tensors)
        outer = g.outer
        if outer is not None:
            outer.foreign_sample(value, node)
    return value


#: `_drawn_first`'s answer for a node drawn as usual
_NOT_DRAWN: tuple[None, bool] = (None, False)


def _drawn_first(
    g: GraphRecord,
    dist: Distribution,
    estimator: Estimator,
    name: str | None,
    step: int | None,
    shape: torch.Size,
    location: Location | str,
) -> tuple[torch.Tensor | None, bool]:
    """The value drawn before the node's own draw, and whether the graph's intervention gave it:
    the intervention's value when it returns one (it takes precedence over every estimator: an
    exact enumeration or a greedy rerun sets each node's value, whichever estimator the program
    gave it), else an enumerating estimator's own draw (its support, measure-valued points...),
    else None (the estimator draws as usual)."""
    if g.intervene is not None:
        try:
            value = _intervention(g, name, step, dist, shape)
        except SCGError as e:
            raise SCGError(f"scg.sample(name={name!r}) at {location}: {e}") from None
        if value is not None:
            return value, True
    if estimator.enumerates:  # (the estimator's own draws, e.g. measure-valued points, are scg's)
        with _own_randomness(g):
            return _draw(estimator, dist, shape, name, location), False
    return _NOT_DRAWN


def _outer_drawing(g: GraphRecord, step: int) -> None:
    """Count a draw of ``g`` (``step`` 1 on entry, -1 on exit) in the trackers of the tracked
    graphs ``g`` is nested in: their modes see its random calls too, which are scg's own."""
    outer = g.outer
    while outer is not None:
        if outer.tracked:
            outer.tracker.drawing += step
        outer = outer.outer


@contextmanager
def _own_randomness(g: GraphRecord) -> Iterator[None]:
    """In a tracked graph, the random calls made inside are scg's own (a draw, its scoring, an
    intervention hook's replay): the tracker (nor those of the graphs it is nested in) does not
    report them as hidden randomness."""
    if g.tracked:
        g.tracker.drawing += 1
    _outer_drawing(g, 1)
    try:
        yield
    finally:
        if g.tracked:
            g.tracker.drawing -= 1
        _outer_drawing(g, -1)


def _draw(
    estimator: Estimator, dist: Distribution, shape: torch.Size, name: str | None, location: Location | str
) -> torch.Tensor:
    """``estimator.draw``, its errors naming the node."""
    try:
        value = estimator.draw(dist, shape)
    except SCGError as e:
        raise SCGError(f"scg.sample(name={name!r}) at {location}: {e}") from None
    except NotImplementedError:  # (a Distribution subclass without sample/rsample)
        raise SCGError(
            f"scg.sample(name={name!r}) at {location}: {type(dist).__name__} does not implement the draw "
            f"{estimator!r} makes (sample() or rsample())"
        ) from None
    except (RuntimeError, ValueError, TypeError) as e:  # (an estimator's setting that does not fit the node)
        raise SCGError(
            f"scg.sample(name={name!r}) at {location}: the draw of {type(dist).__name__} "
            f"(batch shape {tuple(dist.batch_shape)}) by {estimator!r} failed: {type(e).__name__}: {e}"
        ) from None
    if not isinstance(value, torch.Tensor):
        raise SCGError(
            f"scg.sample(name={name!r}) at {location}: the draw of {type(dist).__name__} by {estimator!r} "
            f"returned {type(value).__name__}, expected a tensor"
        )
    return value


def _scored(
    dist: Distribution,
    estimator: Estimator,
    value: torch.Tensor,
    shape: torch.Size,
    name: str | None,
    location: Location | str,
    apart: bool = False,
) -> tuple[bool, torch.Tensor | None, torch.Tensor | None]:
    """Whether the value is scored on a private copy (it does not require grad, so the program
    may edit its sample in place, ``tok.masked_fill_(done, pad)``, without breaking backward),
    the node's log-probability (None when its estimator needs none), and that copy when the
    estimator reads the value again as the surrogate is built (`Estimator.rereads_value`; None:
    the value itself is read). ``apart`` (`GraphRecord.scores_apart`): the estimator's own random
    calls as it scores (ARM redraws its u given the pair) leave torch's CPU generator as they
    found it."""
    private = not value.requires_grad
    if not (estimator.score or estimator.enumerates):
        return private, None, None
    scored = value.clone() if private else value
    try:
        if apart:
            with torch.random.fork_rng(devices=()):
                log_prob = estimator.log_prob(dist, scored)
        else:
            log_prob = estimator.log_prob(dist, scored)
    except SCGError as e:
        raise SCGError(f"scg.sample(name={name!r}) at {location}: {e}") from None
    except NotImplementedError:
        raise SCGError(
            f"scg.sample(name={name!r}) at {location}: {type(dist).__name__} does not "
            "implement log_prob, which the score-function estimator needs"
        ) from None
    except (RuntimeError, ValueError, TypeError) as e:  # (a value of another dtype, outside the support...)
        raise SCGError(
            f"scg.sample(name={name!r}) at {location}: {type(dist).__name__}.log_prob of the node's value "
            f"(dtype {value.dtype}, shape {tuple(value.shape)}) failed: {type(e).__name__}: {e}"
        ) from None
    if not isinstance(log_prob, torch.Tensor):
        raise SCGError(
            f"scg.sample(name={name!r}) at {location}: {type(dist).__name__}.log_prob returned "
            f"{type(log_prob).__name__}, expected a tensor"
        )
    expected = dist.batch_shape if not shape else shape + dist.batch_shape
    if log_prob.shape != expected:
        raise SCGError(
            f"scg.sample(name={name!r}) at {location}: log_prob has shape "
            f"{tuple(log_prob.shape)}, expected sample_shape + batch_shape = {tuple(expected)}"
        )
    return private, log_prob, scored if private and estimator.rereads_value else None


def _intervention(
    g: GraphRecord, name: str | None, step: int | None, dist: Distribution, shape: torch.Size
) -> torch.Tensor | None:
    """The graph's ``intervene`` hook for this node: its value (checked to have the node's shape)
    or None to draw as usual. In a tracked graph the hook's own draws (replays, reruns) are scg's."""
    assert g.intervene is not None
    auto = name if name is not None else g.next_name("stochastic")
    with _own_randomness(g):
        try:
            raw = g.intervene(auto, step, dist, shape)
        except TypeError as e:  # (most often a function of other arguments)
            raise SCGError(
                f"scg.Graph(intervene=...): calling it as intervene(name, step, dist, sample_shape) for the "
                f"node {auto!r} failed: {e}"
            ) from None
    if raw is not None:
        expected_shape = shape + dist.batch_shape + dist.event_shape
        if not isinstance(raw, torch.Tensor) or raw.shape != expected_shape:
            got = tuple(raw.shape) if isinstance(raw, torch.Tensor) else type(raw).__name__
            raise SCGError(
                f"the graph's intervention returned {got}, expected a tensor of shape {tuple(expected_shape)}"
            )
    return raw
