"""Pure-PyTorch reference of the three per-step kernels: the CPU path and the tests' oracle.

Shapes (``R`` query rows, ``B`` encoder rows; ``R == B`` in training, ``R = B * beam`` in beam search
where ``rows[r]`` names the encoder row of query row ``r``; ``rows=None`` means ``rows = arange(R)``):

* coarse: ``keys (B, M, D)``, ``chunk_mask (B, M)`` bool, ``query (R, D)`` -> ``log_alpha (R, M)``,
  the masked log-softmax of the chunk scores ``s_i = K_i . q`` (``-inf`` at padded chunks), and
  ``idx (R, k)`` chosen by ``mode``, with Philox Gumbel noise (:mod:`.philox`) whose ``g[r, d, m]`` has
  counter ``(r * k + d) * M + m``:

  - ``"multinomial"``: draw ``d`` is ``argmax_m s_m + g[r, d, m]``: ``k`` i.i.d. draws from the softmax
    (``mu ~ Multinomial(k, alpha)``);
  - ``"distinct"``: the ``k`` largest ``s_m + g[r, 0, m]``, best first (Gumbel-top-k: ``k`` distinct
    chunks, sequentially without replacement, i.e. Plackett-Luce);
  - ``"greedy"``: the ``k`` largest ``s_m`` (no noise; test time).

  Ties go to the smaller index.
* fine: ``words (B, M, N, H)``, ``word_mask (B, M, N)``, ``query (R, H)``, ``idx (R, k)``,
  ``weights (R, k)`` -> ``attn (R, k, N)``, the softmax of ``h_{idx_d, j} . q`` over the real words of each
  selected chunk (all zero for a chunk without real words), and ``context (R, H) = sum_d weights_d
  sum_j attn_dj h_{idx_d, j}``. With ``weights = 1/k`` this is the paper's ``sum_i (mu_i / k) sum_j
  alpha^w_ij h_ij``.
* step: :func:`c2f_attend` is coarse then fine in one call, with :func:`choice_weights` between them.
* beam: ``hidden (R, H)``, ``weight (V, H)``, ``bias (V,)`` -> the ``k`` largest entries of
  ``log_softmax(hidden @ weight.T + bias)`` per row and their vocabulary indices.

Everything is computed in float64 for float64 inputs and in float32 otherwise (here; the Triton
kernels compute float64 inputs in float32, ``docs/kernels.md``).
"""

from __future__ import annotations

import torch

from .philox import gumbel

__all__ = [
    "COARSE_MODES",
    "acc_dtype",
    "c2f_attend",
    "choice_weights",
    "coarse_backward",
    "coarse_sample",
    "fine_attend",
    "fine_backward",
    "gumbel_offsets",
    "logsoftmax_topk",
    "logsoftmax_topk_backward",
    "scatter_word_grad",
    "scatter_word_grad_into",
]


#: How ``coarse_sample`` chooses its ``k`` chunks (see the module docstring).
COARSE_MODES: tuple[str, ...] = ("multinomial", "distinct", "greedy")


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """The accumulation dtype: float64 for float64 inputs, float32 for everything else."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _rows(rows: torch.Tensor | None, n: int, device: torch.device) -> torch.Tensor:
    return torch.arange(n, device=device) if rows is None else rows.to(torch.int64)


def gumbel_offsets(n_rows: int, k: int, m: int, device: torch.device) -> torch.Tensor:
    """Philox counters ``(r * k + d) * M + m`` of the coarse noise, shape ``(R, k, M)``."""
    return torch.arange(n_rows * k * m, device=device, dtype=torch.int64).view(n_rows, k, m)


# ---------------------------------------------------------------------------------------------- coarse


def _by_row(t: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    """``t[rows]`` (a copy), or ``t`` itself when ``rows`` is None (the identity map)."""
    return t if rows is None else t[rows.to(torch.int64)]


def _coarse_scores(
    keys: torch.Tensor, query: torch.Tensor, chunk_mask: torch.Tensor, rows: torch.Tensor | None
) -> torch.Tensor:
    dt = acc_dtype(query.dtype)
    scores = torch.bmm(_by_row(keys, rows).to(dt), query.to(dt).unsqueeze(2)).squeeze(2)
    return scores.masked_fill(~_by_row(chunk_mask, rows), float("-inf"))


def coarse_sample(
    keys: torch.Tensor,
    query: torch.Tensor,
    chunk_mask: torch.Tensor,
    seed: torch.Tensor,
    k: int,
    mode: str,
    rows: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked log-softmax over chunks and ``k`` choices: ``(log_alpha (R, M), idx (R, k) int64)``."""
    scores = _coarse_scores(keys, query, chunk_mask, rows)
    log_alpha = torch.log_softmax(scores, dim=-1)
    n_rows, m = scores.shape
    if mode == "greedy":
        perturbed = scores
    else:
        noise = gumbel(seed, gumbel_offsets(n_rows, k, m, scores.device), dtype=scores.dtype)
        if mode == "multinomial":
            return log_alpha, torch.argmax(scores.unsqueeze(1) + noise, dim=-1)  # first maximum on ties
        perturbed = scores + noise[:, 0]
    return log_alpha, torch.sort(perturbed, dim=-1, descending=True, stable=True).indices[:, :k].contiguous()


