"""The kernel ops as ``torch.library`` custom ops: one schema, a fake kernel, autograd, and dispatch.

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
* ``scg_summarize::logsoftmax_topk(hidden, weight, bias, k)`` -> ``(values (R, k), indices (R, k) int64)``;
  differentiable in ``hidden``, ``weight`` and ``bias`` (backward in torch; decoding does not need it).

Each op's implementation asks :func:`.backend.choose` for a backend at call time, so CUDA tensors run
Triton and CPU tensors the reference unless ``SCG_KERNELS`` says otherwise; under ``torch.compile``
the ops are opaque nodes with the fake kernels giving the output shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, cast

import torch

import scg

from . import reference
from .backend import choose, triton_module
from .word_grads import collector_of, place_word_grad

__all__ = [
    "c2f_attend",
    "c2f_coarse_sample",
    "c2f_fine_attend",
    "c2f_fine_backward",
    "logsoftmax_topk",
]


Pair = tuple[torch.Tensor, torch.Tensor]
Triple = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
Step = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _check(cond: bool, msg: str | Callable[[], str]) -> None:
    """Raise ``ValueError(msg)`` unless ``cond``; a message that formats shapes is a function, called
    only on failure (these checks run at every decoder step)."""
    if not cond:
        raise ValueError(msg if isinstance(msg, str) else msg())


def _same_device(op: str, **tensors: torch.Tensor | None) -> None:
    """All tensor arguments of ``op`` on one device (named in the error), before any kernel sees them."""
    given = {name: t.device for name, t in tensors.items() if t is not None}
    if len(set(given.values())) > 1:
        where = ", ".join(f"{name} on {device}" for name, device in given.items())
        raise ValueError(f"{op}: all tensor arguments must be on one device, got {where}")


def _no_autocast(device: torch.device) -> AbstractContextManager[Any]:
    """Autocast off inside an op: the ops choose their own accumulation dtype
    (:func:`.reference.acc_dtype`) and output dtypes (those of the fake kernels), so an enclosing
    ``torch.autocast`` must not recast their internal products (a bfloat16 einsum would then meet
    a float32 fill value, and the outputs would disagree with the fake kernels)."""
    if torch.is_autocast_enabled(device.type):
        return torch.autocast(device_type=device.type, enabled=False)
    return nullcontext()


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
    _check_coarse(keys, query, chunk_mask, k, mode, rows)
    _same_device("c2f_coarse_sample", keys=keys, query=query, chunk_mask=chunk_mask, seed=seed, rows=rows)
    with _no_autocast(query.device):
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


def _check_rows(batch: int, query: torch.Tensor, rows: torch.Tensor | None) -> None:
    """Query row r reads example ``rows[r]`` (beam search), or example r when ``rows`` is None:
    then there are as many query rows as examples. (The kernels index memory with them: a
    mismatch read beyond the tensors, where the reference raised. The values of ``rows`` are
    not read here: that is a host read per step.)"""
    if rows is None:
        _check(
            query.shape[0] == batch,
            lambda: f"query has {query.shape[0]} rows for {batch} examples: pass rows= (the example of each row)",
        )
        return
    _check(
        rows.dim() == 1 and rows.shape[0] == query.shape[0] and rows.dtype in (torch.int32, torch.int64),
        lambda: (
            f"rows must be an int32/int64 tensor of shape ({query.shape[0]},), got {rows.dtype} {tuple(rows.shape)}"
        ),
    )


def _check_coarse(
    keys: torch.Tensor,
    query: torch.Tensor,
    chunk_mask: torch.Tensor,
    k: int,
    mode: str,
    rows: torch.Tensor | None = None,
) -> None:
    _check(
        keys.dim() == 3 and query.dim() == 2 and keys.shape[2] == query.shape[1],
        lambda: f"keys (B, M, D) and query (R, D) expected, got {tuple(keys.shape)} and {tuple(query.shape)}",
    )
    _check(tuple(chunk_mask.shape) == tuple(keys.shape[:2]), "chunk_mask must have shape (B, M)")
    _check(chunk_mask.dtype == torch.bool, lambda: f"chunk_mask must be bool, got {chunk_mask.dtype}")
    _check_rows(keys.shape[0], query, rows)
    _check(mode in reference.COARSE_MODES, lambda: f"mode={mode!r}: expected one of {reference.COARSE_MODES}")
    _check(
        k >= 1 and (mode == "multinomial" or k <= keys.shape[1]),
        lambda: f"k={k}: need 1 <= k (<= M unless multinomial)",
    )


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
    _check_fine(words, word_mask, query, rows)
    _check(
        idx.dim() == 2 and idx.shape[0] == query.shape[0] and tuple(weights.shape) == tuple(idx.shape),
        "idx and weights must have shape (R, k)",
    )
    _check(not idx.is_floating_point() and idx.dtype != torch.bool, lambda: f"idx must be integer, got {idx.dtype}")
    _same_device("c2f_fine_attend", words=words, word_mask=word_mask, query=query, idx=idx, weights=weights, rows=rows)
    with _no_autocast(query.device):
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
    with _no_autocast(query.device):
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


def _check_fine(
    words: torch.Tensor, word_mask: torch.Tensor, query: torch.Tensor, rows: torch.Tensor | None = None
) -> None:
    _check(
        words.dim() == 4 and query.dim() == 2 and words.shape[3] == query.shape[1],
        lambda: f"words (B, M, N, H) and query (R, H) expected, got {tuple(words.shape)} and {tuple(query.shape)}",
    )
    _check(tuple(word_mask.shape) == tuple(words.shape[:3]), "word_mask must have shape (B, M, N)")
    _check(word_mask.dtype == torch.bool, lambda: f"word_mask must be bool, got {word_mask.dtype}")
    _check_rows(words.shape[0], query, rows)


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
    _check_coarse(keys, query_coarse, chunk_mask, k, mode, rows)
    _check_fine(words, word_mask, query_fine, rows)
    _check(
        tuple(words.shape[:2]) == tuple(keys.shape[:2]),
        lambda: (
            f"keys (B, M, D) and words (B, M, N, H) must agree on (B, M), got {tuple(keys.shape)} and "
            f"{tuple(words.shape)}"
        ),
    )
    _check(query_fine.shape[0] == query_coarse.shape[0], "query_coarse and query_fine must have the same rows R")
    _same_device(
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
    with _no_autocast(query_fine.device):
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


# ------------------------------------------------------------------------------------------------ beam


@torch.library.custom_op("scg_summarize::logsoftmax_topk", mutates_args=())
def logsoftmax_topk(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best log-probabilities of ``softmax(hidden @ weight.T + bias)`` per row and their indices."""
    _check(
        hidden.dim() == 2 and weight.dim() == 2 and hidden.shape[1] == weight.shape[1],
        lambda: f"hidden (R, H) and weight (V, H) expected, got {tuple(hidden.shape)} and {tuple(weight.shape)}",
    )
    _check(1 <= k <= weight.shape[0], lambda: f"k={k}: need 1 <= k <= V={weight.shape[0]}")
    _check(
        bias is None or tuple(bias.shape) == (weight.shape[0],),
        lambda: (
            f"bias must have shape (V,) = ({weight.shape[0]},), got {tuple(bias.shape) if bias is not None else None}"
        ),
    )
    _same_device("logsoftmax_topk", hidden=hidden, weight=weight, bias=bias)
    with _no_autocast(hidden.device):
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
# these ops compute output row r from row r of their query / index arguments only.
scg.declare_rowwise(c2f_coarse_sample, args=(1,))
scg.declare_rowwise(c2f_fine_attend, args=(2, 3, 4))
scg.declare_rowwise(c2f_attend, args=(1, 5))
scg.declare_rowwise(logsoftmax_topk, args=(0,))
