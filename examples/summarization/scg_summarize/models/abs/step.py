"""The chunk grid as one sentence: ABS reads its input as a single sequence of words.

:func:`flatten_source` packs the real words of a batch's grid ``src`` ``(B, M, N)`` to the left of
a ``(B, L)`` sentence, in document order, and keeps the grid position of every word, so that the
family (:class:`~.family.AbsSummarizer`) can scatter its attention back onto the grid (the
conventional ``word_attn`` extra, used by ``unk="replace"``) and ABS+'s extractive features
(:mod:`scg_summarize.decoding.abs_features`) can read the input words.
"""

from __future__ import annotations

import torch

__all__ = ["flatten_source"]


def flatten_source(src: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pack the real words of a grid ``(B, M, N)`` to the left of a ``(B, L)`` sentence.

    Returns ``(words (B, L), mask (B, L), positions (B, L))`` with ``L`` the longest input and
    ``positions`` the flat grid index ``m * N + n`` of every packed word (0 at padding).
    """
    if src.dim() == 2:
        src, mask = src.unsqueeze(1), mask.unsqueeze(1)
    if src.dim() != 3 or mask.shape != src.shape:
        raise ValueError(f"src must be (B, M, N) with a matching mask, got {tuple(src.shape)}")
    flat_src, flat_mask = src.flatten(1), mask.flatten(1).bool()  # (B, M N)
    # a stable sort of ~mask puts the real words first, in order
    order = torch.sort((~flat_mask).to(torch.int8), dim=1, stable=True).indices
    length = max(int(flat_mask.sum(1).max()), 1)
    positions = order[:, :length]
    words_mask = flat_mask.gather(1, positions)
    words = flat_src.gather(1, positions).masked_fill(~words_mask, 0)
    return words, words_mask, positions.masked_fill(~words_mask, 0)
