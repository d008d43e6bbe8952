"""The input encoders of ABS (Rush, Chopra & Weston 2015, Section 3.2): enc(x, y_c) in R^H.

Every encoder works in two halves, so that decoding encodes each input once:

* ``memory(src, mask) -> EncoderMemory``: what depends on the input only, per example, with
  ``src`` long ``(B, M)`` (the input words, left-aligned, ``<pad>`` = 0 after the end) and
  ``mask`` bool ``(B, M)`` (True at real words);
* ``read(memory, example, ctx) -> (enc (R, T, H), attention (R, T, M) or None)``: the encoding
  seen from the output context ``ctx`` long ``(R, T, C)`` (the window y_c of the last C output
  words, ``<s>``-padded) of ``R`` rows, row ``r`` belonging to example ``example[r]``. Training
  reads every position of the targets at once (``R = B``, ``T`` = target length); beam search
  reads one position per hypothesis (``T = 1``).

The encoders (F is the input embedding, ``(V_x, H)``):

* :class:`BowEncoder` (enc_1): ``enc = p^T x̃`` with ``x̃ = [F x_1 .. F x_M]`` and ``p`` uniform
  over the M real words. Ignores order and context.
* :class:`ConvEncoder` (enc_2, a TDNN): ``x̃^0 = x̃``; for each layer l = 1..L a temporal
  convolution of width 2Q+1 (zero-padded at the sentence boundaries, eq. 7), then 2-element
  max pooling and tanh (eq. 6, ``x̃^l_i = tanh(max(x̃_{2i-1}, x̃_{2i}))``; an odd last element is
  pooled alone), and a final max over time (eq. 5). Ignores the context.
* :class:`AttentionEncoder` (enc_3, ABS): ``enc = p^T x̄`` with ``p ∝ exp(x̃ P ỹ'_c)``,
  ``ỹ'_c = [G y_{i-C+1} .. G y_i]`` a separate context embedding G ``(V_y, D)``, P ``(H, C D)``,
  and the smoothed input ``x̄_i = Σ_{q=i-Q}^{i+Q} x̃_q / (2Q+1)`` (zero outside the sentence).
  The paper writes the divisor as Q; any constant is absorbed by the output matrix W, and
  2Q+1 makes x̄ a local average.
* :class:`NoEncoder`: enc = 0, the plain feed-forward NNLM of Table 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional

__all__ = [
    "AbsEncoder",
    "AttentionEncoder",
    "BowEncoder",
    "ConvEncoder",
    "EncoderMemory",
    "NoEncoder",
]


@dataclass
class EncoderMemory:
    """Per-example encoder tensors (indexed by example, never copied per hypothesis).

    Attributes:
        mask: bool ``(B, M)``, real input words.
        tensors: named per-example tensors, first dimension ``B`` (which ones: the encoder's
            business, e.g. ``summary`` ``(B, H)`` or ``keys``/``values`` ``(B, M, H)``).
    """

    mask: torch.Tensor
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)


def _check_input(src: torch.Tensor, mask: torch.Tensor) -> None:
    if src.dim() != 2 or mask.shape != src.shape:
        raise ValueError(f"ABS encoders take src and mask (B, M), got {tuple(src.shape)} and {tuple(mask.shape)}")
    empty = (mask.sum(1) == 0).any()
    if torch.compiler.is_compiling():  # (no host read in a traced step: checked on the device)
        torch._assert_async(~empty, "an input has no real word (every example needs at least one)")
    elif bool(empty):
        raise ValueError("an input has no real word (every example needs at least one)")


class AbsEncoder(nn.Module):
    """The interface (see the module docstring). ``hidden`` is H, the size of enc(x, y_c)."""

    hidden: int
    uses_context: bool = False

    def memory(self, src: torch.Tensor, mask: torch.Tensor) -> EncoderMemory:
        raise NotImplementedError

    def read(
        self, memory: EncoderMemory, example: torch.Tensor, ctx: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        raise NotImplementedError


class NoEncoder(AbsEncoder):
    """enc(x, y_c) = 0: the decoder alone is a feed-forward NNLM (Bengio et al. 2003)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden

    def memory(self, src: torch.Tensor, mask: torch.Tensor) -> EncoderMemory:
        return EncoderMemory(mask)

    def read(
        self, memory: EncoderMemory, example: torch.Tensor, ctx: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        rows, steps, _ = ctx.shape
        return ctx.new_zeros((rows, steps, self.hidden), dtype=torch.get_default_dtype()), None


class _SummaryEncoder(AbsEncoder):
    """An encoder whose output ignores the context: one summary vector per document, read at every step."""

    hidden: int

    def read(
        self, memory: EncoderMemory, example: torch.Tensor, ctx: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        rows, steps, _ = ctx.shape
        return memory.tensors["summary"][example].unsqueeze(1).expand(rows, steps, self.hidden), None


class BowEncoder(_SummaryEncoder):
    """enc_1: the mean of the input embeddings ``F x_j`` over the real words."""

    def __init__(self, src_vocab: int, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.embed = nn.Embedding(src_vocab, hidden, padding_idx=0)  # F

    def memory(self, src: torch.Tensor, mask: torch.Tensor) -> EncoderMemory:
        _check_input(src, mask)
        emb = self.embed(src) * mask.unsqueeze(-1)  # (B, M, H)
        summary = emb.sum(1) / mask.sum(1, keepdim=True)  # (B, H): p = 1/M on real words
        return EncoderMemory(mask, {"summary": summary})


class ConvEncoder(_SummaryEncoder):
    """enc_2: L layers of (width 2Q+1 convolution, 2-element max pooling, tanh), max over time."""

    def __init__(self, src_vocab: int, hidden: int, layers: int = 3, window: int = 2) -> None:
        super().__init__()
        if layers < 1 or window < 0:
            raise ValueError(f"ConvEncoder needs layers >= 1 and window Q >= 0, got {layers}, {window}")
        self.hidden, self.window = hidden, window
        self.embed = nn.Embedding(src_vocab, hidden, padding_idx=0)  # F
        self.convs = nn.ModuleList(nn.Conv1d(hidden, hidden, 2 * window + 1, padding=window) for _ in range(layers))

    def memory(self, src: torch.Tensor, mask: torch.Tensor) -> EncoderMemory:
        _check_input(src, mask)
        x = self.embed(src) * mask.unsqueeze(-1)  # (B, M, H), zero after the end
        real = mask
        for conv in self.convs:
            x = conv(x.transpose(1, 2)).transpose(1, 2)  # (B, M_l, H), eq. 7
            if x.shape[1] % 2:  # an odd last element is pooled alone
                x = functional.pad(x, (0, 0, 0, 1))
                real = functional.pad(real, (0, 1))
            x = x.masked_fill(~real.unsqueeze(-1), -math.inf)
            pairs = x.reshape(x.shape[0], -1, 2, self.hidden)  # (B, M_l / 2, 2, H)
            real = real.reshape(real.shape[0], -1, 2).any(-1)  # (B, M_l / 2)
            x = torch.tanh(pairs.max(2).values).masked_fill(~real.unsqueeze(-1), 0.0)  # eq. 6, zero after the end
        summary = x.masked_fill(~real.unsqueeze(-1), -math.inf).max(1).values  # (B, H), eq. 5
        return EncoderMemory(mask, {"summary": summary})


class AttentionEncoder(AbsEncoder):
    """enc_3: attention of the context window over the input, reading the locally averaged input."""

    uses_context = True

    def __init__(self, src_vocab: int, tgt_vocab: int, hidden: int, embed: int, context: int, window: int = 2) -> None:
        super().__init__()
        self.hidden, self.window = hidden, window
        self.embed = nn.Embedding(src_vocab, hidden, padding_idx=0)  # F
        self.context_embed = nn.Embedding(tgt_vocab, embed, padding_idx=0)  # G
        self.align = nn.Linear(context * embed, hidden, bias=False)  # P

    def memory(self, src: torch.Tensor, mask: torch.Tensor) -> EncoderMemory:
        _check_input(src, mask)
        keys = self.embed(src) * mask.unsqueeze(-1)  # (B, M, H): x̃
        width = 2 * self.window + 1
        # x̄_i = sum_{q=i-Q}^{i+Q} x̃_q / (2Q+1), zero padding outside the sentence
        values = functional.avg_pool1d(
            keys.transpose(1, 2), width, stride=1, padding=self.window, count_include_pad=True
        ).transpose(1, 2)  # (B, M, H)
        return EncoderMemory(mask, {"keys": keys, "values": values})

    def read(
        self, memory: EncoderMemory, example: torch.Tensor, ctx: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        rows, steps, c = ctx.shape
        query = self.align(self.context_embed(ctx).reshape(rows, steps, -1))  # (R, T, H): P ỹ'_c
        keys, values = memory.tensors["keys"][example], memory.tensors["values"][example]  # (R, M, H)
        scores = torch.einsum("rth,rmh->rtm", query, keys)  # (R, T, M): x̃ P ỹ'_c
        scores = scores.masked_fill(~memory.mask[example].unsqueeze(1), -math.inf)
        attn = torch.softmax(scores, dim=-1)  # p
        return torch.einsum("rtm,rmh->rth", attn, values), attn
