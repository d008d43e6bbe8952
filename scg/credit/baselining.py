"""Baselines applied to the learning signals: each baseline group's value (a node's b_v, a
cost's b_c) computed once for its members, checked to broadcast to the signal's shape without
changing it, subtracted, and its regression loss collected; the values' finiteness checked once
per surrogate (`check_baseline_values`). Baselines get the sample layout of the nodes they serve
(`SampleInfo`) as an argument. `scg.credit.signals` calls it for the costs' baselines, the
surrogate for the nodes'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from scg.baselines.base import Baseline, BaselineResult
from scg.errors import SCGError
from scg.graph.nodes import NO_SAMPLE_DIMS, Node, SampleInfo

__all__ = ["BaselineValues", "apply_baselines", "check_baseline_values"]


def _check_shape(x: torch.Tensor, want: tuple[int, ...], baseline: Baseline, node: Node, what: str) -> None:
    """A baseline's value (or scale) must broadcast to the learning signal's shape without
    changing it: a (3, 1) value against a (3,) signal would broadcast to (3, 3) and credit each
    element with every other element's signal (a silently multiplied gradient)."""
    shape = tuple(x.shape)
    if shape == want or shape == want[1:]:  # (the common values: one per row, or per element)
        return
    ok = len(shape) <= len(want) and all(s in (1, w) for s, w in zip(shape[::-1], want[::-1]))
    if not ok:
        name = " ".join(repr(baseline).split())
        raise SCGError(
            f"the baseline {name} of {node.describe()} returned a {what} of shape "
            f"{tuple(x.shape)}, which does not broadcast to the shape of the learning "
            f"signal it is subtracted from, {tuple(want)} (the nodes sharing the "
            f"baseline, then the node's shape {tuple(want[1:])}); give it that shape or "
            "one that broadcasts to it (e.g. a scalar)"
        )


#: (baseline value, baseline, first node) of each baseline group applied by a surrogate, checked
#: for finiteness once per surrogate (`check_baseline_values`)
BaselineValues = list[tuple[torch.Tensor, Baseline, Node]]


