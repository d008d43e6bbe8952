"""``train.cuda_graph``: the device's part of a training step replayed from a CUDA graph.

`Trainer.forward_backward` (the objective, the backward pass, the gradients' renormalization) is
captured in a ``torch.cuda.CUDAGraph`` once per batch shape and replayed for every later batch of
that shape, its tensors copied into the captured inputs. The host then issues one replay instead
of the step's launches one by one (a C2F step makes several per decoder step, each paying the
host's dispatch, where a launch-bound GPU waits for them). The step's values are read after the replay
(`StepResult.read`, the step's one host read) and the trainer checks them and steps the optimizer
eagerly, as in an eager step: the divergence check still comes before the update, and the learning
rate, its schedule and the optimizer's state stay on the host, as they are.

Per shape (batch size, target positions: the source grid is the corpus's; the bounds on the
sources' real words, `SourceLengths`, each rounded up to a power of two):

* the first batch runs eagerly, on a side stream: it makes the state a replay must find in place
  (the EMA baseline's rows for its decoder steps, scg's credit plan for the graph's signature,
  cuBLAS' and cuDNN's workspaces, Triton's compiled kernels). Captured code may not allocate state
  that outlives the graph, nor read the host;
* the second is captured (a capture records the launches without running them), then replayed;
* later ones are copied into the captured inputs and replayed.

The word encoders run their LSTMs for the steps the batch's `SourceLengths` give (counted on the
host when the batch was collated), rounded up to a power of two so that few graphs are made: a
replay runs at most twice the steps of the batch's longest source, and makes no host read to
trim them. A batch without lengths (made by hand) runs over the whole source width in a capture.

The gradients are zeroed in place, not freed (``forward_backward(keep_grads=True)``), so every
graph and every eager step writes the same gradient tensors, which the optimizer reads. Random
draws stay random: torch's generator gives each replay a new Philox offset, and the C2F kernels'
seed is drawn from it on the device. ``data.pad_targets`` (required) bounds how many graphs a run
holds: one per padded target length, batch size (the epoch's last, smaller batch is a shape of its
own) and rounded source lengths. The graphs share one memory pool, so a run holds the memory of its
largest step, not the sum of its graphs': a graph's replay may write over memory where another
graph's outputs were, and every graph's outputs are read (and the optimizer stepped) right after its
own replay, before another graph replays.

What a graph cannot replay is refused when the configuration is read (`Config.validate`): a
normalizer counted per batch (``train.normalize = 'tokens'``: a constant of the graph), +ALTERNATE's
per-step coin, the objectives that read the host (ROUGE rewards, MAL's statistics), unpadded
targets and ``train.compile`` (which has CUDA graphs of its own); and when the trainer is built
(`check_whole_step`): a device other than CUDA, several processes, the family's own objective.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from ..data.batching import Batch, SourceLengths
from .compiled import check_whole_step
from .objective import StepResult

__all__ = ["CapturedStep", "check_capturable"]

#: the names and shapes of a batch's tensors (`Batch.tensors`) and its rounded source lengths:
#: what one graph replays
Shape = tuple[tuple[tuple[str, tuple[int, ...]], ...], SourceLengths | None]

#: `Trainer.forward_backward` with the gradients zeroed in place: (batch, normalizer) ->
#: (the step's result, the gradient norm before renormalization)
DevicePart = Callable[[Batch, float], tuple[StepResult, torch.Tensor | None]]


def batch_shape(batch: Batch) -> Shape:
    """The names and shapes of ``batch``'s tensors (an absent optional one is left out) and its
    `SourceLengths`."""
    return tuple((name, tuple(t.shape)) for name, t in batch.tensors().items()), batch.lengths


def rounded(batch: Batch) -> Batch:
    """``batch`` with its `SourceLengths` rounded up to powers of two (`SourceLengths.rounded_up`):
    the steps its graph's word encoders run."""
    if batch.lengths is None:
        return batch
    _, M, N = batch.src.shape
    return replace(batch, lengths=batch.lengths.rounded_up(M, N))


@dataclass(kw_only=True, slots=True)
class Captured:
    """One shape's graph, its input tensors (refilled before each replay) and its outputs."""

    graph: Any  # torch.cuda.CUDAGraph
    inputs: Batch
    result: StepResult
    norm: torch.Tensor | None

    def refill(self, batch: Batch) -> None:
        """Copy ``batch``'s tensors into the captured inputs (of the same shapes)."""
        for name, t in batch.tensors().items():  # (the same names: the shape key has them)
            getattr(self.inputs, name).copy_(t, non_blocking=True)


def check_capturable(trainer: Any) -> None:
    """Refuse, naming ``train.cuda_graph``, what a captured step cannot run: a device other than
    CUDA, and what no whole step can (`check_whole_step`)."""
    check_whole_step(trainer, "train.cuda_graph")
    if trainer.device.type != "cuda":
        raise ValueError(
            f"train.cuda_graph needs a CUDA device, got train.device = {trainer.config.train.device!r} "
            f"(resolved to {trainer.device}); set train.cuda_graph = false"
        )


class CapturedStep:
    """The device's part of a step (``run``: `Trainer.forward_backward` with ``keep_grads``)
    through CUDA graphs (see the module docstring): called as ``run`` is, with a batch of
    `Trainer.step_inputs` and its normalizer, returning the step's `StepResult` and gradient norm
    (a graph's tensors, valid until its next replay)."""

    def __init__(self, run: DevicePart) -> None:
        self.run = run
        self.warm: set[Shape] = set()  # shapes whose first batch has run eagerly
        self.graphs: dict[Shape, Captured] = {}
        self.pool: Any = None  # the graphs' shared memory pool (made at the first capture)

    def __call__(self, inputs: Batch, normalizer: float) -> tuple[StepResult, torch.Tensor | None]:
        inputs = rounded(inputs)
        key = batch_shape(inputs)
        captured = self.graphs.get(key)
        if captured is None:
            if key not in self.warm:
                self.warm.add(key)
                return self._eager(inputs, normalizer)
            captured = self.graphs[key] = self._capture(inputs, normalizer)
        else:
            captured.refill(inputs)
        captured.graph.replay()
        return captured.result, captured.norm

    def _eager(self, inputs: Batch, normalizer: float) -> tuple[StepResult, torch.Tensor | None]:
        """A shape's first step, eagerly on a side stream (the warm-up a capture needs)."""
        stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            out = self.run(inputs, normalizer)
        torch.cuda.current_stream().wait_stream(stream)
        return out

    def _capture(self, inputs: Batch, normalizer: float) -> Captured:
        """A shape's second step, captured (not yet run): ``inputs`` become the graph's inputs."""
        graph = torch.cuda.CUDAGraph()
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        with torch.cuda.graph(graph, pool=self.pool):
            result, norm = self.run(inputs, normalizer)
        return Captured(graph=graph, inputs=inputs, result=result, norm=norm)
