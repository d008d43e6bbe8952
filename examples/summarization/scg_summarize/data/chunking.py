"""Chunk layouts: how a tokenized document becomes the M x N grid of coarse units.

Two layouts (Ling & Rush, 2017, section 5):

* ``"grid"``: the document's words, with ``</s>`` after every sentence, are concatenated and
  the first ``M * N`` of them are cut into ``M`` chunks of ``N`` consecutive words. Padding
  can only occur at the end, so the flat view ``ids.reshape(-1)[:n]`` is exactly the first
  ``n`` words of the document -- the input of the STANDARD (non-hierarchical) model.
* ``"sentences"``: chunk ``i`` is sentence ``i`` followed by ``</s>``, truncated to ``N``
  words and padded; documents with fewer than ``M`` sentences get all-padding chunks.

Padding positions hold ``<pad>`` (id 0) and have ``mask == False``; since no real word has id
0, ``mask == (ids != 0)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import torch

from .vocab import EOS

__all__ = ["flat_view", "layout_chunks", "pack_chunks", "pack_flat", "pack_words", "regrid"]

T = TypeVar("T")


def layout_chunks(
    sentences: Sequence[Sequence[T]],
    layout: str,
    num_chunks: int,
    chunk_len: int,
    eos: T = EOS,  # type: ignore[assignment]
) -> list[list[T]]:
    """Arrange tokenized sentences into at most ``num_chunks`` chunks of <= ``chunk_len``.

    Works on any token type (words or ids). Empty sentences are ignored. The result holds
    only non-empty chunks, in document order; :func:`pack_chunks` pads it to a full grid.

    Args:
        sentences: the document as a list of tokenized sentences (without ``</s>``).
        layout: ``"grid"`` or ``"sentences"``.
        num_chunks: M.
        chunk_len: N.
        eos: the end-of-sentence token appended to every sentence.
    """
    if num_chunks < 1 or chunk_len < 1:
        raise ValueError("num_chunks and chunk_len must be positive")
    if layout == "grid":
        budget = num_chunks * chunk_len
        flat: list[T] = []
        for sentence in sentences:
            if not sentence:
                continue
            flat.extend(sentence)
            flat.append(eos)
            if len(flat) >= budget:
                break
        flat = flat[:budget]
        return [flat[i : i + chunk_len] for i in range(0, len(flat), chunk_len)]
    if layout == "sentences":
        chunks: list[list[T]] = []
        for sentence in sentences:
            if not sentence:
                continue
            chunks.append([*sentence, eos][:chunk_len])
            if len(chunks) == num_chunks:
                break
        return chunks
    raise ValueError(f"unknown layout {layout!r}; expected 'grid' or 'sentences'")


def pack_chunks(
    chunks: Sequence[Sequence[int]], num_chunks: int, chunk_len: int, pad_id: int = 0
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.bool_]]:
    """Pad id chunks into an ``(M, N)`` int32 array and its boolean mask.

    ``mask.sum()`` equals the number of ids placed; every masked-out position holds
    ``pad_id``.
    """
    if len(chunks) > num_chunks:
        raise ValueError(f"{len(chunks)} chunks do not fit in {num_chunks}")
    ids = np.full((num_chunks, chunk_len), pad_id, dtype=np.int32)
    mask = np.zeros((num_chunks, chunk_len), dtype=np.bool_)
    for row, chunk in enumerate(chunks):
        if len(chunk) > chunk_len:
            raise ValueError(f"chunk {row} has {len(chunk)} ids, more than {chunk_len}")
        ids[row, : len(chunk)] = chunk
        mask[row, : len(chunk)] = True
    return ids, mask


def flat_view(src: torch.Tensor, src_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(..., M, N)`` chunks as ``(..., M * N)`` sequences (a reshape, no copy).

    For the grid layout this is the document's first ``M * N`` words in order, padding last.
    For the sentences layout padding is interleaved; use :func:`pack_flat` to move it to the
    end.
    """
    shape = (*src.shape[:-2], src.shape[-2] * src.shape[-1])
    return src.reshape(shape), src_mask.reshape(shape)


def pack_flat(src: torch.Tensor, src_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Flatten ``(B, M, N)`` chunks to ``(B, M * N)`` with all real words first, in order.

    Real positions keep their relative order; padding (set to 0) moves to the end of each
    row. For the grid layout the result equals :func:`flat_view`.
    """
    packed, packed_mask, _ = _packed(src, src_mask)
    return packed, packed_mask


def pack_words(
    src: torch.Tensor, src_mask: torch.Tensor, max_len: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The grid ``(B, M, N)`` as one sentence per example (ABS and MAL read their input so):
    :func:`pack_flat` cut to the longest document (and to ``max_len`` words).

    Returns ``(words (B, L), mask (B, L), positions (B, L))``, ``positions`` the flat grid index
    ``m * N + n`` of every packed word (0 at padding), so that an attention over the sentence can
    be scattered back onto the grid.
    """
    if src.dim() != 3 or src_mask.shape != src.shape:
        raise ValueError(f"src must be (B, M, N) with a matching mask, got {tuple(src.shape)}")
    words, mask, positions = _packed(src, src_mask)  # (B, M N)
    longest = int(mask.sum(-1).max())
    length = max(longest if max_len is None else min(longest, max_len), 1)
    return words[:, :length], mask[:, :length], positions[:, :length]


def _packed(src: torch.Tensor, src_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`pack_flat` and the flat grid index of every packed word (0 at padding)."""
    flat, mask = flat_view(src, src_mask)
    mask = mask.bool()
    order = torch.sort((~mask).to(torch.int8), dim=-1, stable=True).indices  # a stable sort: real words first
    packed_mask = torch.gather(mask, -1, order)
    packed = torch.gather(flat, -1, order).masked_fill(~packed_mask, 0)
    return packed, packed_mask, order.masked_fill(~packed_mask, 0)


def regrid(
    src: torch.Tensor, src_mask: torch.Tensor, num_chunks: int, chunk_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, M, N)`` -> ``(B, num_chunks, chunk_len)``: the first ``num_chunks·chunk_len`` real words.

    The HIER-5x80 / HIER-2x200 rows: the document's real words in order (:func:`pack_flat`)
    cut into ``num_chunks`` chunks of ``chunk_len`` words; shorter documents are padded, longer
    ones truncated. Meant for corpora prepared with the grid layout, where chunks are
    consecutive words anyway.
    """
    flat, mask = pack_flat(src, src_mask)  # (B, MN), real words first
    B, L = flat.shape
    size = num_chunks * chunk_len
    if L < size:
        flat = torch.cat([flat, flat.new_zeros(B, size - L)], 1)
        mask = torch.cat([mask, mask.new_zeros(B, size - L)], 1)
    return flat[:, :size].reshape(B, num_chunks, chunk_len), mask[:, :size].reshape(B, num_chunks, chunk_len)
