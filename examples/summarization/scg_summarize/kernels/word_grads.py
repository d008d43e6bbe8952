"""The gradient of the word states that C2F's fine reads select, collected in one buffer.

A C2F decoder step reads k chunks of the ``(B, M, N, H)`` word states, and its backward has
gradients for those ``(R, k, N, H)`` states only. Autograd's protocol has each step's op return a
gradient of the whole of ``words``, which the engine then sums: at every decoder step a zero tensor
of M·N·H per example is filled, and then added to the others. That is two passes over the whole
memory per decoder step, most of a training step at large M (on the CPU at M = 1000, 74% of
``small-C2F``'s forward and backward).

:func:`collect_word_grads` gives the model an alias of ``words`` whose autograd node owns one buffer.
The fine reads (``scg_summarize::c2f_fine_attend``, ``scg_summarize::c2f_attend``) find that node behind their ``words``
argument (:func:`collector_of`). Their backward places the selected rows' gradients into the buffer
with ``index_put_`` (accumulate), the same sums in the same order as before, and returns no gradient
for ``words`` (:func:`place_word_grad`). The node's backward runs after every read's, since they
consume its output. It returns the buffer, plus any dense gradient other consumers gave, and drops
it, so that a second backward pass over a retained graph starts from zero.

A read uses the buffer only when the engine will run the node in this pass
(``torch._C._will_engine_execute_node``). A ``torch.autograd.grad`` with respect to other tensors
therefore leaves it alone. In a differentiable backward (``create_graph=True``) the read falls back
to the whole-shape gradient, so that no in-place write is recorded. Under ``torch.compile`` the words
are not wrapped (the node's Python state is not traceable); the reads then return whole-shape
gradients, as before.
"""

from __future__ import annotations

from typing import Any

import torch

from . import reference

__all__ = ["collect_word_grads", "collector_of", "place_word_grad"]


class _CollectedWords(torch.autograd.Function):
    """An alias of the word states whose backward returns the gradients the fine reads placed in
    ``ctx.buffer`` (made by the first read's backward), plus the dense gradient of other consumers."""

    @staticmethod
    def forward(ctx: Any, words: torch.Tensor) -> torch.Tensor:
        ctx.buffer = None
        ctx.set_materialize_grads(False)  # (only the reads consumed it: no gradient to materialize)
        return words.view_as(words)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor | None) -> torch.Tensor | None:
        placed: torch.Tensor | None = ctx.buffer
        ctx.buffer = None
        if placed is None:
            return grad
        return placed if grad is None else grad + placed


def collect_word_grads(words: torch.Tensor) -> torch.Tensor:
    """``words`` ``(B, M, N, H)`` as the fine reads should see them: an alias that collects their
    gradients in one buffer, when a gradient will be taken (``words`` itself otherwise, and while
    ``torch.compile`` traces)."""
    if not (words.requires_grad and torch.is_grad_enabled()) or torch.compiler.is_compiling():
        return words
    out: torch.Tensor = _CollectedWords.apply(words)  # type: ignore[no-untyped-call]
    return out


def collector_of(words: torch.Tensor) -> Any | None:
    """The collecting node behind ``words`` (a read's setup keeps it), or None."""
    node = words.grad_fn
    return node if isinstance(node, _CollectedWords._backward_cls) else None  # type: ignore[attr-defined]


def place_word_grad(
    d_selected: torch.Tensor, idx: torch.Tensor, rows: torch.Tensor | None, words: torch.Tensor, collector: Any | None
) -> torch.Tensor | None:
    """A read's gradient of ``words``: its selected rows' gradients ``(R, k, N, H)`` placed in the
    collector's buffer (None returned), or, without a collector or in a differentiable backward, a
    tensor of ``words``' shape (`reference.scatter_word_grad`); None when this backward pass does
    not reach the words."""
    if collector is None or torch.is_grad_enabled():
        return reference.scatter_word_grad(d_selected, idx, rows, words)
    if not torch._C._will_engine_execute_node(collector):
        return None
    if collector.buffer is None:
        collector.buffer = torch.zeros_like(words)
    reference.scatter_word_grad_into(collector.buffer, d_selected, idx, rows)
    return None
