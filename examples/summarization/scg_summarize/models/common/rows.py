"""Row-wise containers: decoder states and memories that search reorders without knowing them.

Beam search and free-running decoding see a model's recurrent state and its per-document memory
as opaque values with one *row* per hypothesis (or per example). They only ever ask for rows:
row i of the result is row ``index[i]`` of the input (:func:`select_rows`), or every row repeated
``times`` times consecutively (:func:`repeat_rows`). Both walk the value's structure, so any
family can extend its state with new fields and they follow the beams:

=========================  ==================================================================
value                      rows
=========================  ==================================================================
``torch.Tensor``           ``x.index_select(0, index)`` (the first dimension is the row)
``list`` / ``tuple``       each element (a list of per-layer ``(B, H)`` tensors, say)
``dict``                   each value (``Memory.extra``, ``DecoderState.extra``)
a dataclass instance       each field, rebuilt as the *same* class (subclass fields kept)
``None``, numbers, str     unchanged (step counters, flags)
=========================  ==================================================================

A field that must *not* be reordered (a vocabulary-sized table shared by all rows, say) does
not belong in a row container; keep it on the module. A dataclass can name fields to leave
alone in a class attribute ``_shared_fields`` (a tuple of names).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import torch

__all__ = ["repeat_rows", "select_rows"]

T = TypeVar("T")


def _map_rows(value: Any, fn: Any, path: str) -> Any:
    if isinstance(value, torch.Tensor):
        if value.dim() == 0:
            raise ValueError(f"{path}: a 0-d tensor has no rows; keep scalars as Python numbers")
        return fn(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_map_rows(v, fn, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return tuple(_map_rows(v, fn, f"{path}[{i}]") for i, v in enumerate(value))
    if isinstance(value, dict):
        return {k: _map_rows(v, fn, f"{path}[{k!r}]") for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        shared = set(getattr(value, "_shared_fields", ()))
        kwargs = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            kwargs[f.name] = v if f.name in shared else _map_rows(v, fn, f"{path}.{f.name}")
        return type(value)(**kwargs)
    raise TypeError(
        f"{path}: cannot reorder rows of a {type(value).__name__} (use tensors, lists, dicts or dataclasses of them)"
    )


def select_rows(value: T, index: torch.Tensor) -> T:
    """Rows ``index`` ``(R',)`` of every tensor in ``value`` (any length, repeats allowed)."""
    out: T = _map_rows(value, lambda x: x.index_select(0, index.to(x.device)), type(value).__name__)
    return out


def repeat_rows(value: T, times: int) -> T:
    """Every row of every tensor in ``value`` repeated ``times`` times consecutively."""
    out: T = _map_rows(value, lambda x: x.repeat_interleave(times, dim=0), type(value).__name__)
    return out
