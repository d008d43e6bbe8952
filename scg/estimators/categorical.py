"""Helpers for estimators that pick categories of a Categorical or OneHotCategorical node."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.distributions import Categorical, Distribution, OneHotCategorical

from scg.errors import SCGError
from scg.estimators.base import Estimator

__all__ = ["categorical_probs", "category_indices", "category_values", "finite_logits"]


def categorical_probs(estimator: Estimator, dist: Distribution) -> tuple[torch.Tensor, bool]:
    """(probabilities ``(*batch, K)``, whether the values are one-hot) of a categorical node."""
    if isinstance(dist, OneHotCategorical):
        return dist.probs.expand(dist.batch_shape + dist.event_shape), True
    if isinstance(dist, Categorical):
        return dist.probs.expand(dist.batch_shape + dist.probs.shape[-1:]), False
    raise SCGError(
        f"{type(estimator).__name__}() supports Categorical and OneHotCategorical nodes, not {type(dist).__name__}"
    )


def category_values(idx: torch.Tensor, onehot: bool, k: int, like: torch.Tensor) -> torch.Tensor:
    """The node's values for category indices ``idx`` (one-hot vectors, or the indices as the
    dtype ``Categorical.sample`` gives)."""
    return F.one_hot(idx, k).to(like.dtype) if onehot else idx


def category_indices(value: torch.Tensor, onehot: bool) -> torch.Tensor:
    """The category indices of the node's values."""
    return value.argmax(-1) if onehot else value.long()


def finite_logits(logits: torch.Tensor) -> torch.Tensor:
    """``logits`` with a category masked out by −inf (padding) at a finite floor, a quarter of the
    dtype's lowest value: its probability is still exactly 0 (``exp`` underflows), while an
    estimator's arithmetic on logits (differences, logs of sums) stays finite: −inf − (−inf) was NaN,
    in the loss and the gradient."""
    return logits.clamp(min=torch.finfo(logits.dtype).min / 4)
