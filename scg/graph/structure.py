"""Declared and cached structure: credit without per-operation tracking.

Algorithm 1 of Schulman et al. (2015) credits each stochastic node v with Ĉ_v, the costs it
*influences* (v ≺ c). A tracked [`Graph`][scg.Graph] finds ≺ (and which cost elements each plate
element of v is credited with, `scg.credit.plates`) by watching every torch call; that costs a few
microseconds of Python per call. A *structure* object, passed as ``scg.Graph(structure=...)``,
gives the relation instead, so that no torch function mode is pushed and a torch call inside the
graph costs what it costs outside:

* [`Declared`][scg.Declared]: the user states the relation. The default is the *causal* rule: a node at
  step s is influenced by every stochastic node created before it at a step ≤ s (a node or cost
  without a step: by every earlier stochastic node), per example (each plate element with its
  own cost elements). A general relation is a function ``influences(v, node) -> bool``.
* [`Cached`][scg.Cached] (`scg.graph.cached`): the relation is *learned* from tracked runs,
  keyed by the graph's signature (the kinds, names, steps, shapes, dtypes and estimators of its
  nodes, in order); the graphs in between are not tracked and reuse it. Graphs drawn at random
  (one in ``check_every`` on average, from a generator the object owns) are tracked again and their relation compared
  with the cached one: a difference raises [`SCGError`][scg.SCGError] naming the first (node, cost)
  pair, the way a JIT re-checks its guards, and that signature is never served from the cache
  again. An untracked graph whose signature has no cached relation gets a conservative one,
  unless a tracked graph showed that the program reads sampled values (then it is refused:
  `Cached`).

Why an over-declared relation is safe and an under-declared one is not: for v ⊀ c, c is a
function of nodes whose distributions do not depend on v, so E[∇_θ log p(v | ·) · c] = 0 and
crediting v with c adds a zero-mean term (unbiased, higher variance); the same holds for
whole-plate instead of per-element credit (`scg.credit.plates`). Declaring v ⊀ c when v ≺ c, or
per-element credit for a cost that mixes the examples, drops a term with non-zero mean: a biased
gradient. ``scg.testing.check_structure`` runs a program tracked and compares. The zero mean is
over all draws: the extra term must be added on every draw, or on an event that does not depend
on v. `Cached`'s fallback adds it on the graphs whose signature was not seen, which is such an
event only when the signatures do not depend on the draws.

Both kinds also cache the surrogate's *plan* per signature: the influence closure, the plate
check, the grouping of nodes and costs and the credit matrices (`scg.credit.surrogate`), so that a
step with the structure of an earlier one only stacks its values and multiplies.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from scg.errors import SCGError
from scg.graph.masks import closure
from scg.graph.nodes import CostNode, Node, StochasticNode, user_stacklevel
from scg.graph.positions import BATCH

__all__ = ["Declared", "Relation", "Structure", "node_key", "signature"]

#: per node, in creation order: (direct parents mask, foreign positions as sorted items)
Relation = tuple[tuple[int, tuple[tuple[int, int], ...]], ...]

Influences = Callable[[StochasticNode, Node], bool]


class Signature(tuple):  # type: ignore[type-arg]
    """A graph's signature: a tuple whose hash is computed once (it keys several lookups per
    step)."""

    _hash: int | None = None

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            self._hash = h = tuple.__hash__(self)
        return h


def node_key(n: Node) -> Hashable:
    """A node's entry in the graph's signature: its kind, name, step, value shape, dtype and
    device, and for a stochastic node its estimator class, ``n``, declared plates, whether it is
    enumerated and its log-probability shape; for a cost the mask of the nodes whose sample
    dimension it reduces. (``scg.sample`` and ``scg.cost`` record it when the node is complete,
    while its tensors are still in the cache: `GraphRecord.record`.)"""
    v = n.value
    if isinstance(n, StochasticNode):
        lp = n.log_prob
        return (
            "s",
            n.name,
            n.step,
            v.shape,
            v.dtype,
            v.device,
            type(n.estimator),
            n.n,
            n.plates,
            n.enumerated,
            None if lp is None else lp.shape,
        )
    if isinstance(n, CostNode):
        return ("c", n.name, n.step, v.shape, v.dtype, v.device, n.reduced)
    return ("d", n.name, n.step, v.shape, v.dtype, v.device)


def signature(nodes: Sequence[Node], keys: Sequence[Hashable] = ()) -> Signature:
    """What a cached relation and surrogate plan depend on: `node_key` of every node, in
    creation order (``keys``, the entries recorded as the nodes were made, when there is one
    per node)."""
    if len(keys) == len(nodes):
        return Signature(keys)
    return Signature([node_key(n) for n in nodes])


def causal(v: StochasticNode, node: Node) -> bool:
    """The default declaration: ``v`` (created before ``node``) influences it unless both have
    steps and ``v``'s is later."""
    return v.step is None or node.step is None or v.step <= node.step


