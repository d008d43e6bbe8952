"""The ``abs`` model family: ABS (Rush, Chopra & Weston 2015) behind the registry's interface.

:class:`AbsSummarizer` wraps an :class:`~.nnlm.AbsModel` so that the trainer (``scg-summarize
train``, ``--resume``, checkpoint selection), perplexity, beam/greedy search and ``evaluate``
drive it like the other families (``docs/summarizer.md``, "Adding a model family"):

* ``encode``: the chunk grid ``(B, M, N)`` is packed into one sentence ``(B, L)``
  (`scg_summarize.data.chunking.pack_words`), corpus ids are mapped to the input vocabulary (V_x) and the
  encoder's per-example tensors go to ``Memory.extra`` (``enc_*``), so search reorders them;
* the decoder state (:class:`AbsFamilyState`) is the window y_c of the last C output ids
  (``<s>``-padded); :attr:`AbsSummarizer.markov_window` = C makes hypothesis recombination
  available to the step decoder;
* the output is a plain softmax: ``V h + W enc = [V W] [h; enc]``, so ``advance`` returns
  ``[h; enc]`` ``(R, 2H)`` (``h`` alone for the NNLM) and :class:`AbsGenerator` holds
  ``W_out = [V W]``, ``b_out = b_V + b_W``;
* with separate vocabularies (V_x, V_y < V: ``model.abs_src_vocab`` / ``abs_tgt_vocab``, from a
  corpus prepared with ``--field-vocab-min-freq``, :mod:`scg_summarize.data.field_vocabs`)
  the id maps are buffers (saved in checkpoints): ``src_map`` and ``tgt_map`` (corpus id ->
  model id, ``<unk>`` outside), ``tgt_ids`` (output id -> corpus id); ``corpus_log_probs``
  puts −inf on corpus words outside the title vocabulary. Without a corpus (a configuration
  alone) a smaller V_x / V_y means the most frequent corpus words (a prefix of the ids).

Training is the teacher-forced NLL (``train.objective = "mle"``, all positions at once); after
every epoch the trainer calls :meth:`AbsSummarizer.end_of_epoch` (max-norm renormalization of
the embeddings, before the epoch's validation, so that ``best.pt`` holds the validated model).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from ...data.batching import SourceLengths
from ...data.chunking import pack_words
from ..common.attention import AttentionOut, Memory, Mode
from ..common.decoder import DecoderState
from ..common.generator import Generator
from ..family import SummarizerFamily, SummarizerOutput
from ..registry import FAMILIES
from .config import AbsFamilyConfig
from .encoders import EncoderMemory
from .nnlm import BOS, AbsModel, context_windows

__all__ = ["AbsFamilyState", "AbsGenerator", "AbsSummarizer"]

UNK = 1


@dataclass
class AbsFamilyState(DecoderState):
    """The decoder state: ``h``/``feed`` hold the last hidden layer ``(R, H)`` (for display
    only); ``window`` ``(R, C)`` is what the model remembers (output ids)."""

    window: torch.Tensor | None = None


class AbsGenerator(Generator):
    """p(y) = softmax(W_out [h; enc] + b_out) with W_out = [V W] (no parameters of its own)."""

    def __init__(self, model: AbsModel) -> None:
        super().__init__()
        self._model = [model]  # a list: not a submodule (the family registers it)

    def output_layer(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        m = self._model[0]
        if m.out_enc is None:
            return m.out_lm.weight, m.out_lm.bias
        return torch.cat([m.out_lm.weight, m.out_enc.weight], dim=1), m.out_lm.bias + m.out_enc.bias

    def forward(self, out: torch.Tensor, att: AttentionOut | None = None, memory: Memory | None = None) -> torch.Tensor:
        return torch.log_softmax(self.logits(out), dim=-1)  # (..., V_y)


def _ids(size: int, corpus: int) -> torch.Tensor:
    return torch.arange(min(size, corpus), dtype=torch.long)


class AbsSummarizer(SummarizerFamily[AbsFamilyConfig, AbsFamilyState]):
    """The ``abs`` family (see the module docstring); sizes from :class:`~.config.AbsFamilyConfig`:
    ``emb_dim`` = D, ``hidden`` = H, ``abs_context`` = C, ``abs_layers`` = L, ``abs_window`` = Q,
    ``abs_encoder``, ``abs_src_vocab`` = V_x and ``abs_tgt_vocab`` = V_y (0: V), the one
    configuration of the family and of its NNLM (:class:`~.nnlm.AbsModel`). Embeddings start
    N(0, 0.05²) (``emb_init_std`` and the LSTM options are not used)."""

    has_own_output_space = True
    #: corpus id -> input id, corpus id -> output id (``<unk>`` outside), output id -> corpus id
    src_map: torch.Tensor
    tgt_map: torch.Tensor
    tgt_ids: torch.Tensor
    generator: AbsGenerator

    def __init__(self, config: AbsFamilyConfig) -> None:
        super().__init__()
        if config.vocab_size < 5:
            raise ValueError("model.vocab_size must be set (the corpus vocabulary size)")
        self.config = config
        V, vx, vy = config.vocab_size, config.src_vocab, config.tgt_vocab
        self.abs = AbsModel(config)
        self.generator = AbsGenerator(self.abs)
        self.register_buffer("src_map", torch.empty(V, dtype=torch.long))
        self.register_buffer("tgt_map", torch.empty(V, dtype=torch.long))
        self.register_buffer("tgt_ids", torch.empty(vy, dtype=torch.long))
        self.bind_vocabularies(_ids(vx, V).tolist(), _ids(vy, V).tolist())

    # ------------------------------------------------------------------ vocabularies
    def bind_vocabularies(self, src_ids: list[int], tgt_ids: list[int]) -> None:
        """Set the input / output vocabularies from their corpus ids (V_x and V_y of them,
        the specials 0-3 first)."""
        V = self.config.vocab_size
        for name, ids, size in (
            ("abs_src_vocab", src_ids, self.config.src_vocab),
            ("abs_tgt_vocab", tgt_ids, self.config.tgt_vocab),
        ):
            if len(ids) != size or ids[:4] != [0, 1, 2, 3] or max(ids) >= V:
                raise ValueError(
                    f"model.{name}: {len(ids)} corpus ids (specials first, all < {V}) for a vocabulary of {size}"
                )
        with torch.no_grad():
            for buffer, ids in ((self.src_map, src_ids), (self.tgt_map, tgt_ids)):
                buffer.fill_(UNK)
                buffer[torch.tensor(ids)] = torch.arange(len(ids))
            self.tgt_ids.copy_(torch.tensor(tgt_ids))

    @classmethod
    def for_corpus(cls, config: AbsFamilyConfig, data_dir: str | Path) -> AbsSummarizer:
        """The model for a prepared corpus: its field vocabularies (``src_vocab.txt``,
        ``tgt_vocab.txt``) when it has them, filling ``abs_src_vocab`` / ``abs_tgt_vocab``."""
        from ...data.field_vocabs import load_field_vocabs

        fields = load_field_vocabs(data_dir)
        if fields is None:
            return cls(config)
        for name, ids in (("abs_src_vocab", fields.src_ids), ("abs_tgt_vocab", fields.tgt_ids)):
            given = getattr(config, name)
            if given and given != len(ids):
                raise ValueError(
                    f"model.{name} = {given}, but the corpus {data_dir} has a {len(ids)}-word vocabulary "
                    f"for it ({'src' if name == 'abs_src_vocab' else 'tgt'}_vocab.txt); leave it 0"
                )
            setattr(config, name, len(ids))
        config.validate()
        model = cls(config)
        model.bind_vocabularies(fields.src_ids, fields.tgt_ids)
        return model

    # ------------------------------------------------------------------ the family interface
    @property
    def markov_window(self) -> int:
        """C: two hypotheses with the same last C words have the same future (recombination)."""
        return self.config.abs_context

    def end_of_epoch(self) -> int:
        """Max-norm renormalization of the embeddings (``model.abs_max_norm``; 0: none);
        returns the number of rows changed."""
        if self.config.abs_max_norm <= 0:
            return 0
        return self.abs.renormalize_embeddings(self.config.abs_max_norm)

    def encode(
        self, src: torch.Tensor, src_mask: torch.Tensor, lengths: SourceLengths | None = None
    ) -> tuple[Memory, None]:
        """The memory: the grid's mask and ids, and in ``extra`` the packed input (``abs_mask``,
        ``abs_positions``) and the encoder's tensors (``enc_*``). (ABS's encoders have no steps to
        skip: ``lengths`` is not used.)"""
        words, mask, positions = pack_words(src, src_mask)  # (B, L) corpus ids
        x = self.src_map[words].masked_fill(~mask, 0)
        enc = self.abs.encode(x, mask)
        extra = {"abs_mask": mask, "abs_positions": positions, **{f"enc_{k}": v for k, v in enc.tensors.items()}}
        grid = src_mask.unsqueeze(-1).to(self.abs.embed.weight.dtype)  # (B, M, N, 1): no word states to show
        return Memory.build(grid, src_mask, None, src, extra), None

    @staticmethod
    def _encoder_memory(memory: Memory) -> EncoderMemory:
        return EncoderMemory(
            memory.extra["abs_mask"], {k[4:]: v for k, v in memory.extra.items() if k.startswith("enc_")}
        )

    def init_state(self, memory: Memory, final: Any = None) -> AbsFamilyState:
        B = memory.word_mask.shape[0]
        h = memory.words.new_zeros(B, self.config.hidden)
        window = torch.full((B, self.config.abs_context), BOS, dtype=torch.long, device=h.device)
        return AbsFamilyState([h], [h], h, {}, window)

    def _attention(self, memory: Memory, attn: torch.Tensor | None, context: torch.Tensor) -> AttentionOut:
        """The attention of one step on the grid (``attn`` ``(R, L)`` over the packed input;
        None: the encoder reads the input evenly, no word attention to show)."""
        mask = memory.word_mask  # (R, M, N)
        R, M, N = mask.shape
        if attn is None:
            sizes = memory.chunk_sizes
            chunks = sizes / sizes.sum(1, keepdim=True).clamp(min=1.0)
            return AttentionOut(context, chunks, chunks, sizes.sum(1))
        real = memory.extra["abs_mask"]
        word = attn.new_zeros(R, M * N).scatter_add(1, memory.extra["abs_positions"], attn * real).view(R, M, N)
        chunks = word.sum(-1)
        return AttentionOut(context, chunks, chunks, memory.chunk_sizes.sum(1), read_weights=word, word_probs=word)

    def advance(
        self, state: AbsFamilyState, prev_tokens: torch.Tensor, memory: Memory, t: int, mode: Mode
    ) -> tuple[torch.Tensor, AbsFamilyState, AttentionOut]:
        """Shift the previous word (corpus id) into the window; ``[h; enc]`` ``(R, 2H)``."""
        assert state.window is not None
        window = torch.cat([state.window[:, 1:], self.tgt_map[prev_tokens].unsqueeze(1)], dim=1)  # (R, C)
        rows = torch.arange(window.shape[0], device=window.device)
        h, enc, attn = self.abs.features(self._encoder_memory(memory), rows, window.unsqueeze(1))
        out = h[:, 0] if enc is None else torch.cat([h[:, 0], enc[:, 0]], dim=1)
        context = h[:, 0] if enc is None else enc[:, 0]
        att = self._attention(memory, None if attn is None else attn[:, 0], context)
        return out, replace(state, h=[h[:, 0]], c=[h[:, 0]], feed=h[:, 0], window=window), att

    def step_log_probs(self, out: torch.Tensor, att: AttentionOut, memory: Memory) -> torch.Tensor:
        """log p(y) ``(R, V_y)`` over the title vocabulary."""
        log_probs: torch.Tensor = self.generator(out)
        return log_probs

    def corpus_ids(self, tokens: torch.Tensor, memory: Memory) -> torch.Tensor:
        """Output ids -> corpus ids."""
        return self.tgt_ids[tokens]

    def scored_targets(self, tgt: torch.Tensor, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """The corpus ids the model is scored on: a title word outside the title vocabulary is
        ``<unk>`` (as in training), so teacher-forced perplexity stays finite (the source is not
        needed: the family does not copy). ``(B, T)`` -> ``(B, T)``."""
        if self.config.abs_tgt_vocab in (0, self.config.vocab_size):
            return tgt
        return self.tgt_ids[self.tgt_map[tgt]]

    def corpus_log_probs(self, log_probs: torch.Tensor, memory: Memory) -> torch.Tensor:
        """``(R, V_y)`` -> ``(R, V)`` over corpus ids (−inf outside the title vocabulary)."""
        V = self.config.vocab_size
        if log_probs.shape[1] == V:
            return log_probs
        full = log_probs.new_full((log_probs.shape[0], V), float("-inf"))
        return full.index_copy(1, self.tgt_ids, log_probs)

    def teacher_forcing(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor,
        tgt: torch.Tensor,
        tgt_mask: torch.Tensor,
        mode: Mode,
        lengths: SourceLengths | None = None,
    ) -> SummarizerOutput:
        """Every position at once: NLL per step over the title vocabulary (a title's words outside
        it are ``<unk>``)."""
        memory, _ = self.encode(src, src_mask)
        y = self.tgt_map[tgt]  # (B, T) output ids (<pad> stays 0)
        ctx = context_windows(y, self.config.abs_context, BOS)  # (B, T-1, C)
        B = src.shape[0]
        h, enc, attn = self.abs.features(self._encoder_memory(memory), torch.arange(B, device=src.device), ctx)
        out = h if enc is None else torch.cat([h, enc], dim=-1)  # (B, T-1, 2H)
        log_probs = self.generator(out)  # (B, T-1, V_y)
        out_mask = tgt_mask[:, 1:]
        nll = -log_probs.gather(2, y[:, 1:].unsqueeze(-1)).squeeze(-1) * out_mask.to(log_probs.dtype)  # (B, T-1)
        context = h if enc is None else enc
        atts = [
            self._attention(memory, None if attn is None else attn[:, t], context[:, t]) for t in range(nll.shape[1])
        ]
        return SummarizerOutput(list(nll.unbind(1)), out_mask, atts)


FAMILIES.register("abs", AbsSummarizer, config=AbsFamilyConfig)
