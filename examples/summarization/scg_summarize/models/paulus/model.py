"""Paulus, Xiong & Socher (2018), "A Deep Reinforced Model for Abstractive Summarization": the
``paulus`` family.

A bidirectional LSTM encoder h^e_i over the document's (at most 800) words, an LSTM decoder
h^d_t fed the previous word's embedding, and at every step t (1-based in the formulas):

* **intra-temporal attention** over the input (Section 2.1): bilinear scores
  e_ti = h^dᵀ_t W^e_attn h^e_i, penalized by the attention the word already received,

      e'_ti = exp(e_ti)                          (t = 1)
      e'_ti = exp(e_ti) / Σ_{j<t} exp(e_ji)       (t > 1),     α^e_ti = e'_ti / Σ_j e'_tj,

  computed in log space: log e'_ti = e_ti − S_{t−1,i} with the running log-sum
  S_ti = logaddexp(S_{t−1,i}, e_ti) kept in the decoder state (``temporal``), so neither
  exp(e) nor the sum overflows; the context is c^e_t = Σ_i α^e_ti h^e_i;
* **intra-decoder attention** (Section 2.2): e^d_tt' = h^dᵀ_t W^d_attn h^d_t' over the past
  decoder states t' < t (kept in the state, ``past``), c^d_t = Σ_t' α^d_tt' h^d_t', c^d_1 = 0;
* **token generation and pointer** (Section 2.3): with f_t = [h^d_t; c^e_t; c^d_t],

      p(y_t | u_t = 0) = softmax(W_out f_t + b_out),        p(y_t = x_i | u_t = 1) = α^e_ti,
      p(u_t = 1) = σ(W_u f_t + b_u),

  mixed in log space over the extended vocabulary (:mod:`.extended_vocab`): copying an
  out-of-target-vocabulary source word puts the mass on that word;
* **shared weights** (Section 2.4): W_out = tanh(W_emb W_proj), W_emb the target embedding
  ``(V_t, E)`` and W_proj ``(E, 3H)``.

The parts are :class:`TemporalAttention`, :class:`IntraDecoderAttention`,
:class:`PointerSwitchGenerator` and :class:`PaulusDecoder` (built by :class:`PaulusSummarizer`) and the
state is a :class:`PaulusState` (a :class:`~.decoder.DecoderState` with two more fields), which
beam search reorders without knowing them (:mod:`.rows`). Training (teacher forcing with fed
samples, self-critical RL, the mixed objective) is in :mod:`scg_summarize.train.objectives`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ...data.batching import SourceLengths
from ..common.attention import AttentionOut, Memory, Mode
from ..common.decoder import DecoderState
from ..common.encoders import FlatWordEncoder
from ..common.extended_vocab import extend_source, extend_targets, to_corpus, to_input
from ..common.generator import Generator
from ..family import SummarizerFamily, SummarizerOutput, embedding_tables, uniform_init
from ..registry import FAMILIES
from .config import PaulusConfig

__all__ = [
    "IntraDecoderAttention",
    "PaulusState",
    "PaulusSummarizer",
    "PointerSwitchGenerator",
    "TemporalAttention",
    "temporal_scores",
]


@dataclass
class PaulusState(DecoderState):
    """The decoder state plus the intra-attentions' memories.

    Attributes:
        temporal: ``(B, L)`` S_{t−1,i} = log Σ_{j<t} exp(e_ji), or None before the first step.
        past: ``(B, t−1, H)`` the past decoder states h^d_1..h^d_{t−1}.
    """

    temporal: torch.Tensor | None = None
    past: torch.Tensor | None = None


def temporal_scores(scores: torch.Tensor, log_sum: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """log e'_t ``(B, L)`` and the new running log-sum S_t from the raw scores e_t ``(B, L)``
    and S_{t−1} (None at t = 1). Finite wherever the scores are."""
    if log_sum is None:
        return scores, scores
    return scores - log_sum, torch.logaddexp(log_sum, scores)


class TemporalAttention(nn.Module):
    """Bilinear attention over the encoder states, intra-temporal when ``temporal``.

    ``forward(words (B, L, H_e), mask (B, L), h (B, H_d), log_sum) -> (α (B, L), c^e (B, H_e), S)``.
    """

    def __init__(self, dec_hidden: int, enc_hidden: int, temporal: bool = True) -> None:
        super().__init__()
        self.w_attn = nn.Linear(dec_hidden, enc_hidden, bias=False)  # W^e_attn (applied to h^d)
        self.temporal = temporal

    def forward(
        self, words: torch.Tensor, mask: torch.Tensor, h: torch.Tensor, log_sum: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        scores = torch.bmm(words, self.w_attn(h).unsqueeze(2)).squeeze(2)  # (B, L)  e_ti (0 at padding)
        if self.temporal:
            logits, new_sum = temporal_scores(scores, log_sum)
        else:
            logits, new_sum = scores, None
        logits = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
        alpha = torch.softmax(logits, dim=1) * mask.to(logits.dtype)  # (B, L)
        context = torch.bmm(alpha.unsqueeze(1), words).squeeze(1)  # (B, H_e)
        return alpha, context, new_sum


class IntraDecoderAttention(nn.Module):
    """``forward(past (B, t−1, H) or None, h (B, H)) -> c^d_t (B, H)`` (zero when t = 1)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.w_attn = nn.Linear(hidden, hidden, bias=False)  # W^d_attn

    def forward(self, past: torch.Tensor | None, h: torch.Tensor) -> torch.Tensor:
        if past is None or past.shape[1] == 0:
            return torch.zeros_like(h)
        scores = torch.bmm(past, self.w_attn(h).unsqueeze(2)).squeeze(2)  # (B, t-1)
        alpha = torch.softmax(scores, dim=1)
        return torch.bmm(alpha.unsqueeze(1), past).squeeze(1)  # (B, H)


