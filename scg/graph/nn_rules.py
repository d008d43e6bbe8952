"""The position rules of ``torch.nn.functional``: embeddings, losses, convolutions, normalization.

Rules as in `scg.graph.position_rules` (``p``: the output's positions ``0 .. p-1`` are the input's):
an operation that computes each example of a batch from that example alone keeps its rows (a
row-wise loss with ``reduction="none"``, a recurrent cell, a convolution of a batched input); its
weights, and any reduced loss, keep none.
"""

from __future__ import annotations

from typing import Any

import torch

from scg.graph.position_rules import INF, Rule

__all__ = ["RULES"]

Tensor = torch.Tensor


def _embedding(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """The indices keep their positions (out = indices.shape + (H,)), the table mixes: told apart by
    dtype, since ``F.embedding(input, weight)`` and ``torch.embedding(weight, indices)`` take them in
    opposite orders. A table that is not floating (``F.embedding(idx, z.long())``) cannot be told
    from the indices: neither keeps its positions then."""
    if t.is_floating_point():
        return 0
    pair = [a for a in args[:2] if isinstance(a, Tensor)]
    return INF if len(pair) == 2 and any(a.is_floating_point() for a in pair) else 0


def _one_hot(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    classes = kwargs.get("num_classes", args[1] if len(args) > 1 else -1)
    return INF if isinstance(classes, int) and classes > 0 else 0  # (else its width is the batch's max + 1)


def _layer_norm(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    shape = kwargs.get("normalized_shape", args[1] if len(args) > 1 else None)
    if pos != 0 or shape is None:
        return 0
    k = len(shape) if isinstance(shape, (list, tuple, torch.Size)) else 1
    return t.dim() - k


#: row-wise losses: the arguments whose rows are examples (the others, e.g. class weights, mix)
_LOSS_ROWS = {
    "cross_entropy": (0, 1),
    "nll_loss": (0, 1),
    "multi_margin_loss": (0, 1),
    "multilabel_margin_loss": (0, 1),
    "multilabel_soft_margin_loss": (0, 1),
    "cosine_embedding_loss": (0, 1, 2),
    "triplet_margin_loss": (0, 1, 2),
    "triplet_margin_with_distance_loss": (0, 1, 2),
}


def _loss(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """Row-wise losses with ``reduction="none"``: ``cross_entropy(x (B, C, ...), y (B, ...))`` is
    ``(B, ...)``, row ``i`` computed from ``x[i]`` and ``y[i]`` alone. The input keeps its first
    position (its class dimension, at 1, is mixed); a target of the output's rank keeps all.
    Reduced (``"mean"``, ``"sum"``): no position (the 0-dimensional result mixes every row)."""
    if kwargs.get("reduction", "mean") != "none" and kwargs.get("reduce") is not False:
        return 0
    if kwargs.get("distance_function") is not None:  # (the user's function runs unseen by the tracker)
        return 0
    if pos not in _LOSS_ROWS.get(name, ()) or out.dim() == 0 or t.dim() == 0:
        return 0
    if t.dim() == out.dim() and t.shape == out.shape:
        return INF  # the target (class indices), or a per-row label
    return 1 if t.shape[0] == out.shape[0] else 0


def _row_reduce(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """``cosine_similarity(x1, x2, dim)``, ``pairwise_distance(x1, x2)``: one dimension
    (``dim``; the last for ``pairwise_distance``) reduced, the ones before it kept."""
    if pos not in (0, 1) or t.dim() != max(args[0].dim(), args[1].dim()):
        return 0
    if name == "pairwise_distance":
        return t.dim() - 1
    d = kwargs.get("dim", kwargs.get("axis", args[2] if len(args) > 2 else 1))
    return int(d) % max(t.dim(), 1) if isinstance(d, int) else 0


def _rows(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """Recurrent cells (input (B, I), state (B, H) -> (B, H)): rows kept, features mixed."""
    return 1 if pos in (0, 1) and t.dim() >= 1 else 0


#: ops that compute each example of a batched input ``(N, C, *spatial)`` alone, with their number
#: of spatial dimensions (None: any)
_PER_EXAMPLE: dict[str, int | None] = {
    **{f"{kind}{n}d": n for kind in ("conv", "conv_transpose", "max_pool", "avg_pool") for n in (1, 2, 3)},
    **{f"adaptive_{kind}_pool{n}d": n for kind in ("avg", "max") for n in (1, 2, 3)},
    "group_norm": None,
    "instance_norm": None,
}


def _per_example(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """Convolutions, pooling, group and instance normalization of a batched input: example ``i``
    of the output from example ``i`` of the input alone (its channels and positions mixed). An
    unbatched input ``(C, *spatial)``, and the weights, keep no position."""
    spatial = _PER_EXAMPLE[name]
    if pos != 0 or (spatial is not None and t.dim() != spatial + 2) or out.dim() == 0:
        return 0
    return 1 if out.shape[0] == t.shape[0] else 0


def _pad(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], t: Tensor, out: Tensor, pos: int) -> int:
    """``F.pad(x, pad)`` pads the last ``len(pad) // 2`` dimensions: the ones before stay."""
    widths = kwargs.get("pad", args[1] if len(args) > 1 else None)
    if pos != 0 or not isinstance(widths, (list, tuple)):
        return 0
    return max(t.dim() - len(widths) // 2, 0)


#: rule -> the operations it covers, by the name torch reports
RULES: tuple[tuple[Rule, str], ...] = (
    (_embedding, "embedding"),
    (_one_hot, "one_hot"),
    (_layer_norm, "layer_norm"),
    (_loss, " ".join(_LOSS_ROWS)),
    (_row_reduce, "cosine_similarity pairwise_distance"),
    (_rows, "lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell"),
    (_per_example, " ".join(_PER_EXAMPLE)),
    (_pad, "pad"),
)
