"""`Cached`: a relation learned from tracked graphs, reused by the untracked ones in between.

A [`Cached`][scg.Cached] structure tracks a graph of a signature it has not seen (the kinds,
names, steps, shapes, dtypes and estimators of its nodes, `scg.graph.structure.signature`),
keeps its relation and surrogate plan, and serves them to the next graphs of that signature
without tracking them. Graphs drawn at random (one in ``check_every``, from a generator the
object owns) are tracked again and compared (`_compare`): a JIT's guard check. An untracked
graph of an unseen signature gets the conservative relation (`scg.graph.structure.every_earlier`,
whole plate) while that is unbiased, and is refused once a tracked graph showed the program
reading sampled values. The base class, the signatures and the relations are in
`scg.graph.structure`.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Hashable, Sequence

from scg.errors import SCGError
from scg.graph.masks import bits, closure, with_ancestors
from scg.graph.nodes import CostNode, Node, StochasticNode, user_stacklevel
from scg.graph.structure import Relation, Structure, declared_relation, every_earlier

__all__ = ["Cached"]


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
    bias). A value read only for logging counts too: read it after the graph's block. The
    conservative relation also credits a cost to every earlier node, so a cost's baseline computed
    from one of them would bias its gradient (Theorem 2): once a tracked graph computed a cost's
    baseline inputs from a stochastic node (`baseline_read`), an untracked graph without a cached
    relation one of whose costs has a baseline with inputs is refused too.

    Baselines (Theorem 2): the tracked graphs refuse a baseline computed from its own node, or a
    cost's baseline computed from a node that influences the cost, naming both; the untracked
    graphs between two checks use it unchecked, as they use the cached relation.

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
        #: the first cost of a tracked graph whose baseline's inputs were computed from a stochastic
        #: node (one that does not influence the cost: tracking refuses the others); None while
        #: none was: from then on a graph given the conservative credit is refused if a cost of it
        #: has a baseline with inputs (crediting every earlier node with the cost, the baseline
        #: would depend on a node it is subtracted for: Theorem 2)
        self.baseline_read: str | None = None

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
        if self.baseline_read is not None:
            cost = next((c for c in nodes if isinstance(c, CostNode) and c.baseline_inputs is not None), None)
            if cost is not None:
                raise self._biased_baseline(cost)
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

    def _biased_baseline(self, cost: CostNode) -> SCGError:
        """The error for an untracked graph without a cached relation whose ``cost`` has a baseline
        with inputs, once a tracked graph's cost baseline was computed from a stochastic node
        (`baseline_read`): the conservative relation would credit that node with the cost."""
        return SCGError(
            "scg.Cached: this graph was not tracked and its signature (its nodes' names, steps and shapes) has "
            f"no cached relation, so it would get the conservative credit (every earlier stochastic node "
            f"credited with each later cost); {cost.describe()} has a baseline "
            f"({type(cost.baseline).__name__}) with inputs, and a tracked graph computed such inputs from a "
            f"stochastic node: {self.baseline_read}. Credited with the cost, that node would have the baseline "
            "subtracted from its credit while the baseline depends on it: a biased gradient (Theorem 2), which "
            "this untracked graph cannot see. Keep the signatures fixed (pad the lengths and batches), track "
            "every graph (scg.Cached(check_every=1), or no structure), or compute the baseline's inputs from "
            "values that do not depend on the draws"
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
        if self.baseline_read is None:
            self.baseline_read = _baseline_read(nodes, full)
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
        self.baseline_read = None
        self._retrace = True

    def __repr__(self) -> str:
        return f"scg.Cached(check_every={self.check_every!r}, {len(self.relations)} structure(s))"


def _baseline_read(nodes: Sequence[Node], full: list[int]) -> str | None:
    """The first cost of a tracked graph whose baseline's inputs were computed from a score node
    (or from a value one influences), described; None if none was."""
    for c in nodes:
        inputs = c.baseline_inputs if isinstance(c, CostNode) else None
        if inputs is None or not inputs.mask:
            continue
        for i in bits(with_ancestors(inputs.mask, full)):
            v = nodes[i]
            if isinstance(v, StochasticNode) and v.estimator.score:
                return f"the baseline of {c.describe()} was computed from {v.describe()}"
    return None


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