class PointerSwitchGenerator(Generator):
    """p(y_t) = p(u=0) softmax(W_out f_t + b_out) + p(u=1) Σ_{i: x_i = y} α^e_ti, in log space.

    Args:
        features: the size of f_t = [h^d; c^e; c^d].
        vocab_size: V_t.
        embedding: W_emb ``(≥ V_t, E)``: with it, W_out = tanh(W_emb[:V_t] W_proj) (tied);
            without, a free ``nn.Linear``.
    """

    copies = True

    def __init__(self, features: int, vocab_size: int, embedding: nn.Embedding | None = None) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.embedding = [embedding]  # a list: not a submodule (its owner registers it)
        if embedding is not None:
            self.w_proj = nn.Parameter(torch.empty(embedding.embedding_dim, features))  # W_proj (E, 3H)
            nn.init.xavier_uniform_(self.w_proj)
            self.bias = nn.Parameter(torch.zeros(vocab_size))  # b_out
        else:
            self.proj = nn.Linear(features, vocab_size)
        self.switch = nn.Linear(features, 1)  # W_u, b_u
        self._fixed: torch.Tensor | None = None
        self._eval_cache: tuple[Any, torch.Tensor] | None = None

    @property
    def tied(self) -> bool:
        return self.embedding[0] is not None

    def output_layer(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        emb = self.embedding[0]
        if emb is None:
            return self.proj.weight, self.proj.bias
        if self._fixed is not None:  # inside fixed_output(): computed once per forward
            return self._fixed, self.bias
        if torch.is_grad_enabled():
            return torch.tanh(emb.weight[: self.vocab_size] @ self.w_proj), self.bias  # (V_t, 3H)
        # no gradient (decoding, one call per word): reuse while the parameters are unchanged
        key = tuple((p.data_ptr(), p._version, p.dtype) for p in (emb.weight, self.w_proj))
        if self._eval_cache is None or self._eval_cache[0] != key:
            self._eval_cache = (key, torch.tanh(emb.weight[: self.vocab_size] @ self.w_proj))
        return self._eval_cache[1], self.bias

    @contextlib.contextmanager
    def fixed_output(self) -> Iterator[None]:
        """Compute the tied W_out = tanh(W_emb W_proj) once for all the steps of one forward pass
        (a (V_t × E) · (E × 3H) product per step would dominate a small model's time); the
        gradient still flows to W_emb and W_proj through the one product."""
        if self._fixed is not None or not self.tied:
            yield
            return
        self._fixed = self.output_layer()[0]
        try:
            yield
        finally:
            self._fixed = None

    def forward(self, out: torch.Tensor, att: AttentionOut | None, memory: Memory | None) -> torch.Tensor:
        if att is None or memory is None or att.read_weights is None:
            raise ValueError("PointerSwitchGenerator needs the step's attention weights and the memory")
        ext_ids = memory.extra["ext_ids"]  # (B, M, N)
        size = self.vocab_size + memory.extra["oov"].shape[1]
        return self.mix(out, att.read_weights.flatten(1), ext_ids.flatten(1), size)

    def mix(self, features: torch.Tensor, alpha: torch.Tensor, ext_ids: torch.Tensor, size: int) -> torch.Tensor:
        """log p ``(B, size)`` from f_t ``(B, F)``, the pointer weights α ``(B, L)`` over source
        positions and their extended ids ``(B, L)``."""
        z = self.switch(features)  # (B, 1)  logit of p(u_t = 1)
        gen = F.logsigmoid(-z) + F.log_softmax(self.logits(features), dim=-1)  # (B, V_t)
        tiny = torch.finfo(gen.dtype).tiny
        if size > self.vocab_size:  # the generator puts (almost) no mass on source-only words
            gen = torch.cat([gen, gen.new_full((gen.shape[0], size - self.vocab_size), math.log(tiny))], dim=1)
        copy = alpha.new_zeros(alpha.shape[0], size).scatter_add(1, ext_ids, alpha)  # (B, V_t + K)
        cop = F.logsigmoid(z) + torch.log(copy.clamp_min(tiny))
        return torch.logaddexp(gen, cop)


class PaulusDecoder(nn.Module):
    """The LSTM decoder with the two intra-attentions (one step: :meth:`step`)."""

    def __init__(self, emb_dim: int, hidden: int, intra_temporal: bool, intra_decoder: bool) -> None:
        super().__init__()
        self.hidden = hidden
        self.cell = nn.LSTMCell(emb_dim, hidden)
        self.attention = TemporalAttention(hidden, hidden, temporal=intra_temporal)
        self.intra = IntraDecoderAttention(hidden) if intra_decoder else None

    def step(
        self, state: PaulusState, y_emb: torch.Tensor, memory: Memory
    ) -> tuple[torch.Tensor, PaulusState, AttentionOut]:
        B, M, N, H = memory.words.shape
        h, c = self.cell(y_emb, (state.h[0], state.c[0]))  # (B, H)
        alpha, ctx_e, temporal = self.attention(
            memory.words.reshape(B, M * N, H), memory.word_mask.reshape(B, M * N), h, state.temporal
        )
        ctx_d = self.intra(state.past, h) if self.intra is not None else torch.zeros_like(h)
        past = h.unsqueeze(1) if state.past is None else torch.cat([state.past, h.unsqueeze(1)], dim=1)
        features = torch.cat([h, ctx_e, ctx_d], dim=1)  # (B, 3H)  f_t
        weights = alpha.view(B, M, N)
        per_chunk = weights.sum(-1)  # (B, M)
        att = AttentionOut(
            ctx_e, per_chunk, per_chunk, memory.chunk_sizes.sum(1), read_weights=weights, word_probs=weights
        )
        return features, replace(state, h=[h], c=[c], feed=h, temporal=temporal, past=past), att


class PaulusSummarizer(SummarizerFamily[PaulusConfig, PaulusState]):
    """The ``paulus`` family (see the module docstring); sizes from :class:`PaulusConfig`:
    ``emb_dim`` (100), ``hidden`` (400 = 2 × 200 for the bidirectional encoder, and the decoder),
    ``vocab_size`` (input, 150k) and ``tgt_vocab_size`` (output, 50k)."""

    has_own_output_space = True
    untraceable = (
        "its pointer's extended vocabulary is the batch's own out-of-vocabulary source words "
        "(extend_source: torch.unique, a size read from the device)"
    )
    generator: PointerSwitchGenerator

    def __init__(self, config: PaulusConfig) -> None:
        super().__init__()
        if config.vocab_size < 5:
            raise ValueError("model.vocab_size must be set (the corpus vocabulary size)")
        self.config = config
        V, Vt, E, H = config.vocab_size, config.target_vocab, config.emb_dim, config.hidden
        self.target_vocab = Vt
        self.src_embedding = nn.Embedding(V, E, padding_idx=0)
        self.tgt_embedding = self.src_embedding if config.share_embeddings else nn.Embedding(Vt, E, padding_idx=0)
        self.word_encoder = FlatWordEncoder(E, H, config.enc_layers, config.dropout, True)
        self.decoder = PaulusDecoder(E, H, config.intra_temporal, config.intra_decoder)
        self.dropout = nn.Dropout(config.dropout)
        self.generator = PointerSwitchGenerator(3 * H, Vt, self.tgt_embedding if config.tie_output else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform in [−r, r] (r = ``init_range``; word embeddings N(0, ``emb_init_std``²) if set),
        padding embeddings zero (`uniform_init`)."""
        uniform_init(self, self.config, self.word_embeddings())

    def word_embeddings(self) -> list[nn.Embedding]:
        """The source and target embeddings (once when shared; the target's covers the first
        ``tgt_vocab_size`` corpus words)."""
        return embedding_tables(self.src_embedding, self.tgt_embedding)

    # ------------------------------------------------------------------ the family interface
    def encode(
        self, src: torch.Tensor, src_mask: torch.Tensor, lengths: SourceLengths | None = None
    ) -> tuple[Memory, tuple[torch.Tensor, torch.Tensor]]:
        """Memory (word states on the ``(B, M, N)`` grid, extended ids) and the initial ``(h, c)``."""
        emb = self.src_embedding(src) * src_mask.unsqueeze(-1).to(self.src_embedding.weight.dtype)  # (B, M, N, E)
        enc = self.word_encoder(self.dropout(emb), src_mask, lengths)  # (B, M, N, H)
        ext, oov = extend_source(src, src_mask, self.target_vocab)
        B = src.shape[0]
        extra = {"ext_ids": ext, "oov": oov.unsqueeze(0).expand(B, -1)}  # (B, M, N), (B, K)
        return Memory.build(enc.states, src_mask, None, src, extra), enc.final

    def init_state(self, memory: Memory, final: tuple[torch.Tensor, torch.Tensor] | None) -> PaulusState:
        B, H = memory.words.shape[0], self.config.hidden
        h = final[0][-1] if final is not None else memory.words.new_zeros(B, H)
        c = memory.words.new_zeros(B, H)
        return PaulusState([h], [c], h, {}, None, memory.words.new_zeros(B, 0, H))

    def advance(
        self, state: PaulusState, prev_tokens: torch.Tensor, memory: Memory, t: int, mode: Mode
    ) -> tuple[torch.Tensor, PaulusState, AttentionOut]:
        """One step from the previous words (corpus or extended ids; unknown ones read as ``<unk>``)."""
        y_emb = self.dropout(self.tgt_embedding(to_input(prev_tokens, self.target_vocab)))
        return self.decoder.step(state, y_emb, memory)

    def step_log_probs(self, out: torch.Tensor, att: AttentionOut, memory: Memory) -> torch.Tensor:
        """log p(y_t) ``(B, V_t + K)`` over the extended vocabulary."""
        logp: torch.Tensor = self.generator(out, att, memory)
        return logp

    def corpus_ids(self, tokens: torch.Tensor, memory: Memory) -> torch.Tensor:
        """Extended ids ``(B, L)`` -> corpus ids."""
        return to_corpus(tokens, memory.extra["oov"], self.target_vocab)

    def scored_targets(self, tgt: torch.Tensor, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """The corpus ids the model is scored on (as in training, :func:`extend_targets`): a reference
        word outside V_t that is not in its own source is ``<unk>``, so teacher-forced perplexity
        stays finite. ``(B, T)`` -> ``(B, T)``."""
        _, oov = extend_source(src, src_mask, self.target_vocab)
        ext = extend_targets(tgt, src, src_mask, oov, self.target_vocab)
        return torch.where(ext >= self.target_vocab, tgt, ext)

    def corpus_log_probs(self, log_probs: torch.Tensor, memory: Memory) -> torch.Tensor:
        """``(R, V_t + K)`` extended log-probabilities -> ``(R, V)`` over corpus ids (decoding)."""
        V, Vt = self.config.vocab_size, self.target_vocab
        full = log_probs.new_full((log_probs.shape[0], V), float("-inf"))
        full[:, :Vt] = log_probs[:, :Vt]
        oov = memory.extra["oov"]
        if oov.shape[1]:
            full.scatter_(1, oov, log_probs[:, Vt:])
        return full

    def forward(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor,
        tgt: torch.Tensor,
        tgt_mask: torch.Tensor,
        mode: Mode = "soft",
        task: str = "teacher",
        max_len: int = 0,
        *,
        lengths: SourceLengths | None = None,
    ) -> Any:
        """`SummarizerFamily.forward` with the tied W_out = tanh(W_emb W_proj) computed once."""
        with self.generator.fixed_output():
            return super().forward(src, src_mask, tgt, tgt_mask, mode, task, max_len, lengths=lengths)

    def teacher_forcing(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor,
        tgt: torch.Tensor,
        tgt_mask: torch.Tensor,
        mode: Mode,
        lengths: SourceLengths | None = None,
    ) -> SummarizerOutput:
        """NLL per step over the extended vocabulary; in training each step after the first is fed,
        with probability ``feed_sample_prob``, a word sampled from the previous step's distribution."""
        memory, final = self.encode(src, src_mask, lengths)
        state = self.init_state(memory, final)
        oov = memory.extra["oov"][0] if memory.extra["oov"].shape[0] else memory.extra["oov"].new_zeros(0)
        y_out = extend_targets(tgt[:, 1:], src, src_mask, oov, self.target_vocab)  # (B, T-1)
        out_mask = tgt_mask[:, 1:]
        feed = self.config.feed_sample_prob if self.training else 0.0
        prev = tgt[:, 0]
        nll: list[torch.Tensor] = []
        atts: list[AttentionOut] = []
        for t in range(y_out.shape[1]):
            logp, state, att = self.step(state, prev, memory, t, mode)  # (B, V_t + K)
            atts.append(att)
            nll.append(-logp.gather(1, y_out[:, t : t + 1]).squeeze(1) * out_mask[:, t].to(logp.dtype))
            prev = tgt[:, t + 1]
            if feed > 0:
                with torch.no_grad():
                    cdf = logp.detach().float().exp().cumsum(1)  # (B, V')  inverse-CDF sampling
                    u = torch.rand(prev.shape[0], 1, device=prev.device) * cdf[:, -1:]
                    sampled = torch.searchsorted(cdf, u).squeeze(1).clamp(max=cdf.shape[1] - 1)  # (B,)
                    coin = torch.rand(prev.shape, device=prev.device) < feed
                prev = torch.where(coin, sampled, prev)
        return SummarizerOutput(nll, out_mask, atts)


FAMILIES.register("paulus", PaulusSummarizer, config=PaulusConfig)
