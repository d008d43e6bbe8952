"""Sample dimensions: several samples (``n=k``) or the whole support (``Enumerate``) of a node.

A node drawn with ``scg.sample(dist, n=k)`` holds k independent samples along a new leading
dimension, and a node with the [`Enumerate`][scg.estimators.Enumerate] estimator holds every value of
its finite support along one. Either way the node has a *sample dimension* with a weight per
slice: 1/k for a multi-sample node (a Monte Carlo average) and p(value_i | parents) for an
enumerated node (an exact expectation). The objective becomes

    E[ Σ_c Σ_elements ω_c ⊙ c ],   ω_c = Π_{u ∈ S(c)} ω_u  (broadcast into c's layout),

so with one multi-sample node it is E[mean over the k samples of Σ c] = E[Σ c] with k times the
information, and with an enumerated node the expectation over that node is exact and
differentiable through its probabilities.

The rule for which dimensions are sample dimensions (checked, errors name the node or cost):

* The *layout* of a node or cost is the list of sample-dimension nodes that influence it (for a
  stochastic node: itself first, when it has one), **newest node first**; their sizes must lead
  its shape, in that order, before its own batch dimensions. Nested multi-sample nodes therefore
  prepend dimensions: ``u = sample(p, n=3)`` then ``w = sample(q(u), n=2)`` gives ``w`` the shape
  ``(2, 3, *batch)``; a cost computed from independent ``u`` (n=3) and ``v`` (n=2, created later)
  must be arranged as ``(2, 3, ...)``, e.g. ``f(u[None], v[:, None])``.
* A cost may *reduce* the sample dimension of a multi-sample node itself (log-mean-exp for
  VIMCO/IWAE objectives) when it says so: ``scg.cost(value, reduced=u)``. Each of u's samples is
  then credited with the whole cost (the score of the joint of the k samples), and no 1/k
  weight applies to that dimension.
* Operations must not mix the slices of a sample dimension except in a declared reduction.
* Each sample dimension must be *where* the layout puts it, not only of the right size: the
  tracker follows it through the operations (`scg.graph.sample_positions`), so two sample
  dimensions of equal size swapped are an error; one it could not follow is reported when
  another of the layout has the same size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from scg.errors import SCGError
from scg.graph.graph import GraphRecord
from scg.graph.masks import bits
from scg.graph.nodes import CostNode, Node, SampleInfo, StochasticNode
from scg.graph.sample_positions import check_layout

__all__ = ["SamplePlan", "align_batch_to_cost", "align_batch_to_node"]


def _describe_layout(nodes: Sequence[StochasticNode]) -> str:
    return ", ".join(f"'{v.name}' (n={v.n})" for v in nodes)


class SamplePlan:
    """The sample-dimension layout of every node and cost of a graph (see the module docstring)."""

    def __init__(self, graph: GraphRecord, full: Sequence[int]) -> None:
        self.full = full  # (no reference to the graph: a plan is kept across graphs)
        self.nodes: dict[int, StochasticNode] = {v.index: v for v in graph.stochastic_nodes if v.n is not None}
        self.mask = sum(1 << i for i in self.nodes)
        self.active = bool(self.mask)
        self._layouts: dict[int, tuple[int, ...]] = {}
        #: nodes whose leading sample dimension a cost they influence reduced (SampleInfo.joint)
        self._joint: set[int] = set()
        if not self.active:
            return
        for v in graph.stochastic_nodes:
            lay = self.layout(v)
            self._check_prefix(graph, v, v.value.shape, lay, "value")
        for c in graph.cost_nodes:
            self._check_prefix(graph, c, c.value.shape, self.layout(c), "value")
        for c in graph.cost_nodes:
            reduced = c.reduced
            if reduced:
                for v in graph.stochastic_nodes:
                    lay = self.layout(v)
                    if lay and (reduced >> lay[0] & 1) and (full[c.index] >> v.index & 1):
                        self._joint.add(v.index)

    def is_enumerated(self, v: StochasticNode) -> bool:
        return v.enumerated

    def enumerated_layout(self, layout: Sequence[int]) -> bool:
        """Whether one of the sample dimensions of ``layout`` is an enumeration."""
        return any(self.nodes[i].enumerated for i in layout)

    def layout(self, node: Node) -> tuple[int, ...]:
        """Sample-dimension nodes leading ``node``'s shape, newest first (see module docstring)."""
        got = self._layouts.get(node.index)
        if got is not None:
            return got
        m = self.full[node.index] & self.mask
        if isinstance(node, CostNode):
            m &= ~node.reduced
        lay = sorted(bits(m), reverse=True)
        if node.index in self.nodes:
            lay.insert(0, node.index)
        out = tuple(lay)
        self._layouts[node.index] = out
        return out

    def sizes(self, layout: Sequence[int]) -> tuple[int, ...]:
        return tuple(int(self.nodes[i].n) for i in layout)  # type: ignore[arg-type]

    def info(self, v: StochasticNode) -> SampleInfo:
        return self.layout_info(self.layout(v) if self.active else (), v.index in self._joint)

    def layout_info(self, lay: tuple[int, ...], joint: bool = False) -> SampleInfo:
        """The `SampleInfo` of a value whose leading dimensions are the sample dimensions ``lay``
        (a node's, or a cost group's: what its baseline is given)."""
        return SampleInfo(lay, self.sizes(lay), tuple(self.is_enumerated(self.nodes[i]) for i in lay), joint)

    def _check_prefix(self, graph: GraphRecord, node: Node, shape: torch.Size, lay: tuple[int, ...], what: str) -> None:
        want = self.sizes(lay)
        if tuple(shape[: len(want)]) == want:
            if lay and graph.tracked:  # and each dimension where the layout puts it (not only of that size;
                # an untracked graph's values carry no sample maps: its structure is declared)
                check_layout(node, lay, graph.sample_places(node.value), lambda u: self.nodes[u].describe())
            return
        srcs = [self.nodes[i] for i in lay if i != node.index]
        own = "its own sample dimension and " if node.index in self.nodes else ""
        raise SCGError(
            f"{node.describe()} has {what} shape {tuple(shape)}, but it is influenced by the "
            f"multi-sample/enumerated node(s) {_describe_layout(srcs)}: scg expects {own}their "
            f"sample dimensions to lead its shape, newest node first, i.e. a shape starting with "
            f"{want}. Keep the sample dimensions in front (broadcast independent samples as "
            "f(u[None], v[:, None])), or declare a reduction with scg.cost(..., reduced=node)"
        )

    def weight(self, lay: tuple[int, ...], shape: torch.Size, node: Node) -> tuple[float, torch.Tensor | None]:
        """ω for a tensor of ``shape`` with layout ``lay``: a float (Π 1/k) and a tensor factor
        (Π p of enumerated nodes, broadcastable to ``shape``), or None when there is none."""
        scale = 1.0
        w: torch.Tensor | None = None
        pos = {idx: i for i, idx in enumerate(lay)}
        m = len(lay)
        rest = shape[m:]
        for idx in lay:
            u = self.nodes[idx]
            if not self.is_enumerated(u):
                scale /= float(u.n)  # type: ignore[arg-type]
                continue
            assert u.log_prob is not None
            ulay = self.layout(u)
            missing = [self.nodes[i] for i in ulay if i not in pos]
            if missing:
                raise SCGError(
                    f"{node.describe()} reduces the sample dimension of "
                    f"{_describe_layout(missing)} but keeps that of the enumerated "
                    f"{u.describe()}, whose probabilities depend on it"
                )
            p = u.estimator.weights(u)
            bshape = p.shape[len(ulay) :]
            if len(bshape) > len(rest) or any(b not in (1, r) for b, r in zip(bshape, rest)):
                raise SCGError(
                    f"{node.describe()} has shape {tuple(shape)}: after its sample dimensions its "
                    f"batch dimensions {tuple(rest)} do not line up with the batch shape "
                    f"{tuple(bshape)} of the enumerated {u.describe()}; keep the node's batch "
                    "dimensions (an enumerated element is weighted by its own probability)"
                )
            view = [1] * len(shape)
            for i, s in zip(ulay, p.shape[: len(ulay)]):
                view[pos[i]] = s
            view[m : m + len(bshape)] = list(bshape)
            p = p.reshape(view)
            w = p if w is None else w * p
        return scale, w


