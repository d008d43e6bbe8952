"""Generators: the output distribution p(y_t | ·) of a decoder step.

A generator maps the decoder output c_t ``(B, H)`` and the step's :class:`~.attention.AttentionOut`
to log-probabilities over the vocabulary ``(B, V)``. Two are provided:

* :class:`SoftmaxGenerator` (Ling & Rush 2017, eq. 2): p(y_t) = softmax(W_out c_t + b_out).
* :class:`CopyGenerator`, a pointer-generator mixture (See et al. 2017, Section 2.2; Gu et al.
  2016): a gate g_t = σ(w_gᵀ[c̃_t; c_t] + b_g) mixes generating with copying a source word
  in proportion to the attention the step gave it,

      p(w) = g_t · softmax(W_out c_t + b_out)_w  +  (1 − g_t) · Σ_{ij read : x_ij = w} α_ij.

  The copy half sums only over the words the attention *read*: for C2F those of the sampled
  chunks, so the coarse draw ℓ_t influences the step's cost through the copy distribution too
  (scg follows that data flow, see ``scg.influenced_by`` for the cases it cannot). Source words
  outside the vocabulary are copied as ``<unk>`` (no extended vocabulary; decoding's
  ``--unk replace`` puts the attended source word back).

Both compute the mixture in log space, ``log p = logaddexp(log g + log softmax, log(1 − g) +
log copy)``, so that neither half underflows.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import AttentionOut, Memory

__all__ = ["CopyGenerator", "Generator", "SoftmaxGenerator", "copy_distribution"]


class Generator(nn.Module):
    """Interface: ``forward(out (B, H), att, memory) -> log p (B, V)``.

    ``logits(out)`` is the vocabulary half's W_out c_t + b_out ``(..., V)`` and
    ``output_layer()`` its ``(weight (V, H), bias (V,) or None)``, whatever computes them (an
    ``nn.Linear`` here, tied weights ``tanh(W_emb W_proj)`` in :mod:`.paulus`): callers never
    reach into a module. ``copies`` says whether the distribution depends on the attention
    (then the output projection cannot be fused with the top-k of beam search, and every step
    needs its :class:`AttentionOut`).
    """

    proj: nn.Linear
    copies: bool = False

    def output_layer(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """W_out ``(V, H)`` and b_out ``(V,)`` (None: no bias)."""
        return self.proj.weight, self.proj.bias

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        """W_out c_t + b_out ``(..., V)`` from decoder outputs ``(..., H)``."""
        weight, bias = self.output_layer()
        return F.linear(out, weight, bias)

    def forward(self, out: torch.Tensor, att: AttentionOut | None, memory: Memory | None) -> torch.Tensor:
        raise NotImplementedError  # pragma: no cover


class SoftmaxGenerator(Generator):
    """p(y_t) = softmax(W_out c_t + b_out) (the paper's generator)."""

    def __init__(self, hidden: int, vocab_size: int) -> None:
        super().__init__()
        self.proj = nn.Linear(hidden, vocab_size)

    def forward(self, out: torch.Tensor, att: AttentionOut | None = None, memory: Memory | None = None) -> torch.Tensor:
        return F.log_softmax(self.logits(out), dim=-1)  # (..., V)


def copy_distribution(att: AttentionOut, memory: Memory, vocab_size: int) -> torch.Tensor:
    """Σ_{ij read : x_ij = w} α_ij as a ``(B, V)`` tensor (rows sum to the attention's total mass).

    Args:
        att: the step's attention; ``att.read_weights`` ``(B, K, N)`` over the chunks
            ``att.selected`` ``(B, K)`` (or all M chunks when ``selected`` is None).
        memory: the encoded source with its ``ids`` ``(B, M, N)``.
        vocab_size: V.
    """
    if att.read_weights is None:
        raise ValueError("a copying generator needs an attention that reports read_weights")
    if memory.ids is None:
        raise ValueError("a copying generator needs the source ids in the memory (Memory.ids)")
    weights = att.read_weights  # (B, K, N)
    ids = memory.ids  # (B, M, N)
    if att.selected is not None:
        B, K = att.selected.shape
        N = ids.shape[2]
        ids = ids.gather(1, att.selected.view(B, K, 1).expand(B, K, N))  # (B, K, N)
    dist = weights.new_zeros(weights.shape[0], vocab_size)  # (B, V)
    return dist.scatter_add(1, ids.flatten(1), weights.flatten(1))


class CopyGenerator(Generator):
    """The pointer-generator mixture of the module docstring.

    Args:
        hidden: H (the size of both c̃_t and c_t).
        vocab_size: V.
    """

    copies = True

    def __init__(self, hidden: int, vocab_size: int) -> None:
        super().__init__()
        self.proj = nn.Linear(hidden, vocab_size)
        self.gate = nn.Linear(2 * hidden, 1)  # w_g, b_g

    def gate_logit(self, out: torch.Tensor, att: AttentionOut) -> torch.Tensor:
        """The gate's logit ``(B, 1)``: g_t = σ(·)."""
        logit: torch.Tensor = self.gate(torch.cat([att.context, out], dim=-1))  # (B, 1)
        return logit

    def forward(self, out: torch.Tensor, att: AttentionOut | None, memory: Memory | None) -> torch.Tensor:
        if att is None or memory is None:
            raise ValueError("CopyGenerator needs the step's attention and the memory")
        logits = self.logits(out)  # (B, V)
        V = logits.shape[-1]
        z = self.gate_logit(out, att)  # (B, 1)
        gen = F.logsigmoid(z) + F.log_softmax(logits, dim=-1)  # (B, V)  log g + log p_vocab
        copy = copy_distribution(att, memory, V)  # (B, V)
        tiny = torch.finfo(copy.dtype).tiny  # log 0 -> a finite floor, so that no gradient is NaN
        cop = F.logsigmoid(-z) + torch.log(copy.clamp_min(tiny))  # (B, V)  log(1 - g) + log p_copy
        log_p: torch.Tensor = torch.logaddexp(gen, cop)  # (B, V)
        return log_p
