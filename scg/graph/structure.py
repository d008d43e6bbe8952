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
* [`Cached`][scg.Cached]: the relation is *learned* from tracked runs, keyed by the graph's signature
  (the kinds, names, steps, shapes, dtypes and estimators of its nodes, in order); the graphs in
  between are not tracked and reuse it. Graphs drawn at random (one in ``check_every`` on
  average, from a generator the object owns) are tracked again and their relation compared
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

import random
import warnings
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from scg.errors import SCGError
from scg.graph.masks import closure
from scg.graph.nodes import CostNode, Node, StochasticNode, user_stacklevel
from scg.graph.positions import BATCH

__all__ = ["Cached", "Declared", "Relation", "Structure", "node_key", "signature"]

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
    do) is unbiased with a higher variance; under-declaring biases the gradient. Check a
    declaration against tracking with ``scg.testing.check_structure(program, declared)``.
    Escapes, hidden randomness, writes into samples and nested graphs are not reported in an
    untracked graph (nothing is watched), and ``scg.influenced_by`` returns its value unchanged
    (the declaration is the whole relation).
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


class Cached(Structure):
    """A relation learned from tracked runs and reused by the untracked ones in between.

    The first graph is tracked; its relation (and surrogate plan) is cached under its signature
    (`signature`). The next graphs are not tracked: one with a cached signature reuses the
    relation; one with a new signature cannot be analysed (nothing was watched), so it gets the
    conservative relation (every earlier stochastic node influences each later node, whatever
    the steps, whole-plate credit; a ``RuntimeWarning`` the first time) and the signature is
    *pending*: the following graphs are tracked until one of them has it (at most ``patience``
    tracked graphs, after which it is dropped until it is missed again), so a program whose
    length varies (T = 3, 4, 5, 3, ...) learns every length once.

    The conservative relation adds terms ∇log p(v)·c for v ⊀ c, whose mean is zero over all
    draws but not over the draws of an event that depends on v: it is unbiased (with a higher
    variance) when whether a graph's signature was seen does not depend on its draws, that is
    when the signatures depend on the program's inputs only (a sequence length from the data, a
    smaller last batch). When the program's structure depends on sampled values (a branch on
    ``z.item()``, a loop that stops once every sequence is done, a shape from boolean indexing
    by a sample) it is biased. So a tracked graph records where its program read a sampled value
    into Python (an escape of a value computed from a stochastic node, ``docs/tracking.md``) or
    built a data-dependent shape from one (`draws_read`, the first such place); from then on an
    untracked graph without a cached relation (a new signature, one dropped past
    ``max_signatures``, an unstable one) is refused with [`SCGError`][scg.SCGError] naming it,
    and the remedies: ``check_every=1`` (every graph tracked), a tracked graph, or
    ``scg.Declared``. (It still becomes pending: a caller that catches the error gets the next
    graphs tracked.) What cannot be known: an escape only in a branch that no tracked graph took
    (the fallbacks served before a tracked graph shows the read, or if none ever does, keep the
    bias). A value read only for logging counts too: read it after the graph's block.

    Checks: each untracked-eligible graph is tracked with probability ``1 / check_every``,
    drawn from a generator owned by this object (seeded with ``seed``; no global state), and its
    influence closure and credit compared with the cached ones. A difference (the program's
    data flow changed under the same signature, e.g. a data-dependent branch) raises
    [`SCGError`][scg.SCGError] naming the first pair; the signature is then *unstable*: its relation
    and plans are dropped and every later untracked graph with it gets the conservative
    relation (never the stale one; refused as above once the program was seen reading sampled
    values). Random draws, unlike a fixed stride, cannot stay in phase with a data flow that
    alternates with period ``check_every``; the residual risk (a flow that differs on a fraction
    q of graphs goes unnoticed for about ``check_every / q`` graphs) is quantified in
    ``docs/performance.md``.

    Args:
        check_every: track one graph in ``check_every`` on average (``None``: only the first
            graph of each signature, never re-checked; ``1``: every graph, tracked and compared).
        seed: seed of the generator that draws the checked graphs.
        patience: how many tracked graphs a pending signature waits for before it is dropped.
        max_signatures: how many graph signatures' relations and plans are kept (the least
            recently used one is dropped past that, `Structure`; a dropped signature is learned
            again, from its next graph on, as a new one is).
    """

    def __init__(
        self, check_every: int | None = 100, *, seed: int = 0, patience: int = 16, max_signatures: int = 64
    ) -> None:
        super().__init__(max_signatures)
        if check_every is not None and (
            isinstance(check_every, bool) or not isinstance(check_every, int) or check_every < 1
        ):
            raise SCGError(f"scg.Cached(check_every=...): expected None or an int >= 1, got {check_every!r}")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise SCGError(f"scg.Cached(patience=...): expected an int >= 1, got {patience!r}")
        self.check_every = check_every
        self.patience = patience
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise SCGError(f"scg.Cached(seed=...): expected an int, got {seed!r}")
        self._rng = random.Random(seed)
        self._retrace = True
        self._warned = False
        #: signatures that fell back untracked and are not learned yet -> tracked graphs waited
        self._pending: dict[Hashable, int] = {}
        #: signatures whose tracked check found a different relation: never served again
        self.unstable: set[Hashable] = set()
        #: where a tracked graph's program first read sampled values into Python, or built a
        #: data-dependent shape from them (`GraphRecord.draws_read`); None while none has: from
        #: then on a signature without a cached relation is refused, not given the conservative
        #: credit (whether a graph's signature is seen may depend on the draws: a biased gradient)
        self.draws_read: str | None = None

    def _begin(self) -> bool:
        if self._pending:
            for sig in list(self._pending):
                self._pending[sig] += 1
                if self._pending[sig] > self.patience:
                    del self._pending[sig]
        track = (
            self._retrace
            or bool(self._pending)
            or (self.check_every is not None and self._rng.randrange(self.check_every) == 0)
        )
        self._retrace = False
        self.stats["tracked" if track else "reused"] += 1
        return track

    def _relation(self, nodes: Sequence[Node], sig: tuple[Hashable, ...]) -> tuple[Relation, list[int]]:
        got = self.relations.get(sig)
        if got is not None:
            return got
        self.stats["reused"] -= 1
        self.stats["fallback"] += 1
        unstable = sig in self.unstable
        if not unstable:
            self._pending.setdefault(sig, 0)
        if self.draws_read is not None:
            raise self._biased_fallback(unstable)
        if not unstable and not self._warned:
            self._warned = True
            warnings.warn(
                "scg.Cached: this graph's nodes (names, steps, shapes) differ from every "
                "tracked graph so far, and it was not tracked; it gets the conservative credit "
                "(every earlier stochastic node, whole plate: unbiased, with a higher variance, as "
                "long as which signatures a graph has depends on the program's inputs only, not on "
                "its draws: the tracked graphs so far read no sampled value into Python) and the "
                "next graphs are tracked until one has these nodes. For a program whose structure "
                "changes from step to step, use scg.Declared or plain tracking",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
        rel = declared_relation(nodes, every_earlier, False)
        return rel, closure([p for p, _ in rel])

    def _biased_fallback(self, unstable: bool) -> SCGError:
        """The error for an untracked graph without a cached relation once a tracked graph's
        program read sampled values (`draws_read`): the conservative relation would be biased."""
        why = (
            "has no cached relation: its relation changed between two tracked graphs, so it is never served "
            "from the cache"
            if unstable
            else "was not seen in a tracked graph (it is new, or was dropped past "
            f"max_signatures={self.max_signatures})"
        )
        return SCGError(
            "scg.Cached: this graph was not tracked and its signature (its nodes' names, steps and shapes) "
            f"{why}; and the program reads sampled values: {self.draws_read}. "
            "So its structure (which nodes exist, their shapes) may depend on the draws, and the conservative "
            "credit such a graph would get (every earlier stochastic node credited with each later cost) would "
            "bias the gradient: the extra terms have zero mean over all draws, not over the draws whose "
            "signature happens to be unseen. Track every graph (scg.Cached(check_every=1), or a tracked graph: "
            "no structure), or declare the data flow (scg.Declared(...)); a sampled value read only for "
            "logging can be read after the graph's block instead"
        )

    def refused_fallback(self, sig: tuple[Hashable, ...], error: SCGError) -> SCGError:
        """The error for an untracked graph of ``sig`` whose conservative relation the surrogate
        refused (``error``): the every-earlier relation makes every later node carry the sample
        dimension of a node drawn with ``n=`` or enumerated, which its shape may not have."""
        why = (
            "its relation changed between two tracked graphs, so it is never served from the cache"
            if sig in self.unstable
            else f"it is new, or was dropped past max_signatures={self.max_signatures}; the next graphs "
            "are tracked until one has it"
        )
        return SCGError(
            "scg.Cached: this graph was not tracked and its signature (its nodes' names, steps and shapes) "
            f"has no cached relation: {why}. The conservative credit such a graph gets (every earlier "
            f"stochastic node influences every later node) was refused: {error}. Keep the signatures fixed "
            "(pad the lengths and batches), raise max_signatures, track every graph (scg.Cached(check_every=1) "
            "or no structure), or declare the structure (scg.Declared)"
        )

    def _learn(
        self,
        nodes: Sequence[Node],
        sig: tuple[Hashable, ...],
        relation: Relation,
        full: list[int],
        credit: dict[tuple[int, int], bool],
        reads: str | None = None,
    ) -> None:
        if reads is not None and self.draws_read is None:
            self.draws_read = reads
        self._pending.pop(sig, None)
        if sig in self.unstable:
            return
        old = self._learned.get(sig)
        if old is not None:
            try:
                _compare(nodes, old[0], old[1], full, credit)
            except SCGError:
                self._forget(sig)
                raise
        self.relations[sig] = (relation, list(full))
        self._learned[sig] = (list(full), credit)  # (the plan's own table: never written)

    def _forget(self, sig: tuple[Hashable, ...]) -> None:
        """A failed check: drop the signature's relation and plans, for good."""
        self.unstable.add(sig)
        self._drop(sig)

    def clear(self) -> None:
        super().clear()
        self._pending.clear()
        self.unstable.clear()
        self.draws_read = None
        self._retrace = True

    def __repr__(self) -> str:
        return f"scg.Cached(check_every={self.check_every!r}, {len(self.relations)} structure(s))"


def _compare(
    nodes: Sequence[Node],
    full0: list[int],
    credit0: dict[tuple[int, int], bool],
    full: list[int],
    credit: dict[tuple[int, int], bool],
) -> None:
    """Raise on the first (stochastic node, node) pair whose influence or credit differs."""
    for c in nodes:
        diff = full0[c.index] ^ full[c.index]
        for v in nodes[: c.index]:
            if diff >> v.index & 1 and isinstance(v, StochasticNode):
                now = "influences" if full[c.index] >> v.index & 1 else "does not influence"
                raise SCGError(
                    f"scg.Cached: the structure changed: in this tracked graph {v.describe()} "
                    f"{now} {c.describe()}, unlike the cached graph of the same signature (the "
                    "program's data flow depends on sampled values). The untracked graphs since "
                    "the last check used the cached relation, later ones of this signature get the "
                    "conservative credit; use plain tracking, or scg.Cached(check_every=1), for "
                    "this program"
                )
    for key in sorted(set(credit0) | set(credit)):
        if credit0.get(key) != credit.get(key):
            v, c = nodes[key[0]], nodes[key[1]]
            names = {None: "none", True: "whole-plate", False: "per-element"}
            raise SCGError(
                f"scg.Cached: the structure changed: in this tracked graph {v.describe()} gets "
                f"{names[credit.get(key)]} credit from {c.describe()}, the cached graph of the "
                f"same signature {names[credit0.get(key)]} (the program's data flow depends on "
                "sampled values); use plain tracking, or scg.Cached(check_every=1)"
            )