def apply_baselines(
    nodes: Sequence[Node],
    targets: torch.Tensor,
    losses: list[torch.Tensor],
    values: BaselineValues,
    info: Sequence[SampleInfo] | None = None,
) -> torch.Tensor:
    """``(targets − b) · scale`` for each row, with each node's ``baseline``; rows sharing a
    baseline object go together. Their regression losses are appended to ``losses`` and their
    values to ``values``; ``info``: the nodes' sample layouts (none: no sample dimensions),
    given to the baselines (rows whose baselines share a `Baseline.batch_key` go to one call).
    Rows are sliced, not gathered, when a baseline's rows are
    consecutive (the common case: one baseline per node, or one for the group); when every row
    has a baseline and no scale, the values are joined and subtracted once. Values and scales are
    cast to the targets' dtype: the signal keeps it (a cost group's is multiplied by the plan's
    credit weights, made in the costs' dtype)."""
    groups: dict[int, list[int]] = {}  # in the order of their first rows
    objects: dict[int, Baseline] = {}
    for i, node in enumerate(nodes):
        b: Baseline | None = node.baseline  # type: ignore[attr-defined]
        if b is not None:
            key = id(b.batch_key())
            got = groups.get(key)
            if got is None:
                groups[key] = [i]
                objects[key] = b
            else:
                got.append(i)
    if not groups:
        return targets
    n = len(nodes)
    shape = targets.shape[1:]
    applied: list[_Applied] = []  # in the order of their first rows
    for key, idx in groups.items():
        first, end = idx[0], idx[-1] + 1
        consecutive = end - first == len(idx)
        rows = (targets if end - first == n else targets[first:end]) if consecutive else targets[idx]
        baseline = objects[key]
        members = [nodes[i] for i in idx]
        result = baseline(members, rows, [NO_SAMPLE_DIMS] * len(idx) if info is None else [info[i] for i in idx])
        if not isinstance(result, BaselineResult) or not isinstance(result.value, torch.Tensor):
            got = type(result.value if isinstance(result, BaselineResult) else result).__name__
            raise SCGError(
                f"the baseline {baseline!r} of {members[0].describe()} returned {got}; a Baseline's __call__ "
                "returns a BaselineResult(value=tensor, loss=None, scale=None)"
            )
        value = result.value.detach() if result.value.requires_grad else result.value
        want = (len(idx), *shape)
        _check_shape(value, want, baseline, members[0], "value")
        if value.dtype != targets.dtype:  # (a float64 module's value for float32 costs: the signal keeps
            # its dtype, that of the plan's credit weights it is multiplied by, `CreditPlan.terms`)
            value = value.to(targets.dtype)
        values.append((value, baseline, members[0]))
        scale = result.scale
        if scale is not None:
            _check_shape(scale, want, baseline, members[0], "scale")
            scale = scale.detach().to(targets.dtype)
        if result.loss is not None:
            losses.append(result.loss)
        applied.append(
            _Applied(idx=idx, first=first, end=end, consecutive=consecutive, rows=rows, value=value, scale=scale)
        )
    if len(applied) == 1 and applied[0].end - applied[0].first == n and applied[0].consecutive:
        return applied[0].advantage()
    at = 0  # the rows before it are covered in order by consecutive groups without a scale
    rows_of_one = True  # and each group is one row with a value of the node's shape
    for a in applied:
        if at != a.first or not a.consecutive or a.scale is not None:
            break
        at = a.end
        rows_of_one = rows_of_one and a.end - a.first == 1 and a.value.shape == shape
    if at == n:  # every row covered in order: one join, one subtraction
        if rows_of_one:
            return targets - torch.stack([a.value for a in applied])
        return targets - torch.cat([a.value.expand(a.end - a.first, *shape) for a in applied])
    if all(a.consecutive for a in applied):
        parts: list[torch.Tensor] = []
        at = 0
        for a in applied:
            if a.first > at:
                parts.append(targets[at : a.first])  # rows without a baseline
            parts.append(a.advantage())
            at = a.end
        if at < n:
            parts.append(targets[at:])
        return torch.cat(parts)
    out = targets.clone()
    for a in applied:
        if a.consecutive:
            out[a.first : a.end] = a.advantage()
        else:
            out[a.idx] = a.advantage()
    return out


@dataclass(kw_only=True, slots=True)
class _Applied:
    """One baseline group of `apply_baselines`: its rows (``idx``; ``first``..``end`` when
    ``consecutive``), their targets, and the baseline's detached value and scale."""

    idx: list[int]
    first: int
    end: int
    consecutive: bool
    rows: torch.Tensor
    value: torch.Tensor
    scale: torch.Tensor | None

    def advantage(self) -> torch.Tensor:
        """``(rows − value) · scale``, of the rows' shape."""
        adv = self.rows - self.value
        if self.scale is not None:
            adv = adv * self.scale
        if adv.shape != self.rows.shape:  # (a value broadcast over more dimensions is refused)
            adv = adv.expand_as(self.rows)
        return adv


def check_baseline_values(values: BaselineValues, covering: torch.Tensor | None = None) -> None:
    """Refuse a non-finite baseline value, naming the baseline and its node: one host read for
    all of a surrogate's baselines (a NaN or ±inf propagates into the sum; a finite sum that
    overflowed is told apart by the element-wise check). ``covering``: a scalar that every value
    reached (the surrogate's sum of score terms), read instead of summing the values again."""
    if not values:
        return
    if covering is not None:
        total = covering
    elif len(values) > 1:
        total = torch.stack([v.sum() for v, _, _ in values]).sum()
    else:
        total = values[0][0].sum()
    if math.isfinite(total.item()):
        return
    for value, baseline, node in values:
        if not bool(torch.isfinite(value).all()):
            raise SCGError(f"the baseline {baseline!r} of {node.describe()} returned a non-finite value")
