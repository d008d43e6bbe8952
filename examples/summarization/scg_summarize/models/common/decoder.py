"""The attentional LSTM decoder with input feeding (Luong et al. 2015; Ling & Rush 2017, eq. 1-2).

At step t, with y_{t-1} the previous word and c_{t-1} the previous attentional output:

    h_t      = LSTM([E y_{t-1}; c_{t-1}], h_{t-1})      (input feeding; 2 layers)
    c̃_t      = Σ_ij α_ij h_ij                           (the attention, :mod:`.attention`)
    c_t      = tanh(W² [c̃_t; h_t])
    p(y_t)   = softmax(W_out c_t + b_out)                (the generator, owned by the summarizer)

The decoder is written one step at a time (:meth:`Decoder.step`): hard attention draws a chunk at
every step, and its draw must precede the step's cost so that scg sees which costs it influences.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
from torch import nn

from .attention import AttentionOut, Memory, Mode, SourceAttention
from .rows import select_rows

__all__ = ["Decoder", "DecoderState"]


@dataclass
class DecoderState:
    """The recurrent state: per-layer ``h``/``c`` ``(B, H)`` and the fed context c_{t-1} ``(B, H)``.

    Families extend it by subclassing (a new dataclass field) or through ``extra`` (any
    per-row tensors, e.g. a stateful attention's running sums); :meth:`select` reorders every
    field it finds (:func:`~.rows.select_rows`), so beam search needs no knowledge of them.
    """

    h: list[torch.Tensor]
    c: list[torch.Tensor]
    feed: torch.Tensor
    extra: dict[str, torch.Tensor] = field(default_factory=dict)

    def select(self, index: torch.Tensor) -> DecoderState:
        """Rows ``index`` of every tensor (beam search reordering), of the same class."""
        return select_rows(self, index)


class Decoder(nn.Module):
    """A ``layers``-deep LSTM decoder with input feeding around a :class:`SourceAttention`.

    Args:
        emb_dim: target embedding size E.
        hidden: H (also the context size).
        layers: LSTM depth.
        dropout: between layers and on c_t.
        attention: the source attention module.
        input_feed: feed c_{t-1} into the first layer.
    """

    def __init__(
        self,
        emb_dim: int,
        hidden: int,
        layers: int,
        dropout: float,
        attention: SourceAttention,
        input_feed: bool = True,
    ) -> None:
        super().__init__()
        self.hidden = hidden
        self.input_feed = input_feed
        in_dim = emb_dim + (hidden if input_feed else 0)
        self.cells = nn.ModuleList([nn.LSTMCell(in_dim if i == 0 else hidden, hidden) for i in range(layers)])
        self.attention = attention
        self.combine = nn.Linear(2 * hidden, hidden, bias=False)  # W²
        self.dropout = nn.Dropout(dropout)

    def init_state(
        self, batch: int, final: tuple[torch.Tensor, torch.Tensor] | None, like: torch.Tensor
    ) -> DecoderState:
        """The initial state: the encoder's final ``(h, c)`` ``(layers, B, H)`` or zeros."""
        layers = len(self.cells)
        zero = like.new_zeros(batch, self.hidden)
        if final is None:
            return DecoderState([zero] * layers, [zero] * layers, zero)
        h, c = final
        if h.shape[0] != layers:  # encoder depth differs: use its top layer everywhere
            h, c = h[-1:].expand(layers, -1, -1), c[-1:].expand(layers, -1, -1)
        return DecoderState(list(h.unbind(0)), list(c.unbind(0)), zero)

    def step(
        self, state: DecoderState, y_emb: torch.Tensor, memory: Memory, t: int, mode: Mode
    ) -> tuple[torch.Tensor, DecoderState, AttentionOut]:
        """One step: ``y_emb`` ``(B, E)`` is E y_{t-1}. Returns c_t ``(B, H)``, the new state, the attention."""
        x = torch.cat([y_emb, state.feed], dim=1) if self.input_feed else y_emb  # (B, E + H)
        hs, cs = [], []
        for i, cell in enumerate(self.cells):
            h, c = cell(x, (state.h[i], state.c[i]))  # (B, H)
            hs.append(h)
            cs.append(c)
            x = self.dropout(h) if i + 1 < len(self.cells) else h
        att = self.attention(memory, x, t, mode)  # query: the top layer h_t
        out = torch.tanh(self.combine(torch.cat([att.context, x], dim=1)))  # (B, H)  c_t
        out = self.dropout(out)
        return out, replace(state, h=hs, c=cs, feed=out), att
