"""ABS as a :class:`~scg_summarize.decoding.protocol.StepDecoder`: beam/greedy search, ROUGE, CLI.

The decoder state of a row is its window ``y_c`` of the last C output words (``<s>``-padded) and
the example it belongs to; the encoder memory is kept once per example. ``step`` shifts the
previous word into the window and returns ``log p(· | x, y_c)``; ``reorder`` selects windows.
Because the window is the whole state, :attr:`AbsStepDecoder.markov_window` = C: two
hypotheses with the same last C words have the same future, so beam search may merge them
(``DecodeOptions.recombine``).

Inputs come as the data pipeline's batch, ``src`` ``(B, M, N)`` on the chunk grid with
``src_mask``: the real words are packed left, in document order, into one sentence ``(B, L)``
(:func:`flatten_source`), and the attention of the ``attention`` encoder is scattered back to the
grid as the conventional ``word_attn`` extra ``(R, M, N)`` (so ``unk="replace"`` works).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .encoders import EncoderMemory
from .nnlm import AbsModel

__all__ = ["AbsState", "AbsStepDecoder", "flatten_source"]


def flatten_source(src: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pack the real words of a grid ``(B, M, N)`` to the left of a ``(B, L)`` sentence.

    Returns ``(words (B, L), mask (B, L), positions (B, L))`` with ``L`` the longest input and
    ``positions`` the flat grid index ``m * N + n`` of every packed word (0 at padding).
    """
    if src.dim() == 2:
        src, mask = src.unsqueeze(1), mask.unsqueeze(1)
    if src.dim() != 3 or mask.shape != src.shape:
        raise ValueError(f"batch['src'] must be (B, M, N) with a matching src_mask, got {tuple(src.shape)}")
    flat_src, flat_mask = src.flatten(1), mask.flatten(1).bool()  # (B, M N)
    # a stable sort of ~mask puts the real words first, in order
    order = torch.sort((~flat_mask).to(torch.int8), dim=1, stable=True).indices
    length = max(int(flat_mask.sum(1).max()), 1)
    positions = order[:, :length]
    words_mask = flat_mask.gather(1, positions)
    words = flat_src.gather(1, positions).masked_fill(~words_mask, 0)
    return words, words_mask, positions.masked_fill(~words_mask, 0)


@dataclass
class AbsState:
    """Rows of :class:`AbsStepDecoder`.

    Attributes:
        window: long ``(R, C)``: the last C words of every row (``<s>``-padded).
        example: long ``(R,)``: the example of every row.
        memory: the encoder memory per example (never copied).
        positions: long ``(B, L)``: grid index of every packed input word.
        grid: ``(M, N)`` of the batch's grid.
    """

    window: torch.Tensor
    example: torch.Tensor
    memory: EncoderMemory
    positions: torch.Tensor
    grid: tuple[int, int]


class AbsStepDecoder:
    """Drive an :class:`~.nnlm.AbsModel` one word at a time (see the module docstring).

    Args:
        model: the trained model (put in eval mode by the caller).
    """

    fused_topk = False

    def __init__(self, model: AbsModel) -> None:
        self.model = model
        self.vocab_size = model.config.tgt_vocab
        self.markov_window = model.config.context

    @torch.no_grad()
    def init_state(self, batch: Mapping[str, Any]) -> AbsState:
        src, mask = batch["src"], batch["src_mask"]
        words, words_mask, positions = flatten_source(src, mask)
        memory = self.model.encode(words, words_mask)
        n = words.shape[0]
        window = torch.full((n, self.markov_window), self.model.config.bos, dtype=torch.long, device=words.device)
        grid = (int(src.shape[1]), int(src.shape[2])) if src.dim() == 3 else (1, int(src.shape[1]))
        return AbsState(window, torch.arange(n, device=words.device), memory, positions, grid)

    @torch.no_grad()
    def step(
        self, state: AbsState, prev_tokens: torch.Tensor
    ) -> tuple[torch.Tensor, AbsState, dict[str, torch.Tensor]]:
        window = torch.cat([state.window[:, 1:], prev_tokens.unsqueeze(1)], dim=1)  # (R, C)
        scores, attn = self.model.logits(state.memory, state.example, window.unsqueeze(1))  # (R, 1, V)
        log_probs = torch.log_softmax(scores[:, 0].float(), dim=-1)
        new_state = AbsState(window, state.example, state.memory, state.positions, state.grid)
        extras: dict[str, torch.Tensor] = {}
        if attn is not None:
            m, n = state.grid
            rows = window.shape[0]
            grid_attn = attn.new_zeros(rows, m * n)
            grid_attn.scatter_add_(1, state.positions[state.example], attn[:, 0] * state.memory.mask[state.example])
            extras["word_attn"] = grid_attn.view(rows, m, n)
        return log_probs, new_state, extras

    def reorder(self, state: AbsState, indices: torch.Tensor) -> AbsState:
        return AbsState(state.window[indices], state.example[indices], state.memory, state.positions, state.grid)
