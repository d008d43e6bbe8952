"""``train.precision``: the training objective under ``torch.autocast``.

``"bf16"`` runs the objective (the forward pass and the loss: the model, its sampling and scg's
surrogate) under ``torch.autocast(device, torch.bfloat16)``; the backward pass, the gradients'
renormalization and the optimizer step run outside it, on the fp32 parameters, as autocast
intends. Matrix products and LSTMs then run in bf16 (on a GPU's tensor cores), reductions and
losses stay fp32 by autocast's rules, and validation runs in fp32,
so perplexities are comparable across precisions. bf16 needs no loss scaling (fp32's exponent
range). Inside a CUDA graph (``train.cuda_graph``) autocast's cache of cast weights is off: a
cache filled in one replay would not be refilled in the next.
"""

from __future__ import annotations

import torch

from ..data.batching import Batch
from .objective import Objective, StepResult

__all__ = ["autocast_objective"]


def autocast_objective(objective: Objective, device: torch.device, *, cache: bool = True) -> Objective:
    """``objective`` under bf16 autocast on ``device`` (``cache``: autocast's weight cache); refuses
    a CUDA device without bf16, naming the option."""
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError(
            f"train.precision = 'bf16': the CUDA device {torch.cuda.get_device_name(device)!r} does not "
            "support bf16; set train.precision = 'fp32'"
        )

    def run(batch: Batch, normalizer: float) -> StepResult:
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, cache_enabled=cache):
            return objective(batch, normalizer)

    return run
