"""The ABS model: a feed-forward NNLM decoder over a window of C output words, plus an encoder.

Rush, Chopra & Weston (2015), Section 3.1:

    p(y_{i+1} | y_c, x) ∝ exp(V h + W enc(x, y_c)),   h = tanh(U ỹ_c),
    ỹ_c = [E y_{i-C+1}; ...; E y_i]                    (the last C words, <s>-padded)

with E ``(V_y, D)``, U ``(H, C D)``, V and W ``(V_y, H)`` (all with biases) and enc one of
:mod:`.encoders`. The window ``y_c`` is all the model remembers of the output so far (a Markov
model of order C), which is what makes hypothesis recombination exact in beam search.

Training is teacher-forced negative log-likelihood (Section 3.3): :meth:`AbsModel.forward`
scores every position of a batch of targets at once. Input and output vocabularies may differ
(``src_vocab``/``tgt_vocab``); id 0 is ``<pad>`` in both and ``bos`` pads the window.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional

from .encoders import ENCODERS, AbsEncoder, EncoderMemory, make_encoder

__all__ = ["AbsConfig", "AbsModel", "context_windows"]


@dataclass(frozen=True)
class AbsConfig:
    """ABS sizes (paper: D = 200, H = 400, C = 5, L = 3, Q = 2).

    Attributes:
        src_vocab: input vocabulary size V_x.
        tgt_vocab: output (title) vocabulary size V_y.
        encoder: ``none`` (NNLM), ``bow``, ``conv`` or ``attention`` (ABS).
        embed: D, the output word embedding size (E and G).
        hidden: H, the hidden layer and encoder size.
        context: C, the window of previous output words.
        layers: L, convolution layers of the ``conv`` encoder.
        window: Q, the convolution half-width (``conv``) and smoothing half-width (``attention``).
        bos: the ``<s>`` id that pads the window.
        init_std: standard deviation of the embedding initialization.
    """

    src_vocab: int
    tgt_vocab: int
    encoder: str = "attention"
    embed: int = 200
    hidden: int = 400
    context: int = 5
    layers: int = 3
    window: int = 2
    bos: int = 2
    init_std: float = 0.05

    def __post_init__(self) -> None:
        if self.encoder not in ENCODERS:
            raise ValueError(f"AbsConfig.encoder must be one of {ENCODERS}, got {self.encoder!r}")
        for name in ("src_vocab", "tgt_vocab", "embed", "hidden", "context"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"AbsConfig.{name} must be positive, got {getattr(self, name)!r}")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


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

    def __init__(self, config: AbsConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.embed = nn.Embedding(c.tgt_vocab, c.embed, padding_idx=0)  # E
        self.hidden_layer = nn.Linear(c.context * c.embed, c.hidden)  # U
        self.out_lm = nn.Linear(c.hidden, c.tgt_vocab)  # V
        self.encoder: AbsEncoder = make_encoder(
            c.encoder,
            src_vocab=c.src_vocab,
            tgt_vocab=c.tgt_vocab,
            hidden=c.hidden,
            embed=c.embed,
            context=c.context,
            layers=c.layers,
            window=c.window,
        )
        self.out_enc = nn.Linear(c.hidden, c.tgt_vocab) if c.encoder != "none" else None  # W
        for emb in self.embeddings():
            nn.init.normal_(emb.weight, 0.0, c.init_std)
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
        if c != self.config.context:
            raise ValueError(f"context windows have {c} words, the model's C is {self.config.context}")
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
        ctx = context_windows(tgt, self.config.context, self.config.bos)
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
