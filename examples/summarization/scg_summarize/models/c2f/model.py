"""The summarizer: embeddings + word encoder + chunk encoder + attentional decoder + generator.

[`C2FSummarizer`][scg_summarize.models.C2FSummarizer] composes the parts of ``common/encoders``, `.chunk_encoders`,
``common/attention`` / `.coarse_to_fine` and ``common/decoder`` according to a `C2FConfig`. Its
[`forward`][scg_summarize.models.C2FSummarizer.forward] runs teacher forcing over a batch and returns the negative
log-likelihood of every target step separately (``task="teacher"``),

    nll_t = −log p(y_{t+1} | y_≤t, x)     (B,) for t = 0 .. T−2,

because the C2F objective makes each of them a cost node at step t (it is both the NLL trained
by backpropagation and −r_t, the reward of the chunks drawn at steps ≤ t; see
`scg_summarize.train.objective`); with ``task="rollout"`` it generates its own summary
as scg word nodes (``common/rollout``, self-critical training). It is the ``c2f`` family
(a `SummarizerFamily`).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from ...data.batching import SourceLengths
from ...kernels import collect_word_grads
from ..common.attention import (
    AttentionOut,
    FlatAttention,
    HierAttention,
    Memory,
    Mode,
    SourceAttention,
    autocast_states,
)
from ..common.decoder import Decoder, DecoderState
from ..common.encoders import ChunkedWordEncoder, FlatWordEncoder, WordEncoder
from ..common.generator import CopyGenerator, Generator, SoftmaxGenerator
from ..family import SummarizerFamily, SummarizerOutput, embedding_tables, uniform_init
from ..registry import FAMILIES
from .chunk_encoders import ChunkEncoder, build_chunk_encoder
from .coarse_to_fine import C2FAttention
from .config import C2FConfig

__all__ = ["C2FSummarizer"]


ModuleT = TypeVar("ModuleT", bound=nn.Module)


def _with_child(module: ModuleT, name: str, child: nn.Module) -> ModuleT:
    """A shallow copy of ``module`` (the same parameters, buffers and other children) whose child
    ``name`` is ``child``; ``module`` is unchanged."""
    view = copy.copy(module)
    view._modules = {**module._modules, name: child}  # its own table of children
    return view


def _rename_old_generator_keys(state: dict[str, Any], prefix: str, *args: Any) -> None:
    """Checkpoints written before generators were modules stored W_out as ``generator.weight``
    and ``generator.bias``; they are ``generator.proj.*`` now."""
    for name in ("weight", "bias"):
        old, new = f"{prefix}generator.{name}", f"{prefix}generator.proj.{name}"
        if old in state and new not in state:
            state[new] = state.pop(old)


class C2FSummarizer(SummarizerFamily[C2FConfig, DecoderState]):
    """Models 0-3 of Ling & Rush (2017) with every Table 1 option (see `C2FConfig`)."""

    def __init__(self, config: C2FConfig) -> None:
        super().__init__()
        if config.vocab_size < 5:
            raise ValueError("model.vocab_size must be set (the corpus vocabulary size)")
        for key in ("test_k", "multi"):  # (chunks read per step: at most the document's)
            if config.attention == "c2f" and 0 < config.num_chunks < getattr(config, key):
                raise ValueError(
                    f"model.{key} = {getattr(config, key)}, but the documents have {config.num_chunks} chunks "
                    "(model.num_chunks): at most that many can be read per step"
                )
        self.config = config
        V, E, H = config.vocab_size, config.emb_dim, config.hidden
        self.src_embedding = nn.Embedding(V, E, padding_idx=0)
        self.tgt_embedding = self.src_embedding if config.share_embeddings else nn.Embedding(V, E, padding_idx=0)
        words = ChunkedWordEncoder if config.chunked else FlatWordEncoder
        self.word_encoder: WordEncoder = words(E, H, config.enc_layers, config.dropout, config.bidirectional)
        self.chunk_encoder: ChunkEncoder | None = None
        chunk_dim = 0
        if config.hierarchical:
            self.chunk_encoder = build_chunk_encoder(
                config.chunk_encoder,
                emb_dim=E,
                vocab_size=V,
                filters=config.conv_filters,
                width=config.conv_width,
                bow_dim=config.bow_dim,
                pos=config.pos,
                num_chunks=config.num_chunks,
                pos_dim=config.pos_dim,
            )
            chunk_dim = self.chunk_encoder.out_dim
        attention: SourceAttention
        if config.attention == "c2f":  # Model 3
            attention = C2FAttention(H, H, chunk_dim, config.multi, config.test_k)
        elif config.attention == "hier":  # Model 2
            attention = HierAttention(H, H, chunk_dim)
        else:  # Models 0 and 1
            attention = FlatAttention(H, H)
        self.decoder = Decoder(E, H, config.dec_layers, config.dropout, attention, config.input_feed)
        self.generator: Generator = CopyGenerator(H, V) if config.copy else SoftmaxGenerator(H, V)
        self.reset_parameters()
        self._register_load_state_dict_pre_hook(_rename_old_generator_keys)  # type: ignore[no-untyped-call]

    # ------------------------------------------------------------------ parameters
    def reset_parameters(self) -> None:
        """Uniform in [−r, r] (r = ``init_range``; word embeddings N(0, ``emb_init_std``²) if set),
        padding embeddings zero (`uniform_init`)."""
        uniform_init(self, self.config, self.word_embeddings())

    def word_embeddings(self) -> list[nn.Embedding]:
        """The source and target embeddings (once when shared)."""
        return embedding_tables(self.src_embedding, self.tgt_embedding)

    def chunk_encoder_parameters(self) -> list[nn.Parameter]:
        """Trainable parameters of the chunk encoder (the paper trains them with lr × 0.1)."""
        if self.chunk_encoder is None:
            return []
        return [p for p in self.chunk_encoder.parameters() if p.requires_grad]

    @property
    def hard(self) -> bool:
        """Whether the model has hard (sampled) attention."""
        return self.decoder.attention.hard

    @property
    def coarse_topk(self) -> int:
        return self.config.test_k

    @property
    def reads_rows(self) -> bool:
        return isinstance(self.decoder.attention, C2FAttention)

    def word_attention(self, memory: Memory, h: torch.Tensor, att: AttentionOut) -> torch.Tensor | None:
        """α_ij ``(R, M, N)`` of every word (recomputed for display: C2F's step reads only its chunks)."""
        if att.word_probs is not None:
            return att.word_probs
        attention = self.decoder.attention
        assert isinstance(attention, (FlatAttention, HierAttention))
        scores = torch.einsum("rmnh,rh->rmn", memory.words, attention.w_word(h))  # (R, M, N)
        scores = scores.masked_fill(~memory.word_mask, float("-inf"))
        if isinstance(attention, FlatAttention):  # one softmax over all words
            return torch.softmax(scores.flatten(1), dim=1).nan_to_num(0.0).view_as(scores)
        within = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # α^w within each chunk
        weighted: torch.Tensor = within * att.chunk_weights.unsqueeze(-1)  # α^s_i α^w_ij
        return weighted

    def with_coarse_topk(self, k: int) -> C2FSummarizer:
        """A view of this model (the same parameters) whose C2F attention reads the top ``k`` chunks
        per step at test time (``model.test_k`` = ``k``); a soft model is refused unless ``k`` is 1."""
        attention = self.decoder.attention
        if not isinstance(attention, C2FAttention):
            super().with_coarse_topk(k)  # (soft attention: refused unless k is its 1)
            return self
        if k == self.config.test_k:
            return self
        if k < 1:
            raise ValueError(f"coarse_topk must be >= 1, got {k}")
        if 0 < self.config.num_chunks < k:
            raise ValueError(
                f"coarse_topk = {k}, but the model reads documents of {self.config.num_chunks} chunks "
                "(model.num_chunks): at most that many can be read per step"
            )
        decoder = _with_child(self.decoder, "attention", attention.with_test_k(k))
        view = _with_child(self, "decoder", decoder)
        view.config = replace(self.config, test_k=k)
        return view

    # ------------------------------------------------------------------ encoding
    def encode(
        self, src: torch.Tensor, src_mask: torch.Tensor, lengths: SourceLengths | None = None
    ) -> tuple[Memory, tuple[torch.Tensor, torch.Tensor] | None]:
        """Encode ``src`` ``(B, M, N)``; returns the memory and the decoder's initial state.

        With ``lengths``, the encoders read the first ``lengths.chunks`` chunks only: the chunks
        after them hold no word in any document, and get zero states (chunk vectors too: the
        attentions mask them). That they hold none is asserted on the device, without a host read
        (on a GPU a failed assertion is a device-side error)."""
        M = src.shape[1]
        used = M if lengths is None else max(min(lengths.chunks, M), 1)
        part, part_mask = (src, src_mask) if used == M else (src[:, :used], src_mask[:, :used])  # (B, used, N)
        emb = self.src_embedding(part) * part_mask.unsqueeze(-1).to(self.src_embedding.weight.dtype)  # (B, used, N, E)
        enc = self.word_encoder(emb, part_mask, lengths)  # states (B, used, N, H)
        chunks = None if self.chunk_encoder is None else self.chunk_encoder(part, part_mask, emb)  # (B, used, D)
        states = enc.states
        if used < M:  # (B, M, N, H), (B, M, D)
            torch._assert_async(
                ~src_mask[:, used:].any(),
                f"the batch's lengths {lengths} do not bound its chunks: a later one holds words",
            )
            states = F.pad(states, (0, 0, 0, 0, 0, M - used))
            chunks = None if chunks is None else F.pad(chunks, (0, 0, 0, M - used))
        # (cast to autocast's dtype before the collector, not by `Memory.build` after it: the fine reads
        # find the collector's node behind the states they are given)
        states = autocast_states(states)
        if self.hard:  # the fine reads' gradients of the states in one buffer (`kernels.word_grads`)
            states = collect_word_grads(states)
        memory = Memory.build(states, src_mask, chunks, src if self.copies else None)
        final = enc.final if self.config.decoder_init == "encoder" else None
        return memory, final

    def init_state(self, memory: Memory, final: tuple[torch.Tensor, torch.Tensor] | None) -> DecoderState:
        return self.decoder.init_state(memory.words.shape[0], final, memory.words)

    def log_probs(self, out: torch.Tensor) -> torch.Tensor:
        """log softmax(W_out c_t + b_out) ``(..., V)`` from decoder outputs ``(..., H)`` (the
        vocabulary half only; `step_log_probs` is a step's full distribution)."""
        return F.log_softmax(self.generator.logits(out), dim=-1)

    def step_log_probs(self, out: torch.Tensor, att: AttentionOut, memory: Memory) -> torch.Tensor:
        """log p(y_t | ·) ``(B, V)`` of one decoder step (copying generators use ``att``/``memory``)."""
        logp: torch.Tensor = self.generator(out, att, memory)  # (B, V)
        return logp

    # ------------------------------------------------------------------ the family interface
    def advance(
        self, state: DecoderState, prev_tokens: torch.Tensor, memory: Memory, t: int, mode: Mode
    ) -> tuple[torch.Tensor, DecoderState, AttentionOut]:
        """One decoder step from the previous words ``(B,)``: c_t ``(B, H)``, the state, the attention."""
        return self.decoder.step(state, self.tgt_embedding(prev_tokens), memory, t, mode)

    # ------------------------------------------------------------------ teacher forcing
    def forward(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor,
        tgt: torch.Tensor,
        tgt_mask: torch.Tensor,
        mode: Mode = "sample",
        task: str = "teacher",
        max_len: int = 0,
        *,
        lengths: SourceLengths | None = None,
    ) -> Any:
        """`SummarizerFamily.forward`, sampling C2F's chunks (``mode="sample"``) unless told otherwise."""
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
        memory, final = self.encode(src, src_mask, lengths)
        state = self.init_state(memory, final)
        y_out, out_mask = tgt[:, 1:], tgt_mask[:, 1:]  # (B, T-1)
        hard = self.hard and mode == "sample"
        outs: list[torch.Tensor] = []
        nll: list[torch.Tensor] = []
        atts: list[AttentionOut] = []
        for t in range(y_out.shape[1]):
            out, state, att = self.advance(state, tgt[:, t], memory, t, mode)
            atts.append(att)
            if hard or self.copies:  # the step's cost from this step's output (and attention) alone
                logp = self.step_log_probs(out, att, memory)  # (B, V)
                nll.append(-logp.gather(1, y_out[:, t : t + 1]).squeeze(1) * out_mask[:, t].to(out.dtype))
            else:
                outs.append(out)
        if outs:  # soft attention, plain softmax: one generator call for all steps
            logits = self.generator.logits(torch.stack(outs, dim=1))  # (B, T-1, V)
            flat = F.cross_entropy(logits.flatten(0, 1), y_out.flatten(), reduction="none").view_as(y_out)
            nll = list((flat * out_mask.to(flat.dtype)).unbind(1))
        return SummarizerOutput(nll, out_mask, atts)


FAMILIES.register("c2f", C2FSummarizer, config=C2FConfig)
