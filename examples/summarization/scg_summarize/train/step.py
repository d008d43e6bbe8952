"""One optimizer step of the training loop: `TrainingStep`, a base of
[`Trainer`][scg_summarize.train.loop.Trainer].

A global batch becomes this rank's share on the device with its loss normalizer (`step_inputs`:
the batch size or the target tokens, divided for DDP's gradient averaging); the objective, its
backward pass and the gradients' renormalization are the device's part (`forward_backward`, which
``train.cuda_graph`` replays from a CUDA graph: `.captured`); its values come to the host in one
read, and the optimizer steps unless the loss or gradient norm is non-finite (`train_step`,
`TrainingDiverged`). +ALTERNATE's coin (`_soft_minibatch`) is read by the objective (`.objective`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..data.batching import Batch
from ..models.family import SummarizerFamily
from .captured import CapturedStep, DevicePart
from .config import Config
from .data import batch_to
from .ddp import DistContext
from .objective import Objective, StepResult, StepValues
from .optim import clip_gradients
from .run_dir import CHECKPOINT
from .run_state import RunCounters

__all__ = ["TrainingDiverged", "TrainingStep"]


class TrainingDiverged(ValueError):
    """The loss (or a gradient, or the validation perplexity) became non-finite."""


class TrainingStep:
    """One optimizer step (see the module docstring), as methods of the `Trainer`, which sets
    the attributes below."""

    config: Config
    dist: DistContext
    device: torch.device
    net: nn.Module
    model: SummarizerFamily[Any, Any]
    objective: Objective
    optimizer: torch.optim.Optimizer
    captured: CapturedStep | None
    counters: RunCounters
    out_dir: Path
    last_finite: tuple[int, float] | None

    def _soft_minibatch(self) -> bool:
        p = self.config.train.alternate
        if p <= 0:
            return False
        coin = torch.Generator().manual_seed(self.config.train.seed * 1_000_003 + self.counters.step)
        return bool(torch.rand((), generator=coin) < p)

    def train_step(self, batch: Batch) -> StepValues:
        """One optimizer step on ``batch``; its values (loss, NLL, tokens, gradient norm, the
        objective's terms) come to the host in one read, after the backward pass and before the
        optimizer step, which a non-finite loss or gradient norm stops (`TrainingDiverged`): one
        wait for the device per step (C2F's sampled steps made one per decoder step before).
        With ``train.cuda_graph`` the forward and backward passes are a graph's replay (`.captured`)."""
        inputs, normalizer = self.step_inputs(batch)
        device_part: DevicePart = self.forward_backward if self.captured is None else self.captured
        result, norm = device_part(inputs, normalizer)
        # (a non-finite loss backpropagates non-finite gradients; nothing is stepped with them)
        values = result.read(norm)
        if not (math.isfinite(values.nll) and math.isfinite(values.loss)):
            self._diverged(f"the training loss became non-finite at step {self.counters.step + 1}")
        if values.norm is not None and not math.isfinite(values.norm):
            self._diverged(f"the gradient norm became non-finite at step {self.counters.step + 1}")
        self.optimizer.step()
        self.counters.step += 1
        self.last_finite = (self.counters.step, values.nll / max(values.tokens, 1))
        return values

    def step_inputs(self, batch: Batch) -> tuple[Batch, float]:
        """This rank's share of a global batch on the device, and the loss normalizer (counted on
        the host copy: no host read)."""
        tc = self.config.train
        global_batch = int(batch.src.shape[0])
        shard = self.dist.shard(batch)
        multiple = self.config.data.pad_targets
        if multiple:  # (data.pad_targets: few target lengths, for a compiled or captured step)
            shard = shard.with_target_length(-(-int(shard.tgt.shape[1]) // multiple) * multiple)
        # DDP averages the ranks' gradients, so each rank divides by (global count) / world: the
        # update is then the one-process update on the global batch, in either mode
        if tc.normalize == "batch":
            normalizer = global_batch / self.dist.world
        else:
            local = float(shard.tgt_mask[:, 1:].sum())
            normalizer = max(self.dist.all_reduce([local], self.device)[0], 1.0) / self.dist.world
        return batch_to(shard, self.device, self.config), normalizer

    def forward_backward(
        self, batch: Batch, normalizer: float, *, keep_grads: bool = False
    ) -> tuple[StepResult, torch.Tensor | None]:
        """The objective on a batch of `step_inputs`, its backward pass and the gradients'
        renormalization (`clip_gradients`: the norm before it, or None): the device's part of a
        step, with no host read unless the objective fails, which ``train.cuda_graph`` captures
        (`.captured`). ``keep_grads``: zero the gradients in place instead of freeing them, so a
        captured graph writes the tensors the optimizer reads."""
        self.net.train()
        try:
            result = self.objective(batch, normalizer)
        except RuntimeError:  # e.g. torch.multinomial on NaN probabilities from non-finite parameters
            # (inside a CUDA graph capture no value can be read: the error is raised as it is)
            capturing = self.device.type == "cuda" and torch.cuda.is_current_stream_capturing()
            if capturing or all(bool(torch.isfinite(p).all()) for p in self.model.parameters()):
                raise
            self._diverged(f"the parameters became non-finite before step {self.counters.step + 1}")
        self.optimizer.zero_grad(set_to_none=not keep_grads)
        result.loss.backward()  # type: ignore[no-untyped-call]
        return result, clip_gradients(self.model.parameters(), self.config.train.max_grad_norm)

    def _diverged(self, what: str) -> None:
        last = (
            f"the last finite training loss was {self.last_finite[1]:.4g} per token at step {self.last_finite[0]}"
            if self.last_finite
            else "no step had a finite loss"
        )
        raise TrainingDiverged(
            f"training diverged: {what} ({last}); {self.out_dir / CHECKPOINT} holds the last "
            f"state before it. Lower train.lr or set train.max_grad_norm"
        )