def coarse_backward(
    grad_log_alpha: torch.Tensor,
    log_alpha: torch.Tensor,
    keys: torch.Tensor,
    query: torch.Tensor,
    rows: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of ``log_alpha`` to ``(keys, query)`` (log-softmax backward, then the bilinear score)."""
    dt = log_alpha.dtype
    alpha = log_alpha.exp()  # 0 at masked chunks (log_alpha = -inf)
    valid = torch.isfinite(log_alpha)
    g = grad_log_alpha.to(dt).masked_fill(~valid, 0.0)
    ds = g - alpha * g.sum(-1, keepdim=True)
    d_query = torch.bmm(ds.unsqueeze(1), _by_row(keys, rows).to(dt)).squeeze(1)
    per_row = ds.unsqueeze(-1) * query.to(dt).unsqueeze(1)  # (R, M, D)
    if rows is None:
        d_keys = per_row
    else:
        d_keys = torch.zeros(keys.shape, dtype=dt, device=keys.device).index_add_(0, rows.to(torch.int64), per_row)
    return d_keys.to(keys.dtype), d_query.to(query.dtype)


# ------------------------------------------------------------------------------------------------ fine


def _selected(
    words: torch.Tensor, word_mask: torch.Tensor, idx: torch.Tensor, rows: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    r = _rows(rows, idx.shape[0], idx.device).unsqueeze(1)
    return words[r, idx], word_mask[r, idx]  # (R, k, N, H), (R, k, N)


def fine_attend(
    words: torch.Tensor,
    word_mask: torch.Tensor,
    query: torch.Tensor,
    idx: torch.Tensor,
    weights: torch.Tensor,
    rows: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-chunk word softmax and the weighted context: ``(context (R, H), attn (R, k, N))``."""
    dt = acc_dtype(query.dtype)
    sel, sel_mask = _selected(words, word_mask, idx, rows)
    sel = sel.to(dt)
    scores = torch.einsum("rknh,rh->rkn", sel, query.to(dt))  # (R, k, N)
    # The model's masked softmax and summation order (models.attention.c2f_read), so that float32 results
    # agree with it bit for bit: padded words at the dtype's minimum, then zeroed (a chunk without real
    # words gets all zeros).
    attn = torch.softmax(scores.masked_fill(~sel_mask, torch.finfo(dt).min), dim=-1) * sel_mask.to(dt)
    alpha = weights.to(dt).unsqueeze(-1) * attn  # (R, k, N)
    context = torch.einsum("rkn,rknh->rh", alpha, sel)
    return context.to(query.dtype), attn


def fine_backward(
    grad_context: torch.Tensor,
    grad_attn: torch.Tensor | None,
    words: torch.Tensor,
    query: torch.Tensor,
    idx: torch.Tensor,
    weights: torch.Tensor,
    attn: torch.Tensor,
    rows: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of :func:`fine_attend`: ``(d_selected (R, k, N, H), d_query (R, H), d_weights (R, k))``.

    ``d_selected[r, d, j]`` is the gradient to ``words[rows[r], idx[r, d], j]``; repeated draws and
    beams that share an encoder row add up in :func:`scatter_word_grad`. With ``u_dj = dc . h_dj``,
    ``dp_dj = w_d u_dj + grad_attn_dj`` and ``ds_dj = p_dj (dp_dj - sum_j' p_dj' dp_dj')``:
    ``d_h_dj = w_d p_dj dc + ds_dj q``, ``dq = sum_dj ds_dj h_dj``, ``dw_d = sum_j p_dj u_dj``.
    """
    dt = attn.dtype
    r = _rows(rows, idx.shape[0], idx.device).unsqueeze(1)
    sel = words[r, idx].to(dt)
    dc, q, w = grad_context.to(dt), query.to(dt), weights.to(dt)
    u = torch.einsum("rknh,rh->rkn", sel, dc)
    dp = w.unsqueeze(-1) * u
    if grad_attn is not None:
        dp = dp + grad_attn.to(dt)
    ds = attn * (dp - (attn * dp).sum(-1, keepdim=True))
    d_query = torch.einsum("rkn,rknh->rh", ds, sel)
    d_sel = (w.unsqueeze(-1) * attn).unsqueeze(-1) * dc[:, None, None, :] + ds.unsqueeze(-1) * q[:, None, None, :]
    d_weights = (attn * u).sum(-1)
    return d_sel, d_query.to(query.dtype), d_weights.to(weights.dtype)


def scatter_word_grad(
    d_selected: torch.Tensor, idx: torch.Tensor, rows: torch.Tensor | None, words: torch.Tensor
) -> torch.Tensor:
    """Place the per-draw gradients at ``words[rows[r], idx[r, d]]``, summing repeats.

    A zero tensor of ``words``' shape filled with ``index_put_(accumulate=True)`` (torch's CUDA kernel
    sorts the ``(row, chunk)`` keys and sums each group: the MoE-style grouping).
    """
    return scatter_word_grad_into(torch.zeros_like(words), d_selected, idx, rows)


def scatter_word_grad_into(
    out: torch.Tensor, d_selected: torch.Tensor, idx: torch.Tensor, rows: torch.Tensor | None
) -> torch.Tensor:
    """:func:`scatter_word_grad` added into ``out`` (of ``words``' shape) in place; returns ``out``.

    A row's repeated draws of one chunk are summed first, in draw order (`_combine_repeats`), so
    that ``out`` receives one sum per chunk read: added into zeros and then to a running gradient,
    or into the running gradient directly (`word_grads`), the result is the same to the bit."""
    n_rows, k = idx.shape
    r = _rows(rows, n_rows, idx.device).unsqueeze(1).expand(n_rows, k).reshape(-1)
    c = idx.reshape(-1).to(torch.int64)
    values = _combine_repeats(d_selected.to(out.dtype), idx).reshape(n_rows * k, *out.shape[2:])
    return out.index_put_((r, c), values, accumulate=True)


def _combine_repeats(values: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``values`` ``(R, k, ...)`` of the draws ``idx`` ``(R, k)`` with each draw that repeats an
    earlier one of its row moved onto that earlier one's slot (added in draw order) and zeroed."""
    k = idx.shape[1]
    if k == 1:
        return values
    out = values.clone()
    row = torch.arange(idx.shape[0], device=idx.device)  # (R,)
    for j in range(1, k):
        first = (idx[:, : j + 1] == idx[:, j : j + 1]).to(torch.int8).argmax(1)  # (R,) the first draw of idx[:, j]
        repeat = (first != j).view(-1, *([1] * (values.dim() - 2)))  # (R, 1, ...)
        moved = torch.where(repeat, out[:, j], torch.zeros_like(out[:, j]))
        out[row, first] = out[row, first] + moved
        out[:, j] = torch.where(repeat, torch.zeros_like(out[:, j]), out[:, j])
    return out


def choice_weights(log_alpha: torch.Tensor, idx: torch.Tensor, mode: str, dtype: torch.dtype) -> torch.Tensor:
    """The weight of each choice in the context: ``1/k`` per draw (a chunk drawn twice weighs ``mu_i / k``),
    or in ``greedy`` mode ``alpha`` renormalised over the ``k`` chosen chunks. No gradient."""
    if mode == "greedy":
        return torch.softmax(log_alpha.detach().gather(1, idx), dim=1).to(dtype)
    return torch.full(idx.shape, 1.0 / idx.shape[1], dtype=dtype, device=idx.device)


def c2f_attend(
    keys: torch.Tensor,
    query_coarse: torch.Tensor,
    chunk_mask: torch.Tensor,
    words: torch.Tensor,
    word_mask: torch.Tensor,
    query_fine: torch.Tensor,
    seed: torch.Tensor,
    k: int,
    mode: str,
    rows: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The whole step: :func:`coarse_sample`, :func:`choice_weights` and :func:`fine_attend`:
    ``(log_alpha (R, M), idx (R, k), weights (R, k), context (R, H), attn (R, k, N))``; the weights in the
    accumulation dtype, so that the backward reads the weights the context was made with (a bfloat16 copy
    would put its rounding, times ``h . dc``, into the words' gradient)."""
    log_alpha, idx = coarse_sample(keys, query_coarse, chunk_mask, seed, k, mode, rows)
    weights = choice_weights(log_alpha, idx, mode, log_alpha.dtype)
    context, attn = fine_attend(words, word_mask, query_fine, idx, weights, rows)
    return log_alpha, idx, weights, context, attn


# ------------------------------------------------------------------------------------------------ beam


def _logits(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    dt = acc_dtype(hidden.dtype)
    return torch.nn.functional.linear(hidden.to(dt), weight.to(dt), None if bias is None else bias.to(dt))


def logsoftmax_topk(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best ``log_softmax(hidden @ weight.T + bias)`` entries per row, best first.

    Computed as ``nn.Linear`` + ``log_softmax`` + ``topk`` (the unfused model's ops), so that in
    float32 the values equal the full log-probabilities bit for bit and beam search ranks the same.
    """
    top = torch.topk(torch.log_softmax(_logits(hidden, weight, bias), dim=-1), k, dim=-1, sorted=True)
    return top.values, top.indices


def logsoftmax_topk_backward(
    grad_values: torch.Tensor,
    indices: torch.Tensor,
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Gradients of :func:`logsoftmax_topk`'s values to ``(hidden, weight, bias)`` (recomputes the logits)."""
    logits = _logits(hidden, weight, bias)
    g = grad_values.to(logits.dtype)
    d_logits = torch.zeros_like(logits).scatter_add_(1, indices, g)
    d_logits -= torch.softmax(logits, dim=-1) * g.sum(-1, keepdim=True)
    d_hidden = (d_logits @ weight.to(logits.dtype)).to(hidden.dtype)
    d_weight = (d_logits.T @ hidden.to(logits.dtype)).to(weight.dtype)
    d_bias = None if bias is None else d_logits.sum(0).to(bias.dtype)
    return d_hidden, d_weight, d_bias
