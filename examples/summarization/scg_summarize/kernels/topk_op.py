"""Beam search's kernel op as a ``torch.library`` custom op: one schema, a fake kernel, autograd and
dispatch (as the C2F ops of `.ops`).

* ``scg_summarize::logsoftmax_topk(hidden, weight, bias, k)`` -> ``(values (R, k), indices (R, k) int64)``;
  differentiable in ``hidden``, ``weight`` and ``bias`` (backward in torch; decoding does not need it).

The op asks :func:`.backend.choose` for a backend at call time: Triton (``triton_topk``) on CUDA
tensors, the reference (:func:`.reference.logsoftmax_topk`) on CPU tensors unless ``SCG_KERNELS``
says otherwise.
"""

from __future__ import annotations

from typing import Any, cast

import torch

import scg

from . import reference
from .backend import choose, triton_module
from .op_guards import check, no_autocast, same_device

__all__ = ["logsoftmax_topk"]

Pair = tuple[torch.Tensor, torch.Tensor]


@torch.library.custom_op("scg_summarize::logsoftmax_topk", mutates_args=())
def logsoftmax_topk(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best log-probabilities of ``softmax(hidden @ weight.T + bias)`` per row and their indices."""
    check(
        hidden.dim() == 2 and weight.dim() == 2 and hidden.shape[1] == weight.shape[1],
        lambda: f"hidden (R, H) and weight (V, H) expected, got {tuple(hidden.shape)} and {tuple(weight.shape)}",
    )
    check(1 <= k <= weight.shape[0], lambda: f"k={k}: need 1 <= k <= V={weight.shape[0]}")
    check(
        bias is None or tuple(bias.shape) == (weight.shape[0],),
        lambda: (
            f"bias must have shape (V,) = ({weight.shape[0]},), got {tuple(bias.shape) if bias is not None else None}"
        ),
    )
    same_device("logsoftmax_topk", hidden=hidden, weight=weight, bias=bias)
    with no_autocast(hidden.device):
        if choose(hidden.device) == "triton":
            return cast(Pair, triton_module("topk").logsoftmax_topk(hidden, weight, bias, k))
        return reference.logsoftmax_topk(hidden, weight, bias, k)


@logsoftmax_topk.register_fake
def _(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    n_rows = hidden.shape[0]
    values = hidden.new_empty((n_rows, k), dtype=reference.acc_dtype(hidden.dtype))
    return values, hidden.new_empty((n_rows, k), dtype=torch.int64)


def _topk_setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, torch.Tensor]) -> None:
    hidden, weight, bias, _ = inputs
    ctx.save_for_backward(hidden, weight, bias, output[1])


def _topk_backward(ctx: Any, grad_values: torch.Tensor, grad_indices: torch.Tensor | None) -> tuple[Any, ...]:
    hidden, weight, bias, indices = ctx.saved_tensors
    d_hidden, d_weight, d_bias = reference.logsoftmax_topk_backward(grad_values, indices, hidden, weight, bias)
    return d_hidden, d_weight, d_bias, None


logsoftmax_topk.register_autograd(_topk_backward, setup_context=_topk_setup)


# scg treats operations it has no rule for as mixing the rows of a batch (whole-batch credit);
# this op computes output row r from row r of ``hidden`` only.
scg.declare_rowwise(logsoftmax_topk, args=(0,))
