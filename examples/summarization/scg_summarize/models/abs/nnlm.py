"""The ABS model: a feed-forward NNLM decoder over a window of C output words, plus an encoder.

Rush, Chopra & Weston (2015), Section 3.1:

    p(y_{i+1} | y_c, x) ∝ exp(V h + W enc(x, y_c)),   h = tanh(U ỹ_c),
    ỹ_c = [E y_{i-C+1}; ...; E y_i]                    (the last C words, <s>-padded)

with E ``(V_y, D)``, U ``(H, C D)``, V and W ``(V_y, H)`` (all with biases) and enc one of
:mod:`.encoders`. The window ``y_c`` is all the model remembers of the output so far (a Markov
model of order C), which is what makes hypothesis recombination exact in beam search.

Training is teacher-forced negative log-likelihood (Section 3.3): :meth:`AbsModel.forward`
scores every position of a batch of targets at once. Input and output vocabularies may differ
(V_x and V_y, :attr:`~.config.AbsFamilyConfig.src_vocab` / ``tgt_vocab``); id 0 is ``<pad>`` in
both and :data:`BOS` pads the window. The sizes are the family's configuration
(:class:`~.config.AbsFamilyConfig`: D = ``emb_dim``, H = ``hidden``, C = ``abs_context``,
L = ``abs_layers``, Q = ``abs_window``), and the encoder is the one ``abs_encoder`` names.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

from .config import ABS_ENCODERS, AbsFamilyConfig
from .encoders import AbsEncoder, AttentionEncoder, BowEncoder, ConvEncoder, EncoderMemory, NoEncoder

__all__ = ["BOS", "EMBEDDING_STD", "AbsModel", "context_windows"]


#: ``<s>``, the id that pads the window (an output id: the specials 0-3 are the corpus's in V_x and V_y)
BOS = 2
#: the standard deviation of the embeddings' initialization N(0, 0.05²) (E, F, G)
EMBEDDING_STD = 0.05


def context_windows(tgt: torch.Tensor, context: int, bos: int) -> torch.Tensor:
    """The window y_c before every target position.

    Args:
        tgt: long ``(B, T)``, ``<s> y_1 .. y_N </s>`` (padded after).
        context: C.
        bos: the ``<s>`` id padding the window on the left.

    Returns:
        long ``(B, T - 1, C)``: row ``t`` holds the C words ending at ``tgt[:, t]``, the context
        of the prediction of ``tgt[:, t + 1]``.
    """
    padded = functional.pad(tgt[:, :-1], (context - 1, 0), value=bos)  # (B, T - 1 + C - 1)
    return padded.unfold(1, context, 1)  # (B, T - 1, C)


class AbsModel(nn.Module):
    """NNLM decoder + encoder (see the module docstring)."""

    def __init__(self, config: AbsFamilyConfig) -> None:
        super().__init__()
        self.config = config
        vx, vy, D, H, C = config.src_vocab, config.tgt_vocab, config.emb_dim, config.hidden, config.abs_context
        self.embed = nn.Embedding(vy, D, padding_idx=0)  # E
        self.hidden_layer = nn.Linear(C * D, H)  # U
        self.out_lm = nn.Linear(H, vy)  # V
        self.encoder: AbsEncoder
        match config.abs_encoder:
            case "none":
                self.encoder = NoEncoder(H)
            case "bow":
                self.encoder = BowEncoder(vx, H)
            case "conv":
                self.encoder = ConvEncoder(vx, H, layers=config.abs_layers, window=config.abs_window)
            case "attention":
                self.encoder = AttentionEncoder(vx, vy, H, D, C, window=config.abs_window)
            case other:
                raise ValueError(f"model.abs_encoder must be one of {ABS_ENCODERS}, got {other!r}")
        self.out_enc = nn.Linear(H, vy) if config.abs_encoder != "none" else None  # W
        for emb in self.embeddings():
            nn.init.normal_(emb.weight, 0.0, EMBEDDING_STD)
            with torch.no_grad():
                emb.weight[0].zero_()

    def embeddings(self) -> list[nn.Embedding]:
        """The lookup tables (E, and F and G when present): renormalized after each epoch."""
        return [m for m in self.modules() if isinstance(m, nn.Embedding)]

    @torch.no_grad()
    def renormalize_embeddings(self, max_norm: float) -> int:
        """Scale every embedding row longer than ``max_norm`` back to that norm (the max-norm
        constraint of Hinton et al. 2012, applied after each epoch); returns the rows changed."""
        changed = 0
        for emb in self.embeddings():
            norms = emb.weight.norm(dim=1, keepdim=True)  # (V, 1)
            over = norms > max_norm
            changed += int(over.sum())
            emb.weight.mul_(torch.where(over, max_norm / norms.clamp(min=1e-12), torch.ones_like(norms)))
        return changed

    def encode(self, src: torch.Tensor, mask: torch.Tensor) -> EncoderMemory:
        """The per-example encoder memory of inputs ``(B, M)``."""
        return self.encoder.memory(src, mask)

    def features(
        self, memory: EncoderMemory, example: torch.Tensor, ctx: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """``h = tanh(U ỹ_c)`` ``(R, T, H)``, ``enc(x, y_c)`` ``(R, T, H)`` (None for the plain
        NNLM) and the attention ``(R, T, M)`` (None unless the attention encoder) for windows
        ``ctx`` ``(R, T, C)`` of rows of examples ``example`` ``(R,)``."""
        rows, steps, c = ctx.shape
        if c != self.config.abs_context:
            raise ValueError(f"context windows have {c} words, the model's C is {self.config.abs_context}")
        h = torch.tanh(self.hidden_layer(self.embed(ctx).reshape(rows, steps, -1)))  # (R, T, H)
        if self.out_enc is None:
            return h, None, None
        enc, attn = self.encoder.read(memory, example, ctx)
        return h, enc, attn

    def logits(
        self, memory: EncoderMemory, example: torch.Tensor, ctx: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Unnormalized scores ``V h + W enc(x, y_c)`` ``(R, T, V_y)`` for windows ``ctx``
        ``(R, T, C)`` of rows of examples ``example`` ``(R,)``; and the attention ``(R, T, M)``."""
        h, enc, attn = self.features(memory, example, ctx)
        scores = self.out_lm(h)
        if enc is not None and self.out_enc is not None:
            scores = scores + self.out_enc(enc)
        return scores, attn

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Teacher-forced log-probabilities ``(B, T - 1, V_y)`` of ``tgt[:, 1:]``
        (``tgt`` ``(B, T)`` = ``<s> y </s>``, inputs ``(B, M)``)."""
        memory = self.encode(src, src_mask)
        ctx = context_windows(tgt, self.config.abs_context, BOS)
        scores, _ = self.logits(memory, torch.arange(src.shape[0], device=src.device), ctx)
        return torch.log_softmax(scores, dim=-1)

    def nll(self, src: torch.Tensor, src_mask: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Summed negative log-likelihood of the real target words (``</s>`` included, ``<pad>``
        excluded) and their count."""
        log_probs = self.forward(src, src_mask, tgt)
        gold = tgt[:, 1:]
        real = gold != 0
        picked = log_probs.gather(2, gold.unsqueeze(-1)).squeeze(-1)  # (B, T - 1)
        return -(picked * real).sum(), int(real.sum())