def every_earlier(v: StochasticNode, node: Node) -> bool:
    """The conservative relation of an untracked graph with no known structure (`Cached`'s
    fallback): every earlier stochastic node influences ``node``, whatever their steps (a cost
    labelled with an earlier step than a node's may still be computed from it). Unbiased where
    whether a graph gets it does not depend on its draws (`Cached`)."""
    return True


class Structure:
    """Base class of [`Declared`][scg.Declared] and [`Cached`][scg.Cached]: an object the user holds across
    graphs (``scg.Graph(structure=s)``); it keeps the relations and surrogate plans per graph
    signature. ``learned``: the relation's direct edges are data flow seen by tracking
    ([`Cached`][scg.Cached]), not a declaration that may be a superset of it ([`Declared`][scg.Declared]).
    Counts in `stats`: ``tracked`` (graphs run under tracking), ``reused``
    (graphs that used a cached or declared relation) and ``fallback`` ([`Cached`][scg.Cached] only:
    untracked graphs whose signature had no cached relation, those refused it included).

    It keeps at most ``max_signatures`` signatures: a graph with a new one past that drops the
    least recently used one's relation and plans (a warning the first time), rebuilt if it
    comes back. A loop whose lengths or batch sizes vary would otherwise keep a plan for every
    shape it ever saw; a plan of a T-step loop holds O(T²) weights."""

    learned = True

    def __init__(self, max_signatures: int = 64) -> None:
        if isinstance(max_signatures, bool) or not isinstance(max_signatures, int) or max_signatures < 1:
            raise SCGError(
                f"scg.{type(self).__name__}(max_signatures=...): expected an int >= 1, got {max_signatures!r}"
            )
        self.max_signatures = max_signatures
        #: signature -> (relation, its transitive closure)
        self.relations: dict[tuple[Hashable, ...], tuple[Relation, list[int]]] = {}
        #: (signature, surrogate options) -> plan (built by `scg.credit.surrogate`)
        self.plans: dict[tuple[Hashable, ...], Any] = {}
        self.stats = {"tracked": 0, "reused": 0, "fallback": 0}
        #: signature -> (influence closure, credit) of the last tracked graph (``Cached``)
        self._learned: dict[tuple[Hashable, ...], tuple[list[int], dict[tuple[int, int], bool]]] = {}
        #: each signature seen, as its first object: a graph's signature is compared entry by
        #: entry once (`_intern`), and its later lookups are identity hits
        self._interned: dict[Signature, Signature] = {}
        #: the signature of the last graph (a training loop repeats its graph: the next one is
        #: compared with it entry by entry, without hashing)
        self._last: Signature | None = None
        self._warned_evicting = False

    def _intern(self, sig: Signature) -> Signature:
        """The first object equal to ``sig`` that this structure saw (``sig`` if none), now the
        most recently used signature (``_interned`` is in the order of use: a graph with a new
        signature past ``max_signatures`` drops the first, `_evict`)."""
        last = self._last
        if last is None or sig != last:
            interned = self._interned
            got = interned.pop(sig, None)
            if got is None:
                got = sig
                if len(interned) >= self.max_signatures:
                    self._evict(next(iter(interned)))
            interned[got] = got
            self._last = last = got
        return last

    def _evict(self, sig: Signature) -> None:
        """Drop the least recently used signature: its relation and plans (`max_signatures`)."""
        if not self._warned_evicting:
            self._warned_evicting = True
            warnings.warn(
                f"{self!r}: more than max_signatures={self.max_signatures} graph signatures (a graph's "
                "node names, steps, shapes, dtypes and estimators) were seen, so the least recently "
                "used one's relation and surrogate plan are dropped, and rebuilt if it comes back: a "
                "plan build per graph once the signatures keep changing. Pad the batches to fewer "
                "shapes, or raise max_signatures",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
        del self._interned[sig]
        self._drop(sig)

    def _drop(self, sig: tuple[Hashable, ...]) -> None:
        """Forget the relation and plans of ``sig`` (the interned signature, `_intern`)."""
        self.relations.pop(sig, None)
        self._learned.pop(sig, None)
        # (keys: (the interned signature, options...): told apart by identity, since tuples compare
        # entry by entry, and a loop's signatures at two lengths share every entry of the shorter)
        for key in [k for k in self.plans if k[0] is sig]:
            del self.plans[key]

    # -------------------------------------------------------------- called by the graph
    def _begin(self) -> bool:
        """A graph using this structure is entered: whether it must be tracked."""
        raise NotImplementedError

    def _relation(self, nodes: Sequence[Node], sig: tuple[Hashable, ...]) -> tuple[Relation, list[int]]:
        """The relation for an untracked graph of signature ``sig``, and its closure."""
        raise NotImplementedError

    def _learn(
        self,
        nodes: Sequence[Node],
        sig: tuple[Hashable, ...],
        relation: Relation,
        full: list[int],
        credit: dict[tuple[int, int], bool],
        reads: str | None = None,
    ) -> None:
        """A tracked graph's relation, closure and credit (``Cached`` compares and stores), and
        where its program read sampled values (`GraphRecord.draws_read`; asked by ``Cached`` only,
        until it has seen one)."""

    def clear(self) -> None:
        """Forget every cached relation and plan (the next [`Cached`][scg.Cached] graph is tracked)."""
        self.relations.clear()
        self.plans.clear()
        self._learned.clear()
        self._interned.clear()
        self._last = None


def declared_relation(nodes: Sequence[Node], influences: Influences, per_example: bool | Influences) -> Relation:
    """Direct parents and foreign positions of each node under a declaration: a node's parents
    are the earlier stochastic nodes that influence it; a pair without per-example credit is
    foreign from the first batch position (`BATCH`: whole-plate credit, `scg.credit.plates`).

    The built-in rules (`causal`, `every_earlier`) with a bool ``per_example`` take one pass
    over the nodes (`_rule_relation`), not a call per pair: a new signature of a long loop (a
    sequence of a new length) would otherwise spend O(nodes²) Python calls on it."""
    if (influences is causal or influences is every_earlier) and isinstance(per_example, bool):
        return _rule_relation(nodes, influences is causal, per_example)
    out: list[tuple[int, tuple[tuple[int, int], ...]]] = []
    stochastic: list[StochasticNode] = []
    for node in nodes:
        parents = 0
        whole = 0
        for v in stochastic:
            try:
                hit = influences(v, node)
                per = per_example if isinstance(per_example, bool) else per_example(v, node)
            except Exception as e:  # the user's declaration: name the pair
                raise SCGError(
                    f"the declared structure raised {type(e).__name__}: {e} for ({v.describe()}, {node.describe()})"
                ) from e
            for what, answer in (("influences", hit), ("per_example", per)):
                if type(answer) is not bool:  # (None from a function that falls off its end would drop the pair)
                    raise SCGError(
                        f"scg.Declared({what}=...) returned {answer!r} for ({v.describe()}, {node.describe()}): "
                        "expected True or False"
                    )
            if hit:
                parents |= 1 << v.index
                if not per:
                    whole |= 1 << v.index
        out.append((parents, ((BATCH, whole),) if whole else ()))
        if isinstance(node, StochasticNode):
            stochastic.append(node)
    return tuple(out)


def _rule_relation(nodes: Sequence[Node], by_step: bool, per_example: bool) -> Relation:
    """`declared_relation` of `causal` (``by_step``) or `every_earlier`, the same masks in one
    pass: a node's parents are every earlier stochastic node, or, for a node at step s under the
    causal rule, those without a step or at a step ≤ s (all of them while steps do not decrease,
    the common case: a loop's nodes are made in step order)."""
    out: list[tuple[int, tuple[tuple[int, int], ...]]] = []
    earlier = 0  # every earlier stochastic node
    unstepped = 0  # those without a step
    at_step: dict[int, int] = {}  # step -> those at it
    top: int | None = None  # their largest step
    for node in nodes:
        s = node.step
        if not by_step or s is None or top is None or s >= top:
            parents = earlier
        else:
            parents = unstepped
            for t, m in at_step.items():
                if t <= s:
                    parents |= m
        out.append((parents, ((BATCH, parents),) if parents and not per_example else ()))
        if isinstance(node, StochasticNode):
            bit = 1 << node.index
            earlier |= bit
            if s is None:
                unstepped |= bit
            else:
                at_step[s] = at_step.get(s, 0) | bit
                top = s if top is None else max(top, s)
    return tuple(out)


class Declared(Structure):
    """A declared dependency structure: graphs using it are not tracked at all.

    Args:
        influences: ``influences(v, node) -> bool``: whether the stochastic node ``v`` influences
            ``node`` (a cost, or a stochastic or named deterministic node created after ``v``).
            A function of the nodes' names, steps and kinds (its answers are cached per graph
            signature). Default: the causal rule, a node at step s is influenced by every
            earlier stochastic node at a step ≤ s (either without a step: influenced).
        per_example: ``True`` (default): each plate element of ``v`` is credited with its own
            elements of the costs it influences (the costs' leading dimensions are its
            examples, `scg.credit.plates`); ``False``: whole-plate credit; or a function
            ``per_example(v, node) -> bool`` per pair.
        max_signatures: how many graph signatures' relations and plans are kept (the least
            recently used one is dropped past that, `Structure`).

    Over-declaring (v influences c when it does not, whole-plate credit where per-example would
    do) is unbiased with a higher variance, unless the cost has a baseline computed from v (see
    below); under-declaring biases the gradient. Check a declaration against tracking with
    ``scg.testing.check_structure(program, declared)``. Escapes, hidden randomness, writes into
    samples and nested graphs are not reported in an untracked graph (nothing is watched), and
    ``scg.influenced_by`` returns its value unchanged (the declaration is the whole relation).

    Nor are a baseline's inputs (Theorem 2): a baseline computed from its own node
    (``Learned(...).given(h)`` with h from the sample, a ``SelfCritical`` callable that reads it),
    or a cost's baseline computed from a node the declaration credits with the cost, gives a
    silently biased gradient at every declared step. A tracked graph refuses the first two;
    ``check_structure`` raises them (its tracked run) and reports the last as biased. A declared
    step that no such check ran is not checked.
    """

    learned = False

    def __init__(
        self, influences: Influences | None = None, *, per_example: bool | Influences = True, max_signatures: int = 64
    ) -> None:
        super().__init__(max_signatures)
        if influences is not None and not callable(influences):
            raise SCGError(
                f"scg.Declared(influences=...): expected a function (v, node) -> bool "
                f"or None, got {type(influences).__name__}"
            )
        if not isinstance(per_example, bool) and not callable(per_example):
            raise SCGError(
                f"scg.Declared(per_example=...): expected a bool or a function "
                f"(v, node) -> bool, got {type(per_example).__name__}"
            )
        self.influences: Influences = influences if influences is not None else causal
        self.per_example = per_example

    def _begin(self) -> bool:
        self.stats["reused"] += 1
        return False

    def _relation(self, nodes: Sequence[Node], sig: tuple[Hashable, ...]) -> tuple[Relation, list[int]]:
        got = self.relations.get(sig)
        if got is None:
            rel = declared_relation(nodes, self.influences, self.per_example)
            got = self.relations[sig] = (rel, closure([p for p, _ in rel]))
        return got

    def __repr__(self) -> str:
        rule = "causal" if self.influences is causal else getattr(self.influences, "__name__", "custom")
        return f"scg.Declared({rule}, per_example={self.per_example!r})"
