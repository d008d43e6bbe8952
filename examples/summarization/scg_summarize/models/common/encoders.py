"""Word encoders: LSTM states h_ij for every source word, on the (B, M, N) chunk grid.

Two encoders, one interface (:class:`WordEncoder`): ``forward(emb, mask, lengths=None) ->
EncodedWords`` with ``emb`` the embedded source ``(B, M, N, E)`` (padding embeddings are zero),
``mask`` ``(B, M, N)`` and the batch's `SourceLengths` (bounds counted on the host, so that the
LSTMs skip the all-padding tail without reading the mask; None: read it). Both return states on
the grid, ``(B, M, N, H)``, zero at padding, so that every attention can address word j of chunk
i as ``words[:, i, j]`` whatever the encoder:

* :class:`FlatWordEncoder` (Model 0, STANDARD): one LSTM over the whole document. The real
  words are packed to the front in document order (the grid layout's flat view is already in
  order; the sentence layout interleaves padding), encoded as one sequence of length ≤ M·N,
  and the states scattered back to their grid cells. h_ij then depends on every earlier word
  of the document.
* :class:`ChunkedWordEncoder` (Models 1-3): the same LSTM run on every chunk separately, all
  B·M chunks in one batched call, h_ij = LSTM(x_i1 .. x_ij). This is what makes the word
  states of a chunk meaningful on their own, so that C2F can read a sampled chunk's states.

Sequences are right-padded and the LSTM is unidirectional, so the state of a real word never
depends on the padding after it: extra padding changes no output. (Packed sequences would give
the same numbers, but their backward pass on CPU costs O(L²) in the sequence length.) The
decoder's initial state is built from each layer's state at the last real word.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ...data.batching import SourceLengths

__all__ = [
    "ChunkedWordEncoder",
    "EncodedWords",
    "FlatWordEncoder",
    "WordEncoder",
    "last_states",
    "reverse_index",
]


@dataclass
class EncodedWords:
    """The output of a word encoder.

    Attributes:
        states: ``(B, M, N, H)`` word states h_ij, zero at padding.
        final: the decoder's initial ``(h, c)``, each ``(layers, B, H)``: h is every layer's state at
            the document's last real word (flat) or its mean over the real chunks' last words
            (chunked); c is zero.
    """

    states: torch.Tensor
    final: tuple[torch.Tensor, torch.Tensor]


def last_states(states: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``states`` ``(S, L, H)`` at each sequence's last real step ``(S, H)`` (zero for empty sequences)."""
    S, L, H = states.shape
    index = (lengths - 1).clamp(min=0).view(S, 1, 1).expand(S, 1, H)
    return states.gather(1, index).squeeze(1) * (lengths > 0).unsqueeze(1).to(states.dtype)


def _steps(lengths: torch.Tensor, width: int, bound: int | None) -> int:
    """The LSTM steps to run over sequences of ``lengths`` padded to ``width``, which skip the
    all-padding tail: ``bound`` (a bound on ``lengths`` counted on the host: `SourceLengths`) when
    given; else the longest length, read from ``lengths``, or ``width`` inside ``torch.compile``
    or a CUDA graph capture, where that read cannot be made. At least 1, at most ``width``. The
    states are the same either way: a step after a sequence's end changes none of its real states."""
    if bound is not None:
        return max(min(bound, width), 1)
    if torch.compiler.is_compiling() or (lengths.is_cuda and torch.cuda.is_current_stream_capturing()):
        return width
    return max(int(lengths.max()), 1)


def reverse_index(lengths: torch.Tensor, L: int) -> torch.Tensor:
    """``(S, L)`` indices reversing each sequence's first ``lengths`` steps (padding stays put).

    The permutation is its own inverse: ``x.gather(1, idx).gather(1, idx) == x``.
    """
    j = torch.arange(L, device=lengths.device).unsqueeze(0)  # (1, L)
    n = lengths.unsqueeze(1)  # (S, 1)
    return torch.where(j < n, n - 1 - j, j)


