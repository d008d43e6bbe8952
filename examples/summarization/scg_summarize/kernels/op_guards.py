"""What every kernel op does before its kernel runs: its arguments checked and autocast turned off.

The checks read the tensors' metadata only (shapes, dtypes, devices; never the values of ``idx`` or
``rows``, which would be a host read per step): a query row per example or a ``rows`` index
(`check_rows`), the coarse and the fine read's arguments (`check_coarse`, `check_fine`), every
tensor on one device (`same_device`). A message that formats shapes is built only on failure
(`check`): these checks run at every decoder step. `no_autocast` keeps an enclosing
``torch.autocast`` out of an op, whose dtypes are its own (the fake kernels').
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from . import reference

__all__ = ["check", "check_coarse", "check_fine", "check_rows", "no_autocast", "same_device"]


def check(cond: bool, msg: str | Callable[[], str]) -> None:
    """Raise ``ValueError(msg)`` unless ``cond``; a message that formats shapes is a function, called
    only on failure (these checks run at every decoder step)."""
    if not cond:
        raise ValueError(msg if isinstance(msg, str) else msg())


def same_device(op: str, **tensors: torch.Tensor | None) -> None:
    """All tensor arguments of ``op`` on one device (named in the error), before any kernel sees them."""
    given = {name: t.device for name, t in tensors.items() if t is not None}
    if len(set(given.values())) > 1:
        where = ", ".join(f"{name} on {device}" for name, device in given.items())
        raise ValueError(f"{op}: all tensor arguments must be on one device, got {where}")


def no_autocast(device: torch.device) -> AbstractContextManager[Any]:
    """Autocast off inside an op: the ops choose their own accumulation dtype
    (:func:`.reference.acc_dtype`) and output dtypes (those of the fake kernels), so an enclosing
    ``torch.autocast`` must not recast their internal products (a bfloat16 einsum would then meet
    a float32 fill value, and the outputs would disagree with the fake kernels)."""
    if torch.is_autocast_enabled(device.type):
        return torch.autocast(device_type=device.type, enabled=False)
    return nullcontext()


def check_rows(batch: int, query: torch.Tensor, rows: torch.Tensor | None) -> None:
    """Query row r reads example ``rows[r]`` (beam search), or example r when ``rows`` is None:
    then there are as many query rows as examples. (The kernels index memory with them: a
    mismatch read beyond the tensors, where the reference raised. The values of ``rows`` are
    not read here: that is a host read per step.)"""
    if rows is None:
        check(
            query.shape[0] == batch,
            lambda: f"query has {query.shape[0]} rows for {batch} examples: pass rows= (the example of each row)",
        )
        return
    check(
        rows.dim() == 1 and rows.shape[0] == query.shape[0] and rows.dtype in (torch.int32, torch.int64),
        lambda: (
            f"rows must be an int32/int64 tensor of shape ({query.shape[0]},), got {rows.dtype} {tuple(rows.shape)}"
        ),
    )


def check_coarse(
    keys: torch.Tensor,
    query: torch.Tensor,
    chunk_mask: torch.Tensor,
    k: int,
    mode: str,
    rows: torch.Tensor | None = None,
) -> None:
    check(
        keys.dim() == 3 and query.dim() == 2 and keys.shape[2] == query.shape[1],
        lambda: f"keys (B, M, D) and query (R, D) expected, got {tuple(keys.shape)} and {tuple(query.shape)}",
    )
    check(tuple(chunk_mask.shape) == tuple(keys.shape[:2]), "chunk_mask must have shape (B, M)")
    check(chunk_mask.dtype == torch.bool, lambda: f"chunk_mask must be bool, got {chunk_mask.dtype}")
    check_rows(keys.shape[0], query, rows)
    check(mode in reference.COARSE_MODES, lambda: f"mode={mode!r}: expected one of {reference.COARSE_MODES}")
    check(
        k >= 1 and (mode == "multinomial" or k <= keys.shape[1]),
        lambda: f"k={k}: need 1 <= k (<= M unless multinomial)",
    )


def check_fine(
    words: torch.Tensor, word_mask: torch.Tensor, query: torch.Tensor, rows: torch.Tensor | None = None
) -> None:
    check(
        words.dim() == 4 and query.dim() == 2 and words.shape[3] == query.shape[1],
        lambda: f"words (B, M, N, H) and query (R, H) expected, got {tuple(words.shape)} and {tuple(query.shape)}",
    )
    check(tuple(word_mask.shape) == tuple(words.shape[:3]), "word_mask must have shape (B, M, N)")
    check(word_mask.dtype == torch.bool, lambda: f"word_mask must be bool, got {word_mask.dtype}")
    check_rows(words.shape[0], query, rows)
