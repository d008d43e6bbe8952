"""Constraints applied to next-word log-probabilities before a search step.

All functions take ``log_probs`` ``(R, V)`` and return a new tensor with forbidden words set to
``-inf``:

* :func:`banned_ngram_mask` / :func:`block_repeated_ngrams`: no-repeat n-gram blocking (with
  ``n = 3``, the trigram blocking of Paulus et al., 2018): a word is forbidden when it would
  complete an n-gram that already occurs in the hypothesis;
* :func:`apply_constraints`: everything a search step needs -- ``<pad>``/``<s>`` are never
  generated, ``<unk>`` is forbidden on request, so are the ``blocked`` words of
  :class:`SpecialIds` (number tokens with ``block_digits``, see :func:`number_token_ids`) and the
  word just generated (``no_repeat_word``), ``</s>`` is forbidden before ``min_len`` words
  and forced after ``max_len`` words, then n-gram blocking. A row left without any allowed word
  falls back to ``</s>`` (with its unconstrained log-probability) so every hypothesis can end;
* :func:`constrain_candidates`: the same bans on a few candidate words per row (the top-k step
  of beam search), with :func:`banned_count_bound` bounding how many of them a row can lose.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..decode_options import DecodeOptions

__all__ = [
    "SpecialIds",
    "apply_constraints",
    "banned_count_bound",
    "banned_ngram_mask",
    "block_repeated_ngrams",
    "constrain_candidates",
    "is_number_token",
    "number_token_ids",
]

NEG_INF = float("-inf")


_NUMBER = re.compile(r"[#0-9.,:/%$-]*[#0-9][#0-9.,:/%$-]*")


@dataclass(frozen=True)
class SpecialIds:
    """The ids of the special tokens (defaults: :class:`scg_summarize.data.Vocab`'s) and the
    ``blocked`` words, never generated (empty unless the options block some)."""

    pad: int = 0
    unk: int = 1
    bos: int = 2
    eos: int = 3
    blocked: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        ids = {name: getattr(self, name) for name in ("pad", "unk", "bos", "eos")}
        for name, value in ids.items():  # (-1 indexed the last word; a float or a bool is no id)
            if type(value) is not int or value < 0:
                raise ValueError(f"SpecialIds({name}=...): expected an id (an integer >= 0), got {value!r}")
        same = [name for name, value in ids.items() if list(ids.values()).count(value) > 1]
        if same:  # (an <s> that is also </s> ends every summary at once; a <pad> that is </s> is never generated)
            raise ValueError(f"SpecialIds: {', '.join(same)} share the id {ids[same[0]]}; each needs its own")
        if not isinstance(self.blocked, tuple):
            raise TypeError(f"SpecialIds(blocked=...): expected a tuple of ids, got {type(self.blocked).__name__}")
        bad = next((i for i in self.blocked if type(i) is not int or i < 0), None)
        if bad is not None:
            raise ValueError(f"SpecialIds(blocked=...): expected ids (integers >= 0), got {bad!r}")

    def check_vocab(self, size: int) -> None:
        """``ValueError`` naming an id that is not a word of a vocabulary of ``size`` words (the
        decoder's: ids 0 to ``size - 1``), where indexing the log-probabilities with it would fail
        deep inside torch. Called by the searches (once per step: a few comparisons)."""
        top = max(self.pad, self.unk, self.bos, self.eos, *self.blocked)
        if top >= size:
            name = next((n for n in ("pad", "unk", "bos", "eos") if getattr(self, n) == top), "blocked")
            raise ValueError(
                f"SpecialIds({name}=...): id {top} is not in the decoder's vocabulary of {size} words "
                f"(ids 0-{size - 1})"
            )


def is_number_token(token: str) -> bool:
    """Whether ``token`` is a number: digits or ``#`` (digit mapping) with number punctuation
    (``#``, ``##.#``, ``#,###``, ``1990``, ``$#``), and at least one digit or ``#``."""
    return _NUMBER.fullmatch(token) is not None


def number_token_ids(tokens: Sequence[str]) -> tuple[int, ...]:
    """The ids (positions in ``tokens``, a vocabulary's words) of the number tokens."""
    return tuple(i for i, token in enumerate(tokens) if is_number_token(token))


def _ban_fixed(out: torch.Tensor, history: torch.Tensor, options: DecodeOptions, special: SpecialIds) -> None:
    """Set the blocked words and (``no_repeat_word``) each row's last word to ``-inf`` in place."""
    if special.blocked:
        out[:, list(special.blocked)] = NEG_INF
    if options.no_repeat_word and history.shape[1] > 0:
        out.scatter_(1, history[:, -1:].to(out.device), NEG_INF)


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
    special.check_vocab(log_probs.shape[1])
    out = log_probs.clone()
    length = history.shape[1]
    eos_original = log_probs[:, special.eos].clone()
    out[:, [special.pad, special.bos]] = NEG_INF
    if options.unk == "forbid":
        out[:, special.unk] = NEG_INF
    _ban_fixed(out, history, options, special)
    if length >= options.max_len:
        out.fill_(NEG_INF)
        out[:, special.eos] = eos_original
        return out
    if length < (options.min_len or 0):  # (never None: DecodeOptions resolves it)
        out[:, special.eos] = NEG_INF
    if options.no_repeat_ngram and length >= options.no_repeat_ngram - 1:
        out = block_repeated_ngrams(out, history, options.no_repeat_ngram)
    stuck = torch.isneginf(out).all(dim=1)
    if bool(stuck.any()):
        out[stuck, special.eos] = eos_original[stuck]
    return out


def _ngram_continuations(history: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The word after every earlier occurrence of the last ``n - 1`` words: ``(next (R, P), match (R, P))``,
    ``next[r, p]`` banned where ``match[r, p]`` (``P = t - n + 1`` windows; empty when ``t < n``)."""
    rows, length = history.shape
    if length < n:
        empty = history.new_zeros(rows, 0)
        return empty, empty.bool()
    windows = history.unfold(1, n, 1)  # (R, P, n)
    last = history[:, length - n + 1 :]  # (R, n - 1)
    match = (windows[:, :, : n - 1] == last.unsqueeze(1)).all(dim=-1)  # (R, P)
    return windows[:, :, n - 1], match


def banned_count_bound(history: torch.Tensor, options: DecodeOptions, special: SpecialIds) -> int:
    """An upper bound on the words :func:`apply_constraints` bans in any row at this length (before
    ``max_len``): ``<pad>``, ``<s>``, ``<unk>``, ``</s>`` and the n-gram continuations (one host sync)."""
    fixed = len({special.pad, special.bos, special.unk, special.eos, *special.blocked})
    fixed += int(options.no_repeat_word)
    n = options.no_repeat_ngram
    if not n or history.shape[1] < max(n, 1):
        return fixed
    _, match = _ngram_continuations(history, n)
    return fixed + int(match.sum(dim=1).max()) if match.numel() else fixed


def constrain_candidates(
    values: torch.Tensor,
    words: torch.Tensor,
    history: torch.Tensor,
    options: DecodeOptions,
    special: SpecialIds,
) -> torch.Tensor:
    """:func:`apply_constraints` restricted to candidate words (the top-k step of beam search).

    Args:
        values: ``(R, C)`` log-probabilities of the candidates ``words`` long ``(R, C)``.
        history: long ``(R, t)`` with ``t < options.max_len`` (at ``max_len`` only ``</s>`` is
            allowed, whose log-probability may not be among the candidates: use the full step).

    Returns ``values`` with the banned candidates at ``-inf``. If the candidates are a row's top
    ``C`` words and ``C`` exceeds :func:`banned_count_bound`, the row keeps at least one allowed
    word, no row is left without one (so :func:`apply_constraints`' ``</s>`` fallback never applies),
    and the allowed candidates are exactly the row's best allowed words.
    """
    length = history.shape[1]
    if length >= options.max_len:
        raise ValueError("constrain_candidates: at max_len only </s> is allowed; use the full log-probabilities")
    banned = torch.zeros_like(words, dtype=torch.bool)
    banned |= (words == special.pad) | (words == special.bos)
    if options.unk == "forbid":
        banned |= words == special.unk
    if special.blocked:
        banned |= torch.isin(words, torch.tensor(special.blocked, device=words.device))
    if options.no_repeat_word and length > 0:
        banned |= words == history[:, -1:]
    if length < (options.min_len or 0):
        banned |= words == special.eos
    n = options.no_repeat_ngram
    if n and length >= n - 1:
        if n < 2:
            raise ValueError(f"n-gram size must be >= 2, got {n}")
        following, match = _ngram_continuations(history, n)  # (R, P)
        hit = (words.unsqueeze(2) == following.unsqueeze(1)) & match.unsqueeze(1)  # (R, C, P)
        banned |= hit.any(dim=2)
    return values.masked_fill(banned, NEG_INF)
