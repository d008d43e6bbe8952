"""Tiny step decoders for the search tests.

* :class:`PrefixTableDecoder` -- next-word distributions that are an arbitrary (seeded) function
  of the example and the whole prefix, so search results can be checked against brute-force
  enumeration of every sequence.
* :class:`ToyCoarseToFine` -- a miniature hard-attention model with the structure of C2F
  (coarse attention over chunks, the argmax or top-k chunks read, word attention inside them,
  a GRU decoder). Randomly initialized, it produces meaningless but well-formed summaries and
  all the ``extras`` (``coarse_attn``, ``chunk_read``, ``word_attn``), and its top-k step runs
  the fused kernel.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from typing import Any

import torch
from scg_summarize.data.batching import SourceBatch
from scg_summarize.decoding.protocol import TopK, topk_of
from scg_summarize.kernels import choose, logsoftmax_topk
from torch import nn

__all__ = ["PrefixState", "PrefixTableDecoder", "ToyCoarseToFine", "ToyState"]


# --------------------------------------------------------------------------- prefix table


@dataclass
class PrefixState:
    """Rows of :class:`PrefixTableDecoder`: the example and the words so far of each row."""

    example: list[int]
    prefix: list[tuple[int, ...]]


@functools.lru_cache(maxsize=1 << 16)
def _prefix_log_probs(
    vocab_size: int, seed: int, temperature: float, example: int, prefix: tuple[int, ...]
) -> torch.Tensor:
    """:meth:`PrefixTableDecoder.log_probs`, a pure function of its arguments: memoised, since searches and
    their brute-force checks ask for the same prefixes again and again (~17,000 calls in the tests)."""
    key = hashlib.sha256(f"{seed}|{example}|{prefix}".encode()).digest()
    gen = torch.Generator().manual_seed(int.from_bytes(key[:8], "little"))
    logits = torch.randn(vocab_size, generator=gen, dtype=torch.float64) / temperature
    logits[0] = logits[2] = -math.inf
    return torch.log_softmax(logits, dim=0).float()


class PrefixTableDecoder:
    """``p(w | prefix)`` is a seeded random distribution per ``(example, prefix)``.

    Args:
        vocab_size: ``V`` (ids below 4 are the specials; ``<pad>``/``<s>`` get no mass).
        seed: changes every distribution.
        temperature: lower values give peakier distributions.
    """

    def __init__(self, vocab_size: int, seed: int = 0, temperature: float = 1.0) -> None:
        self.vocab_size = vocab_size
        self.seed = seed
        self.temperature = temperature
        self.calls = 0

    def log_probs(self, example: int, prefix: tuple[int, ...]) -> torch.Tensor:
        """The distribution after ``prefix`` (words only, no ``<s>``), as ``(V,)`` log-probs (a fresh tensor)."""
        return _prefix_log_probs(self.vocab_size, self.seed, self.temperature, example, prefix).clone()

    def init_state(self, batch: SourceBatch) -> PrefixState:
        n = int(batch.src.shape[0])
        return PrefixState(list(range(n)), [() for _ in range(n)])

    def step(self, state: PrefixState, prev_tokens: torch.Tensor) -> tuple[torch.Tensor, PrefixState, dict[str, Any]]:
        self.calls += 1
        prefixes = [p if t == 2 else (*p, t) for p, t in zip(state.prefix, prev_tokens.tolist())]
        out = torch.stack([self.log_probs(e, p) for e, p in zip(state.example, prefixes)])
        return out, PrefixState(list(state.example), prefixes), {}

    #: The top-k step below is the full step's top k (nothing to fuse): not the default.
    fused_topk = False

    def step_topk(
        self, state: PrefixState, prev_tokens: torch.Tensor, k: int
    ) -> tuple[TopK, PrefixState, dict[str, Any]]:
        """The protocol's optional top-k step (:func:`~.protocol.topk_of` of :meth:`step`)."""
        log_probs, new_state, extras = self.step(state, prev_tokens)
        return topk_of(log_probs, k), new_state, extras

    def reorder(self, state: PrefixState, indices: torch.Tensor) -> PrefixState:
        idx = indices.tolist()
        return PrefixState([state.example[i] for i in idx], [state.prefix[i] for i in idx])


# --------------------------------------------------------------------------- toy C2F


@dataclass
class ToyState:
    """Rows of :class:`ToyCoarseToFine`: decoder hidden state and the row -> example map."""

    hidden: torch.Tensor  # (R, H)
    example: torch.Tensor  # (R,) long
    words: torch.Tensor  # (B, M, N, H) encoded source words, per example (never copied)
    chunks: torch.Tensor  # (B, M, H) chunk summaries
    mask: torch.Tensor  # (B, M, N) real source words


