"""``train.compile``: the training objective compiled whole with ``torch.compile``.

The objective (the C2F surrogate through scg's declared graph, or the NLL of soft attention) is
traced with ``fullgraph=True``: one graph per step for the forward pass and, through AOTAutograd,
one for its backward, so a step runs a few fused kernels instead of one Python-dispatched operation
at a time. scg's ``Declared`` surrogate is built inside the trace (`scg.credit.traced`), the EMA
baseline's averages are an input of the graph and a new table its output (`scg.baselines.EMA`),
and the word encoders run over the whole width (the batch's `SourceLengths` are not passed:
dynamo would compile once per distinct bound, a minute each on a CPU; a captured step,
``train.cuda_graph``, takes them rounded). The compiled
objective gives the eager one's loss, gradients and EMA state bit for bit with ``backend="eager"``
and the same draws (``tests/summarization/train/test_compiled.py``); inductor draws its own random
numbers.

What it costs: a compilation per target length (the decoder loop is unrolled), a minute or more on
a CPU for a small model, so ``data.pad_targets`` pads every training batch's targets to a multiple
of a few positions; dynamo traces ``nn.LSTM`` only with ``torch._dynamo.config.allow_rnn`` (set for
the objective's calls only). What it needs (refused when the configuration is read, or when the
trainer is built): the ``mle`` or ``c2f_reinforce`` objective (the others read values to the host:
ROUGE rewards, MAL's statistics), no +ALTERNATE (a host-side coin per step) and one process (no DDP).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..data.batching import Batch
from .objective import Objective, StepResult

__all__ = ["check_whole_step", "compiled_objective"]

#: how many target lengths (graphs) one run may compile before dynamo runs new ones eagerly
RECOMPILE_LIMIT = 64

Tensors = tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor], bool]


def compiled_objective(objective: Objective, backend: str) -> Objective:
    """``objective`` compiled with ``torch.compile(fullgraph=True, dynamic=False)``: called with
    the batch's tensors only (its text and ids would be guarded, a new graph per batch), returning
    the step's tensors; the `StepResult` it gives has no ``output`` or ``graph`` (made inside the
    trace)."""

    def tensors(
        src: torch.Tensor,
        src_mask: torch.Tensor,
        tgt: torch.Tensor,
        tgt_mask: torch.Tensor,
        salient: torch.Tensor | None,
        index: torch.Tensor | None,
        normalizer: float,
    ) -> Tensors:
        batch = Batch(src=src, src_mask=src_mask, tgt=tgt, tgt_mask=tgt_mask, salient=salient, index=index)
        result = objective(batch, normalizer)
        return result.loss, result.nll, result.tokens, result.terms, result.soft

    step: Callable[..., Tensors] = torch.compile(tensors, fullgraph=True, dynamic=False, backend=backend)

    def run(batch: Batch, normalizer: float) -> StepResult:
        with torch._dynamo.config.patch(allow_rnn=True, recompile_limit=RECOMPILE_LIMIT):
            loss, nll, tokens, terms, soft = step(
                batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, batch.salient, batch.index, normalizer
            )
        return StepResult(loss, nll, tokens, None, None, soft, terms)

    return run


def check_whole_step(trainer: Any, option: str) -> None:
    """Refuse, naming ``option`` (``train.compile``, ``train.cuda_graph``), what a step traced or
    captured whole cannot run: the model's own objective, a family whose step reads from the device
    (`SummarizerFamily.untraceable`), several processes."""
    own = trainer.model.default_objective
    off = "''" if option == "train.compile" else "false"
    if trainer.config.train.objective == "auto" and own is not None:
        raise ValueError(
            f"{option}: the {trainer.config.model.family!r} family trains with its own objective {own!r}, "
            f"which reads values to the host and cannot run as one traced or captured step; set {option} = {off}"
        )
    reason = trainer.model.untraceable
    if reason is not None:
        raise ValueError(
            f"{option}: the {trainer.config.model.family!r} family's step cannot be traced or captured whole: "
            f"{reason}; set {option} = {off}"
        )
    if trainer.dist.enabled:
        raise ValueError(f"{option}: not with several processes (DDP); set {option} = {off}")