def _align_rest(
    x: torch.Tensor, target: torch.Size, src: Node, dst: Node, reverse: bool, expand: bool = True
) -> torch.Tensor:
    """Align the trailing dims of ``x`` (q, *S) to ``target`` by leading (batch) dimensions.

    Forward (cost → node): cost dims beyond the node's, or where the node has 1, are summed.
    Reverse (node → cost): node dims beyond the cost's, or where the cost has 1, are summed. In
    both directions a dimension of size 1 (or a missing one) is broadcast; with
    ``expand=False`` it is left at size 1 (the result is broadcastable to ``(q, *target)``), so
    that a sum over it counts each element of ``x`` once.
    """
    shape = x.shape[1:]
    if shape == target:
        return x
    k = len(target)
    if len(shape) > k:
        x = x.sum(dim=tuple(range(1 + k, 1 + len(shape))))
    sum_dims = []
    for i in range(min(len(shape), k)):
        si, ti = shape[i], target[i]
        if si == ti or si == 1:
            continue
        if ti == 1:
            sum_dims.append(1 + i)
            continue
        cost, node = (dst, src) if reverse else (src, dst)
        cshape, nshape = (target, shape) if reverse else (shape, target)
        raise SCGError(
            f"{cost.describe()} has batch shape {tuple(cshape)}, which does not line up with the "
            f"batch shape {tuple(nshape)} of {node.describe()} that influences it: scg aligns "
            f"leading (batch) dimensions, so dimension {i} must be equal or 1 in one of them; "
            "reshape the cost or the node"
        )
    if sum_dims:
        x = x.sum(dim=tuple(sum_dims), keepdim=True)
    missing = k - (x.dim() - 1)
    if missing > 0:
        x = x.reshape(*x.shape, *([1] * missing))
    return x.expand(x.shape[0], *target) if expand else x