class ToyCoarseToFine(nn.Module):
    """A miniature coarse-to-fine attention decoder (see the module docstring).

    Args:
        vocab_size: ``V``.
        hidden: embedding and state size.
        coarse_topk: chunks read per step at test time (1 = argmax, C2F; >1 = +MULTI).
        seed: initialization seed.
    """

    def __init__(self, vocab_size: int, hidden: int = 16, coarse_topk: int = 1, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.vocab_size, self.hidden, self.coarse_topk = vocab_size, hidden, coarse_topk
        self.embed = nn.Embedding(vocab_size, hidden, padding_idx=0)
        self.cell = nn.GRUCell(2 * hidden, hidden)
        self.coarse_query = nn.Linear(hidden, hidden, bias=False)
        self.word_query = nn.Linear(hidden, hidden, bias=False)
        self.out = nn.Linear(2 * hidden, vocab_size)

    @torch.no_grad()
    def init_state(self, batch: SourceBatch) -> ToyState:
        src, mask = batch.src, batch.src_mask
        words = self.embed(src)  # (B, M, N, H)
        counts = mask.sum(-1, keepdim=True).clamp(min=1)
        chunks = (words * mask.unsqueeze(-1)).sum(2) / counts
        n = src.shape[0]
        return ToyState(torch.zeros(n, self.hidden), torch.arange(n), words, chunks, mask)

    @torch.no_grad()
    def step(
        self, state: ToyState, prev_tokens: torch.Tensor
    ) -> tuple[torch.Tensor, ToyState, dict[str, torch.Tensor]]:
        features, new_state, extras = self._advance(state, prev_tokens)
        log_probs = torch.log_softmax(self.out(features), dim=-1)
        return log_probs, new_state, extras

    @property
    def fused_topk(self) -> bool:
        """Whether :meth:`step_topk` runs the Triton kernel (CUDA, or ``SCG_KERNELS=triton``)."""
        return choose(self.out.weight.device) == "triton"

    @torch.no_grad()
    def step_topk(
        self, state: ToyState, prev_tokens: torch.Tensor, k: int
    ) -> tuple[TopK, ToyState, dict[str, torch.Tensor]]:
        """The protocol's top-k step: the output layer, log-softmax and top-k in one
        ``scg_summarize.kernels.logsoftmax_topk`` call (the ``(R, V)`` log-probabilities are never
        written on the Triton backend)."""
        features, new_state, extras = self._advance(state, prev_tokens)
        values, indices = logsoftmax_topk(features, self.out.weight, self.out.bias, min(k, self.vocab_size))
        return TopK(values, indices), new_state, extras

    def _advance(
        self, state: ToyState, prev_tokens: torch.Tensor
    ) -> tuple[torch.Tensor, ToyState, dict[str, torch.Tensor]]:
        """Attention and the GRU step: the output layer's input ``(R, 2H)``, the state, extras."""
        ex = state.example
        chunks, words, mask = state.chunks[ex], state.words[ex], state.mask[ex]
        chunk_real = mask.any(-1)  # (R, M)
        coarse = torch.einsum("rmh,rh->rm", chunks, self.coarse_query(state.hidden))
        coarse_attn = torch.softmax(coarse.masked_fill(~chunk_real, -math.inf), dim=-1)
        k = min(self.coarse_topk, coarse_attn.shape[1])
        chosen = coarse_attn.topk(k, dim=-1).indices
        read = torch.zeros_like(chunk_real).scatter(1, chosen, True) & chunk_real
        scores = torch.einsum("rmnh,rh->rmn", words, self.word_query(state.hidden))
        allowed = mask & read.unsqueeze(-1)
        flat = scores.masked_fill(~allowed, -math.inf).flatten(1)
        word_attn = torch.softmax(flat, dim=-1).nan_to_num(0.0).view_as(scores)
        context = torch.einsum("rmn,rmnh->rh", word_attn, words)
        hidden = self.cell(torch.cat([self.embed(prev_tokens), context], -1), state.hidden)
        new_state = ToyState(hidden, ex, state.words, state.chunks, state.mask)
        extras = {"coarse_attn": coarse_attn, "chunk_read": read, "word_attn": word_attn}
        return torch.cat([hidden, context], -1), new_state, extras

    def reorder(self, state: ToyState, indices: torch.Tensor) -> ToyState:
        return ToyState(state.hidden[indices], state.example[indices], state.words, state.chunks, state.mask)
