"""Constraints applied to next-word log-probabilities before a search step.

All functions take ``log_probs`` ``(R, V)`` and return a new tensor with forbidden words set to
``-inf``:

* :func:`banned_ngram_mask` / :func:`block_repeated_ngrams`: no-repeat n-gram blocking (with
  ``n = 3``, the trigram blocking of Paulus et al., 2018): a word is forbidden when it would
  complete an n-gram that already occurs in the hypothesis;
* :func:`apply_constraints`: everything a search step needs -- ``<pad>``/``<s>`` are never
  generated, ``<unk>`` is forbidden on request, ``</s>`` is forbidden before ``min_len`` words
  and forced after ``max_len`` words, then n-gram blocking. A row left without any allowed word
  falls back to ``</s>`` (with its unconstrained log-probability) so every hypothesis can end.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .options import DecodeOptions

__all__ = ["SpecialIds", "apply_constraints", "banned_ngram_mask", "block_repeated_ngrams"]

NEG_INF = float("-inf")


@dataclass(frozen=True)
class SpecialIds:
    """The ids of the special tokens (defaults: :class:`scg_summarize.data.Vocab`'s)."""

    pad: int = 0
    unk: int = 1
    bos: int = 2
    eos: int = 3


def banned_ngram_mask(history: torch.Tensor, n: int, vocab_size: int) -> torch.Tensor:
    """Which next words would repeat an n-gram of ``history``.

    Args:
        history: long ``(R, t)``, the words generated so far in every row (no ``<s>``).
        n: the n-gram size (>= 2).
        vocab_size: ``V``.

    Returns:
        bool ``(R, V)``: True where appending the word creates an n-gram that already occurs
        in the row.
    """
    if n < 2:
        raise ValueError(f"n-gram size must be >= 2, got {n}")
    rows, length = history.shape
    banned = torch.zeros(rows, vocab_size, dtype=torch.bool, device=history.device)
    if length < n:  # no complete n-gram yet, so nothing can be repeated
        return banned
    windows = history.unfold(1, n, 1)  # (R, length - n + 1, n): every n-gram so far
    last = history[:, length - n + 1 :]  # (R, n - 1): the prefix the next word would complete
    match = (windows[:, :, : n - 1] == last.unsqueeze(1)).all(dim=-1)  # (R, length - n + 1)
    row_idx, pos = match.nonzero(as_tuple=True)
    banned[row_idx, windows[row_idx, pos, n - 1]] = True
    return banned


def block_repeated_ngrams(log_probs: torch.Tensor, history: torch.Tensor, n: int) -> torch.Tensor:
    """``log_probs`` with every word that would repeat an n-gram set to ``-inf``."""
    mask = banned_ngram_mask(history, n, log_probs.shape[1])
    return log_probs.masked_fill(mask, NEG_INF)


def apply_constraints(
    log_probs: torch.Tensor,
    history: torch.Tensor,
    options: DecodeOptions,
    special: SpecialIds,
) -> torch.Tensor:
    """Apply all search constraints for the next word (see the module docstring).

    Args:
        log_probs: ``(R, V)`` next-word log-probabilities from the model.
        history: long ``(R, t)``: the ``t`` words already generated in every row.
        options: min/max length, ``<unk>`` handling, n-gram blocking.
        special: the special token ids.
    """
    out = log_probs.clone()
    length = history.shape[1]
    vocab = out.shape[1]
    eos_original = log_probs[:, special.eos].clone()
    for forbidden in (special.pad, special.bos):
        if forbidden < vocab and forbidden != special.eos:
            out[:, forbidden] = NEG_INF
    if options.unk == "forbid" and special.unk < vocab:
        out[:, special.unk] = NEG_INF
    if length >= options.max_len:
        out.fill_(NEG_INF)
        out[:, special.eos] = eos_original
        return out
    if length < options.min_len:
        out[:, special.eos] = NEG_INF
    if options.no_repeat_ngram and length >= options.no_repeat_ngram - 1:
        out = block_repeated_ngrams(out, history, options.no_repeat_ngram)
    stuck = torch.isneginf(out).all(dim=1)
    if bool(stuck.any()):
        out[stuck, special.eos] = eos_original[stuck]
    return out