def _move(x: torch.Tensor, src: tuple[int, ...], dst: tuple[int, ...], sizes: dict[int, int]) -> torch.Tensor:
    """Rearrange the sample dims of ``x`` (q, *src dims, *rest) into (q, *dst dims, *rest):
    dims in ``src`` only are summed, dims in ``dst`` only are broadcast (both lists are ordered
    newest first, so the common ones keep their order)."""
    drop = [1 + i for i, u in enumerate(src) if u not in dst]
    if drop:
        x = x.sum(dim=drop)
    kept = [u for u in src if u in dst]
    for j, u in enumerate(dst):
        if u not in kept:
            x = x.unsqueeze(1 + j)
    lead = [sizes[u] for u in dst]
    return x.expand(x.shape[0], *lead, *x.shape[1 + len(dst) :])


def align_batch_to_node(
    x: torch.Tensor,
    c_lay: tuple[int, ...],
    v_lay: tuple[int, ...],
    node_shape: torch.Size,
    cost: Node,
    node: Node,
    sizes: dict[int, int],
    expand: bool = True,
) -> torch.Tensor:
    """Stacked costs ``(q, *cost_shape)`` → ``(q, *node_shape)`` for crediting ``node``
    (``expand=False``: batch dimensions the cost lacks are left at size 1, broadcastable)."""
    if not c_lay and not v_lay:
        return _align_rest(x, node_shape, cost, node, reverse=False, expand=expand)
    y = _move(x, c_lay, v_lay, sizes)
    q, nv = y.shape[0], len(v_lay)
    lead = y.shape[1 : 1 + nv]
    # (the rows counted, not -1: a batch of no elements has no rows to infer it from)
    flat = y.reshape(q * math.prod(lead), *y.shape[1 + nv :])
    flat = _align_rest(flat, node_shape[nv:], cost, node, reverse=False, expand=expand)
    return flat.reshape(q, *lead, *flat.shape[1:])


def align_batch_to_cost(
    x: torch.Tensor,
    v_lay: tuple[int, ...],
    c_lay: tuple[int, ...],
    cost_shape: torch.Size,
    node: Node,
    cost: Node,
    sizes: dict[int, int],
) -> torch.Tensor:
    """Stacked log-probabilities ``(r, *node_shape)`` → ``(r, *cost_shape)`` (DiCE's τ_c)."""
    if not c_lay and not v_lay:
        return _align_rest(x, cost_shape, node, cost, reverse=True)
    y = _move(x, v_lay, c_lay, sizes)
    r, m = y.shape[0], len(c_lay)
    lead = y.shape[1 : 1 + m]
    flat = y.reshape(r * math.prod(lead), *y.shape[1 + m :])
    flat = _align_rest(flat, cost_shape[m:], node, cost, reverse=True)
    return flat.reshape(r, *lead, *cost_shape[m:])