class WordEncoder(nn.Module):
    """A stack of LSTM layers over source words (embeddings are owned by the summarizer).

    ``run(x (S, L, E), lengths (S,))`` returns the top layer's states ``(S, L, H)`` (zero after
    each sequence's end) and every layer's state at the last real word ``(layers, S, H)``.
    With ``bidirectional``, each layer is a forward and a backward LSTM of H/2 units whose
    states are concatenated; the backward one runs over each sequence reversed *within its
    length* (so padding still never affects a real state), and its "last" state is the one at
    the first word.
    """

    def __init__(self, emb_dim: int, hidden: int, layers: int, dropout: float, bidirectional: bool = False) -> None:
        super().__init__()
        if bidirectional and hidden % 2:
            raise ValueError(f"a bidirectional encoder needs an even hidden size, got {hidden}")
        self.hidden = hidden
        self.bidirectional = bidirectional
        size = hidden // 2 if bidirectional else hidden
        self.layers = nn.ModuleList(
            [nn.LSTM(emb_dim if i == 0 else hidden, size, batch_first=True) for i in range(layers)]
        )
        self.backward_layers = (
            nn.ModuleList([nn.LSTM(emb_dim if i == 0 else hidden, size, batch_first=True) for i in range(layers)])
            if bidirectional
            else None
        )
        self.dropout = nn.Dropout(dropout)

    def run(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        S, L, _ = x.shape
        real = (torch.arange(L, device=x.device).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(-1)  # (S, L, 1)
        rev = reverse_index(lengths, L).unsqueeze(-1) if self.backward_layers is not None else None  # (S, L, 1)
        finals = []
        for i, lstm in enumerate(self.layers):
            if i > 0:
                x = self.dropout(x)
            y, _ = lstm(x)  # (S, L, H or H/2)
            final = last_states(y * real.to(y.dtype), lengths)
            if self.backward_layers is not None and rev is not None:
                x_rev = x.gather(1, rev.expand_as(x))  # each sequence reversed in place
                y_rev, _ = self.backward_layers[i](x_rev)  # (S, L, H/2)
                y_back = y_rev.gather(1, rev.expand_as(y_rev))
                y = torch.cat([y, y_back], dim=-1)  # (S, L, H)
                final = torch.cat([final, y_back[:, 0] * (lengths > 0).unsqueeze(1).to(y.dtype)], dim=-1)
            x = y * real.to(y.dtype)
            finals.append(final)
        return x, torch.stack(finals)

    def forward(
        self, emb: torch.Tensor, mask: torch.Tensor, lengths: SourceLengths | None = None
    ) -> EncodedWords:  # pragma: no cover - abstract
        raise NotImplementedError

    def _run(
        self, x: torch.Tensor, words: torch.Tensor, lengths: SourceLengths | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`run`, its failure under ``lengths`` that do not bound the sources (the last state of
        the longest is beyond the steps run: an index out of range) named as such."""
        try:
            return self.run(x, words)
        except (RuntimeError, IndexError) as e:
            if lengths is None or "out of bounds" not in str(e):
                raise
            raise ValueError(
                f"{type(self).__name__}: the batch's lengths {lengths} do not bound its sources' real "
                f"words (the encoder ran {x.shape[1]} steps); count them with SourceLengths.of(src_mask)"
            ) from e


class FlatWordEncoder(WordEncoder):
    """Model 0: one LSTM over the document's (at most M·N) words, states put back on the grid."""

    def forward(self, emb: torch.Tensor, mask: torch.Tensor, lengths: SourceLengths | None = None) -> EncodedWords:
        B, M, N, E = emb.shape
        flat_mask = mask.reshape(B, M * N)  # (B, MN)
        # real words first, in document order (a stable sort of "is padding")
        order = torch.sort((~flat_mask).to(torch.int8), dim=1, stable=True).indices  # (B, MN)
        x = emb.reshape(B, M * N, E).gather(1, order.unsqueeze(-1).expand(B, M * N, E))  # (B, MN, E)
        words = flat_mask.sum(1)  # (B,)
        L = _steps(words, M * N, None if lengths is None else lengths.document)  # no steps over the padding tail
        states, final = self._run(x[:, :L], words, lengths)  # (B, L, H), (layers, B, H)
        H = states.shape[-1]
        grid = states.new_zeros(B, M * N, H).scatter(1, order[:, :L].unsqueeze(-1).expand(B, L, H), states)
        return EncodedWords(grid.reshape(B, M, N, H), (final, torch.zeros_like(final)))


class ChunkedWordEncoder(WordEncoder):
    """Models 1-3: the LSTM over every chunk separately (all B·M chunks in one call)."""

    def forward(self, emb: torch.Tensor, mask: torch.Tensor, lengths: SourceLengths | None = None) -> EncodedWords:
        B, M, N, E = emb.shape
        words = mask.reshape(B * M, N).sum(1)  # (BM,)
        L = _steps(words, N, None if lengths is None else lengths.chunk)
        states, h = self._run(emb.reshape(B * M, N, E)[:, :L], words, lengths)  # (BM, L, H), (layers, BM, H)
        H = states.shape[-1]
        if L < N:
            states = torch.cat([states, states.new_zeros(B * M, N - L, H)], 1)
        real = (words > 0).reshape(1, B, M, 1).to(h.dtype)  # real chunks
        count = real.sum(2).clamp(min=1.0)  # (1, B, 1)
        h0 = (h.reshape(h.shape[0], B, M, H) * real).sum(2) / count  # (layers, B, H)
        return EncodedWords(states.reshape(B, M, N, H), (h0, torch.zeros_like(h0)))
