"""Exponential moving average baseline, one running average per (node name, step).

The C2F paper (Ling & Rush 2017, Section 4.4.1) keeps, for each decoder step t, a running average
of the reward, ``b_t ← b_t + β (r_t − b_t)``. The gradient must use the value from *before* the
update: including the current sample's reward in its own baseline correlates b with the score and
biases the estimate (updating first scales every gradient by (1 − β), 0.5x at β = 0.5).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from scg.baselines.base import Baseline, BaselineResult
from scg.errors import SCGError, expect_bool

if TYPE_CHECKING:
    from scg.graph.nodes import Node, SampleInfo

__all__ = ["EMA"]

Key = tuple[str, "int | None"]


class EMA(Baseline):
    """b ← b + β (mean(target) − b), keyed by node name and step; returns the pre-update b.

    The averages are one tensor on the targets' device, updated in place once every key has been
    seen (a new key adds a row: a new tensor), so a training step captured in a CUDA graph after
    a warm-up that saw its keys updates them on every replay, without a host read. A target with no
    elements (a batch of 0 examples) leaves the averages as they are.

    Args:
        beta: the update rate β in (0, 1] (the paper uses 0.1).
        init: the value before the first update.
        per_element: keep one average per element of the target (e.g. per position) instead of
            one scalar per key; the target shape (batch size included) must then stay the same
            across calls, and a change is refused naming the node.
    """

    def __init__(self, beta: float = 0.1, *, init: float = 0.0, per_element: bool = False) -> None:
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0.0 < beta <= 1.0:
            raise SCGError(f"EMA(beta): beta must be in (0, 1], got {beta!r}")
        if isinstance(init, bool) or not isinstance(init, (int, float)) or not math.isfinite(float(init)):
            raise SCGError(f"EMA(init=...): expected a finite number (the average before any cost), got {init!r}")
        self.beta: float = float(beta)
        self.init: float = float(init)
        self.per_element = expect_bool(per_element, "EMA(per_element=...)")
        self._index: dict[Key, int] = {}
        self._values: torch.Tensor | None = None  # (n_keys, *element_shape)
        #: the row-index tensor of each tuple of rows, per device (made once, not every step)
        self._row_tensors: dict[tuple[tuple[int, ...], torch.device], torch.Tensor] = {}

    def _rows(self, nodes: Sequence[Node], like: torch.Tensor) -> torch.Tensor | None:
        """The rows of ``nodes`` in the table of averages (None: the nodes are its rows, in order)."""
        if self.per_element and self._values is not None and self._values.shape[1:] != like.shape[1:]:
            raise SCGError(
                f"EMA(per_element=True) baseline of {nodes[0].describe()}: its learning signal has "
                f"shape {tuple(like.shape[1:])}, but the running averages have shape "
                f"{tuple(self._values.shape[1:])} (one per element, fixed by the first call; did "
                "the batch size change?). Keep the shape fixed (e.g. a DataLoader with "
                "drop_last=True), or use EMA(per_element=False), LeaveOneOut() or Learned"
            )
        index = self._index
        keys = [(n.name, n.step) for n in nodes]
        grown = self._values is None
        for key in keys:
            if key not in index:
                index[key] = len(index)
                grown = True
        if grown:  # (new rows made on the targets' device: no round trip through the host)
            shape = tuple(like.shape[1:]) if self.per_element else ()
            fresh = torch.full((len(index), *shape), self.init, dtype=like.dtype, device=like.device)
            if self._values is not None:
                fresh[: self._values.shape[0]] = self._values.to(device=like.device, dtype=like.dtype)
            self._values = fresh
        if keys == list(index):  # (the nodes are the table's rows, in order)
            return None
        idx = tuple([index[k] for k in keys])
        if torch.compiler.is_compiling():  # a constant of the compiled step (caching it would add a guard)
            return torch.tensor(idx, device=like.device)
        where = (idx, like.device)
        got = self._row_tensors.get(where)
        if got is None:
            got = self._row_tensors[where] = torch.tensor(idx, device=like.device)
        return got

    def __call__(self, nodes: Sequence[Node], targets: torch.Tensor, info: Sequence[SampleInfo]) -> BaselineResult:
        rows = self._rows(nodes, targets)
        values = self._values
        assert values is not None
        if values.dtype != targets.dtype or values.device != targets.device:
            values = self._values = values.to(device=targets.device, dtype=targets.dtype)
        # (n,) or (n, *shape): the value from before the update, a copy (the table is written below)
        old = values.clone() if rows is None else values[rows]
        if self.per_element:
            observed = targets
        else:
            observed = (targets if targets.dim() == 2 else targets.reshape(targets.shape[0], -1)).mean(dim=1)
        if observed.requires_grad:
            observed = observed.detach()
        # a batch of no elements (a last batch of 0 examples, every sequence done) observes nothing:
        # its mean over no element would make the average NaN for every later step
        new = old if targets.numel() == 0 else old + self.beta * (observed - old)
        if torch.compiler.is_compiling():
            # a new table, not a write: AOTAutograd's partitioner recomputes what the backward
            # needs (``old``) from the step's inputs, after the step wrote them (torch 2.13: the
            # baseline of a compiled step read this step's own update, a biased gradient)
            self._values = new if rows is None else values.index_copy(0, rows, new)
        elif rows is None:
            # written in place once the keys are known: a step captured in a CUDA graph replays the
            # update into the table the next step reads (a new tensor would be the capture's own)
            values.copy_(new)
        else:
            values.index_copy_(0, rows, new)
        if self.per_element:
            return BaselineResult(old)
        return BaselineResult(old.reshape((old.shape[0],) + (1,) * (targets.dim() - 1)))

    def value(self, name: str, step: int | None = None) -> torch.Tensor:
        """The current running average for ``(name, step)``: a tensor (0-dim, or the element
        shape with ``per_element``) on the device of the averages, a copy; ``init`` (0-dim) if
        never updated. No host read: ``float(ema.value(...))`` makes one where a number is wanted,
        and a training step that uses the value as a tensor (the C2F summarizer's padded costs)
        does not wait for the device."""
        i = self._index.get((name, step))
        values = self._values
        if i is None or values is None:
            return torch.tensor(self.init) if values is None else values.new_full((), self.init)
        return values[i].clone()

    def state_dict(self) -> dict[str, Any]:
        return {
            "beta": self.beta,
            "init": self.init,
            "keys": list(self._index),
            "values": None if self._values is None else self._values.detach().cpu().clone(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict):
            raise SCGError(
                f"EMA.load_state_dict: expected the dict EMA.state_dict() returns, got {type(state).__name__}"
            )
        missing = [key for key in ("beta", "init", "keys", "values") if key not in state]
        if missing:
            raise SCGError(
                f"EMA.load_state_dict: the state lacks {', '.join(map(repr, missing))} (expected what "
                "EMA.state_dict() returns)"
            )
        self.beta = float(state["beta"])
        self.init = float(state["init"])
        self._index = {tuple(k): i for i, k in enumerate(state["keys"])}
        values = state["values"]  # (a copy: the table is updated in place, and the state is the caller's)
        self._values = None if values is None else torch.as_tensor(values).clone()
        self._row_tensors.clear()

    def __repr__(self) -> str:
        return f"EMA(beta={self.beta}, init={self.init})"
