"""The C2F attention's kernel ops as ``torch.library`` custom ops: one schema, a fake kernel,
autograd, and dispatch (beam search's op is :mod:`.topk_op`; the argument checks every op makes
before its kernel, :mod:`.op_guards`).

Ops (namespace ``scg``; shapes and math in :mod:`.reference`):

* ``scg_summarize::c2f_coarse_sample(keys, query, chunk_mask, seed, k, mode="multinomial", rows=None)``
  -> ``(log_alpha (R, M), idx (R, k) int64)``; differentiable in ``keys`` and ``query`` through
  ``log_alpha`` (the backward is a log-softmax backward in torch on every backend).
* ``scg_summarize::c2f_fine_attend(words, word_mask, query, idx, weights, rows=None)``
  -> ``(context (R, H), attn (R, k, N))``; differentiable in ``words``, ``query`` and ``weights``. Its
  backward runs ``scg_summarize::c2f_fine_backward`` (a Triton kernel or the reference), which yields the
  ``(R, k, N, H)`` gradients of the selected rows only; they are placed by ``index_put_`` into the
  buffer of the collecting node behind ``words`` (:mod:`.word_grads`), or into a gradient of
  ``words``' shape when there is none.
* ``scg_summarize::c2f_attend(keys, query_coarse, chunk_mask, words, word_mask, query_fine, seed, k, mode="multinomial",
  rows=None)`` -> ``(log_alpha, idx, weights, context, attn)``: the two ops above as one step, the weights
  chosen by :func:`.reference.choice_weights`; on Triton two launches (the chunks are chosen inside the
  fine read). Differentiable in ``keys`` and ``query_coarse`` through ``log_alpha`` and in ``words`` and
  ``query_fine`` through ``context`` and ``attn`` (the two ops' backward formulas; the half whose outputs
  the loss does not use is skipped); ``weights`` carry no gradient. For a model that must see the chunks
  before the read (an scg node between them), the two ops.

Each op's implementation asks :func:`.backend.choose` for a backend at call time, so CUDA tensors run
Triton and CPU tensors the reference unless ``SCG_KERNELS`` says otherwise; under ``torch.compile``
the ops are opaque nodes with the fake kernels giving the output shapes.
"""

from __future__ import annotations

from typing import Any, cast

import torch

import scg

from . import reference
from .backend import choose, triton_module
from .op_guards import check, check_coarse, check_fine, no_autocast, same_device
from .word_grads import collector_of, place_word_grad

__all__ = [
    "c2f_attend",
    "c2f_coarse_sample",
    "c2f_fine_attend",
    "c2f_fine_backward",
]


Pair = tuple[torch.Tensor, torch.Tensor]
Triple = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
Step = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


# ---------------------------------------------------------------------------------------------- coarse


