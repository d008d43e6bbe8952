"""A constant baseline b_v = b."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from scg.baselines.base import Baseline, BaselineResult
from scg.errors import SCGError

if TYPE_CHECKING:
    from scg.graph.nodes import Node, SampleInfo

__all__ = ["Constant"]


class Constant(Baseline):
    """b_v = ``value`` for every node it is attached to (a float or a broadcastable tensor)."""

    def __init__(self, value: float | torch.Tensor) -> None:
        if isinstance(value, torch.Tensor):
            if value.is_complex() or value.dtype == torch.bool:
                raise SCGError(f"Constant(value): expected a real tensor, got one of dtype {value.dtype}")
            if not torch.isfinite(value).all():
                raise SCGError("Constant(value): value must be finite")
        elif (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or value != value
            or abs(value) == float("inf")
        ):
            raise SCGError(f"Constant(value): expected a finite number or tensor, got {value!r}")
        self.value = value

    def __call__(self, nodes: Sequence[Node], targets: torch.Tensor, info: Sequence[SampleInfo]) -> BaselineResult:
        v = torch.as_tensor(self.value, dtype=targets.dtype, device=targets.device)
        return BaselineResult(v)

    def __repr__(self) -> str:
        return f"Constant({self.value!r})"