@torch.library.custom_op("scg_summarize::c2f_coarse_sample", mutates_args=())
def c2f_coarse_sample(
    keys: torch.Tensor,
    query: torch.Tensor,
    chunk_mask: torch.Tensor,
    seed: torch.Tensor,
    k: int,
    mode: str = "multinomial",
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunk log-probabilities and ``k`` chosen chunks; see :func:`.reference.coarse_sample`."""
    check_coarse(keys, query, chunk_mask, k, mode, rows)
    same_device("c2f_coarse_sample", keys=keys, query=query, chunk_mask=chunk_mask, seed=seed, rows=rows)
    with no_autocast(query.device):
        if choose(query.device) == "triton":
            return cast(Pair, triton_module("coarse").coarse_sample(keys, query, chunk_mask, seed, k, mode, rows))
        return reference.coarse_sample(keys, query, chunk_mask, seed, k, mode, rows)


@c2f_coarse_sample.register_fake
def _(
    keys: torch.Tensor,
    query: torch.Tensor,
    chunk_mask: torch.Tensor,
    seed: torch.Tensor,
    k: int,
    mode: str = "multinomial",
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    n_rows = query.shape[0]
    log_alpha = query.new_empty((n_rows, keys.shape[1]), dtype=reference.acc_dtype(query.dtype))
    return log_alpha, query.new_empty((n_rows, k), dtype=torch.int64)


def _coarse_setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, torch.Tensor]) -> None:
    keys, query, _, _, _, _, rows = inputs
    ctx.save_for_backward(keys, query, output[0], rows)


def _coarse_backward(ctx: Any, grad_log_alpha: torch.Tensor, grad_idx: torch.Tensor | None) -> tuple[Any, ...]:
    keys, query, log_alpha, rows = ctx.saved_tensors
    d_keys, d_query = reference.coarse_backward(grad_log_alpha, log_alpha, keys, query, rows)
    return d_keys, d_query, None, None, None, None, None


c2f_coarse_sample.register_autograd(_coarse_backward, setup_context=_coarse_setup)


# ------------------------------------------------------------------------------------------------ fine


@torch.library.custom_op("scg_summarize::c2f_fine_attend", mutates_args=())
def c2f_fine_attend(
    words: torch.Tensor,
    word_mask: torch.Tensor,
    query: torch.Tensor,
    idx: torch.Tensor,
    weights: torch.Tensor,
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Context over the words of the selected chunks; see :func:`.reference.fine_attend`."""
    check_fine(words, word_mask, query, rows)
    check(
        idx.dim() == 2 and idx.shape[0] == query.shape[0] and tuple(weights.shape) == tuple(idx.shape),
        "idx and weights must have shape (R, k)",
    )
    check(not idx.is_floating_point() and idx.dtype != torch.bool, lambda: f"idx must be integer, got {idx.dtype}")
    same_device("c2f_fine_attend", words=words, word_mask=word_mask, query=query, idx=idx, weights=weights, rows=rows)
    with no_autocast(query.device):
        if choose(query.device) == "triton":
            return cast(Pair, triton_module("fine").fine_forward(words, word_mask, query, idx, weights, rows))
        return reference.fine_attend(words, word_mask, query, idx, weights, rows)


@c2f_fine_attend.register_fake
def _(
    words: torch.Tensor,
    word_mask: torch.Tensor,
    query: torch.Tensor,
    idx: torch.Tensor,
    weights: torch.Tensor,
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    n_rows, k = idx.shape
    attn = query.new_empty((n_rows, k, words.shape[2]), dtype=reference.acc_dtype(query.dtype))
    return torch.empty_like(query), attn


@torch.library.custom_op("scg_summarize::c2f_fine_backward", mutates_args=())
def c2f_fine_backward(
    grad_context: torch.Tensor,
    grad_attn: torch.Tensor | None,
    words: torch.Tensor,
    query: torch.Tensor,
    idx: torch.Tensor,
    weights: torch.Tensor,
    attn: torch.Tensor,
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(d_selected (R, k, N, H), d_query, d_weights)``; see :func:`.reference.fine_backward`."""
    args = (grad_context, grad_attn, words, query, idx, weights, attn, rows)
    with no_autocast(query.device):
        if choose(query.device) == "triton":
            return cast(Triple, triton_module("fine").fine_backward(*args))
        return reference.fine_backward(*args)


@c2f_fine_backward.register_fake
def _(
    grad_context: torch.Tensor,
    grad_attn: torch.Tensor | None,
    words: torch.Tensor,
    query: torch.Tensor,
    idx: torch.Tensor,
    weights: torch.Tensor,
    attn: torch.Tensor,
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n_rows, k = idx.shape
    d_sel = attn.new_empty((n_rows, k, words.shape[2], words.shape[3]))
    return d_sel, torch.empty_like(query), torch.empty_like(weights)


def _fine_setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, torch.Tensor]) -> None:
    words, _, query, idx, weights, rows = inputs
    ctx.collector = collector_of(words)
    ctx.save_for_backward(words, query, idx, weights, output[1], rows)


def _fine_grads(
    grad_context: torch.Tensor,
    grad_attn: torch.Tensor | None,
    words: torch.Tensor,
    query: torch.Tensor,
    idx: torch.Tensor,
    weights: torch.Tensor,
    attn: torch.Tensor,
    rows: torch.Tensor | None,
    collector: Any | None,
) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """``(d_words, d_query, d_weights)`` of the fine read: ``scg_summarize::c2f_fine_backward``, then the selected
    rows' gradients placed (`place_word_grad`: into the ``collector``'s buffer, ``d_words`` None)."""
    d_sel, d_query, d_weights = c2f_fine_backward(grad_context, grad_attn, words, query, idx, weights, attn, rows)
    return place_word_grad(d_sel, idx, rows, words, collector), d_query, d_weights


def _fine_backward(ctx: Any, grad_context: torch.Tensor, grad_attn: torch.Tensor | None) -> tuple[Any, ...]:
    words, query, idx, weights, attn, rows = ctx.saved_tensors
    d_words, d_query, d_weights = _fine_grads(
        grad_context, grad_attn, words, query, idx, weights, attn, rows, ctx.collector
    )
    return d_words, None, d_query, None, d_weights, None


c2f_fine_attend.register_autograd(_fine_backward, setup_context=_fine_setup)


# ------------------------------------------------------------------------------------------------ step


@torch.library.custom_op("scg_summarize::c2f_attend", mutates_args=())
def c2f_attend(
    keys: torch.Tensor,
    query_coarse: torch.Tensor,
    chunk_mask: torch.Tensor,
    words: torch.Tensor,
    word_mask: torch.Tensor,
    query_fine: torch.Tensor,
    seed: torch.Tensor,
    k: int,
    mode: str = "multinomial",
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The whole coarse-to-fine step; see :func:`.reference.c2f_attend`."""
    check_coarse(keys, query_coarse, chunk_mask, k, mode, rows)
    check_fine(words, word_mask, query_fine, rows)
    check(
        tuple(words.shape[:2]) == tuple(keys.shape[:2]),
        lambda: (
            f"keys (B, M, D) and words (B, M, N, H) must agree on (B, M), got {tuple(keys.shape)} and "
            f"{tuple(words.shape)}"
        ),
    )
    check(query_fine.shape[0] == query_coarse.shape[0], "query_coarse and query_fine must have the same rows R")
    same_device(
        "c2f_attend",
        keys=keys,
        query_coarse=query_coarse,
        chunk_mask=chunk_mask,
        words=words,
        word_mask=word_mask,
        query_fine=query_fine,
        seed=seed,
        rows=rows,
    )
    args = (keys, query_coarse, chunk_mask, words, word_mask, query_fine, seed, k, mode, rows)
    with no_autocast(query_fine.device):
        if choose(query_fine.device) == "triton":
            return cast(Step, triton_module("fine").c2f_forward(*args))
        return reference.c2f_attend(*args)


@c2f_attend.register_fake
def _(
    keys: torch.Tensor,
    query_coarse: torch.Tensor,
    chunk_mask: torch.Tensor,
    words: torch.Tensor,
    word_mask: torch.Tensor,
    query_fine: torch.Tensor,
    seed: torch.Tensor,
    k: int,
    mode: str = "multinomial",
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    n_rows = query_coarse.shape[0]
    log_alpha = query_coarse.new_empty((n_rows, keys.shape[1]), dtype=reference.acc_dtype(query_coarse.dtype))
    idx = query_coarse.new_empty((n_rows, k), dtype=torch.int64)
    weights = query_fine.new_empty((n_rows, k), dtype=reference.acc_dtype(query_coarse.dtype))
    attn = query_fine.new_empty((n_rows, k, words.shape[2]), dtype=reference.acc_dtype(query_fine.dtype))
    return log_alpha, idx, weights, torch.empty_like(query_fine), attn


def _step_setup(ctx: Any, inputs: tuple[Any, ...], output: Step) -> None:
    keys, query_coarse, _, words, _, query_fine, _, _, _, rows = inputs
    log_alpha, idx, weights, _, attn = output
    ctx.mark_non_differentiable(weights)
    ctx.set_materialize_grads(False)  # an unused output (log_alpha, attn) gets None: its backward is skipped
    ctx.collector = collector_of(words)
    ctx.save_for_backward(keys, query_coarse, log_alpha, words, query_fine, idx, weights, attn, rows)


def _step_backward(
    ctx: Any,
    grad_log_alpha: torch.Tensor | None,
    grad_idx: torch.Tensor | None,
    grad_weights: torch.Tensor | None,
    grad_context: torch.Tensor | None,
    grad_attn: torch.Tensor | None,
) -> tuple[Any, ...]:
    keys, query_coarse, log_alpha, words, query_fine, idx, weights, attn, rows = ctx.saved_tensors
    d_keys = d_query_coarse = d_words = d_query_fine = None
    if grad_log_alpha is not None:
        d_keys, d_query_coarse = reference.coarse_backward(grad_log_alpha, log_alpha, keys, query_coarse, rows)
    if grad_context is not None or grad_attn is not None:
        dc = grad_context if grad_context is not None else torch.zeros_like(query_fine)
        d_words, d_query_fine, _ = _fine_grads(
            dc, grad_attn, words, query_fine, idx, weights, attn, rows, ctx.collector
        )
    return d_keys, d_query_coarse, None, d_words, None, d_query_fine, None, None, None, None


c2f_attend.register_autograd(_step_backward, setup_context=_step_setup)


# scg treats operations it has no rule for as mixing the rows of a batch (whole-batch credit);
# these ops compute output row r from row r of their query / index arguments only.
scg.declare_rowwise(c2f_coarse_sample, args=(1,))
scg.declare_rowwise(c2f_fine_attend, args=(2, 3, 4))
scg.declare_rowwise(c2f_attend, args=(1, 5))
