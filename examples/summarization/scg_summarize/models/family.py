"""`SummarizerFamily`: the one shape of every model family (C2F, Paulus, ABS, MAL).

The trainer (``train/loop.Trainer``), the objectives, the step decoder of beam and greedy search
(``decoding/adapters.ModelStepDecoder``), perplexity and the CLI see a model only through this
class. A family subclasses it, writes the abstract methods (encode, one decoder step, its
distribution, teacher forcing) and inherits the rest; what a family *can* do is a class
attribute with a default (the ``torch.distributions`` ``has_rsample`` pattern), so no caller
probes a model with ``getattr``:

=======================  ==========  ==================================================================
capability               default     overridden by
=======================  ==========  ==================================================================
`hard`                   False       C2F with ``attention = "c2f"`` (sampled chunks: the scg surrogate)
`copies`                 generator   Paulus, C2F+COPY (each step's distribution reads the attention)
`has_own_output_space`   False       Paulus (extended vocabulary), ABS (title vocabulary V_y)
`markov_window`          None        ABS (C: hypotheses with the same last C words recombine)
`default_objective`      None        MAL (``"mal"``: L_s + L_NLL)
`reads_rows`             False       C2F's hard attention (beam search keeps one memory per example)
`coarse_topk`            1           C2F (``test_k``; `with_coarse_topk` gives a view reading k chunks)
=======================  ==========  ==================================================================

Shapes: B examples (R rows in beam search), a source grid of M chunks of N words, H the decoder
output size, V the corpus vocabulary and V' the family's output space (V, or V_t + K with K
copied source words, or V_y).

What ``encode``, ``advance``, ``forward`` and ``step`` are given is checked before they run, for
every family (`.input_checks`).
"""

from __future__ import annotations

import functools
from abc import ABCMeta, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import torch
from torch import nn

from ..data.batching import SourceLengths
from .common.attention import AttentionOut, Memory, Mode
from .common.decoder import DecoderState
from .common.generator import Generator
from .common.rollout import Rollout, rollout
from .config import ModelConfig
from .input_checks import check_on_model, check_prev_tokens, check_source, check_state, check_target

if TYPE_CHECKING:
    from ..data.vocab import Vocab

__all__ = ["SummarizerFamily", "SummarizerOutput", "embedding_tables", "uniform_init"]

ConfigT = TypeVar("ConfigT", bound=ModelConfig)
StateT = TypeVar("StateT", bound=DecoderState)
MethodT = TypeVar("MethodT", bound=Callable[..., Any])


def _checked_encode(encode: MethodT) -> MethodT:
    """A family's ``encode`` behind `check_source` and `check_on_model` (`SummarizerFamily.__init_subclass__`)."""

    @functools.wraps(encode)
    def checked(self: SummarizerFamily[Any, Any], src: Any, src_mask: Any, *args: Any, **kwargs: Any) -> Any:
        where = f"{type(self).__name__}.encode"
        check_source(where, src, src_mask)
        check_on_model(where, "src", src, self)
        return encode(self, src, src_mask, *args, **kwargs)

    checked.checks_inputs = True  # type: ignore[attr-defined]
    return checked  # type: ignore[return-value]


def _checked_advance(advance: MethodT) -> MethodT:
    """A family's ``advance`` behind `check_state` and `check_prev_tokens` (`SummarizerFamily.__init_subclass__`)."""

    @functools.wraps(advance)
    def checked(self: SummarizerFamily[Any, Any], state: Any, prev_tokens: Any, *args: Any, **kwargs: Any) -> Any:
        check_prev_tokens(self, prev_tokens, check_state(self, state, "advance").feed, "advance")
        return advance(self, state, prev_tokens, *args, **kwargs)

    checked.checks_inputs = True  # type: ignore[attr-defined]
    return checked  # type: ignore[return-value]


#: the methods a family writes that `SummarizerFamily.__init_subclass__` puts behind a check
_CHECKED_METHODS = {"encode": _checked_encode, "advance": _checked_advance}


@dataclass
class SummarizerOutput:
    """Teacher-forced outputs (`SummarizerFamily.forward` with ``task="teacher"``).

    Attributes:
        step_nll: T−1 tensors ``(B,)``: −log p(y_{t+1} | y_≤t, x) at real target positions, 0 at padding.
        step_mask: ``(B, T−1)`` True at real target positions.
        attention: the T−1 steps' `AttentionOut`.
    """

    step_nll: list[torch.Tensor]
    step_mask: torch.Tensor
    attention: list[AttentionOut]

    def total_nll(self) -> torch.Tensor:
        """Σ_t Σ_b nll_t (a scalar)."""
        return torch.stack(self.step_nll).sum()

    def tokens(self) -> torch.Tensor:
        """The number of predicted target tokens (0-dim, on the step's device: no host read)."""
        return self.step_mask.sum()

    def document_terms(self) -> dict[str, torch.Tensor]:
        """The family's own terms of this batch (`SummarizerFamily.output_terms`), each summed over
        the batch's documents (0-dim tensors); validation reports them per document. None here."""
        return {}


class SummarizerFamily(nn.Module, Generic[ConfigT, StateT], metaclass=ABCMeta):
    """A summarizer of one family: built from its configuration, decoded one step at a time.

    Subclasses set `config` and `generator` in ``__init__(config)`` and write `encode`,
    `init_state`, `advance`, `step_log_probs` and `teacher_forcing`; everything else has a default.

    Attributes:
        config: the family's configuration (a `ModelConfig` subclass, registered with the family).
        generator: the output layer: ``logits(out) -> (..., V')``, ``output_layer() -> (W, b)``,
            ``copies``.
    """

    config: ConfigT
    generator: Generator

    #: the output ids are not the corpus ids (`corpus_ids`, `corpus_log_probs` and
    #: `scored_targets` map them), so the fused softmax/top-k of beam search does not apply
    has_own_output_space: ClassVar[bool] = False
    #: the objective ``train.objective = "auto"`` picks (None: C2F's surrogate when `hard`, else MLE)
    default_objective: ClassVar[str | None] = None
    #: the names of the terms its teacher-forced output reports (`SummarizerOutput.document_terms`),
    #: which validation averages over the documents and logs beside the perplexity
    output_terms: ClassVar[tuple[str, ...]] = ()
    #: why its training step cannot be traced (``train.compile``) or captured (``train.cuda_graph``)
    #: whole: it reads a value or a size from the device (None: it reads none)
    untraceable: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every family's own ``encode`` and ``advance`` check their input (`check_source`,
        `check_state`, `check_prev_tokens`, the model's device) before they run: one check for every
        family, written by none (`forward` and `step` check theirs here)."""
        super().__init_subclass__(**kwargs)
        for name, wrap in _CHECKED_METHODS.items():
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, "checks_inputs", False):
                setattr(cls, name, wrap(method))

    # ------------------------------------------------------------------ capabilities
    @property
    def hard(self) -> bool:
        """Whether attention is sampled (hard): the objective then adds C2F's score-function terms."""
        return False

    @property
    def copies(self) -> bool:
        """Whether a step's distribution depends on its attention (copying): the output layer
        cannot be fused with the top-k of beam search, and every step needs its `AttentionOut`."""
        return bool(self.generator.copies)

    @property
    def coarse_topk(self) -> int:
        """Chunks read per decoder step at test time (C2F's ``test_k``; 1 for every other family)."""
        return 1

    def with_coarse_topk(self, k: int) -> SummarizerFamily[ConfigT, StateT]:
        """This model reading the top ``k`` chunks per step at test time: a view sharing every
        parameter (C2F). Never changes ``self``. A model that chooses no chunks has no other k:
        ``k`` other than its `coarse_topk` (1) is refused (it would be ignored)."""
        if k != self.coarse_topk:
            raise ValueError(
                f"coarse_topk = {k}: this {type(self).__name__} chooses no chunks (its attention reads every "
                "word), so there is no top k to read; leave --coarse-topk out"
            )
        return self

    @property
    def reads_rows(self) -> bool:
        """Whether `advance` reads a memory kept once per example through a ``rows`` index ``(R,)``
        (C2F's hard attention: beam search then needs no copy of the memory per hypothesis)."""
        return False

    @property
    def markov_window(self) -> int | None:
        """C when the state is the last C output words (two hypotheses ending alike have the same
        future: beam search may recombine them), else None."""
        return None

    # ------------------------------------------------------------------ building
    @classmethod
    def for_corpus(cls, config: ConfigT, data_dir: str | Path) -> SummarizerFamily[ConfigT, StateT]:
        """The model for the prepared corpus in ``data_dir``; a family whose model depends on the
        corpus beyond the configuration (ABS: separate vocabularies) fills ``config`` from it, so
        that a checkpoint still rebuilds from the configuration alone."""
        return cls(config)  # type: ignore[call-arg]

    def bind_vocab(self, vocab: Vocab) -> None:
        """Called by the trainer before the first step (MAL marks its content words); what it sets
        must live in a buffer so that checkpoints carry it. Nothing by default."""

    def chunk_encoder_parameters(self) -> list[nn.Parameter]:
        """The parameters trained with ``train.chunk_encoder_lr_scale`` × lr (C2F's chunk encoder)."""
        return []

    def word_embeddings(self) -> list[nn.Embedding]:
        """The tables that embed corpus words, each once (`embedding_tables`): what
        ``train.word2vec`` initializes. None by default (ABS, whose NNLM embeds its words in
        tables of its own); ``train.word2vec`` is then refused."""
        return []

    def end_of_epoch(self) -> int:
        """The family's step after every training epoch, before validation (ABS: max-norm
        renormalization of the embeddings); returns how many parameter rows it changed."""
        return 0

    # ------------------------------------------------------------------ one step at a time
    @abstractmethod
    def encode(
        self, src: torch.Tensor, src_mask: torch.Tensor, lengths: SourceLengths | None = None
    ) -> tuple[Memory, Any]:
        """The memory of ``src`` ``(B, M, N)`` (word states ``(B, M, N, H_e)``; per-example extras
        in ``memory.extra``, reordered by beam search) and what `init_state` needs. ``lengths``:
        the batch's bounds on its real words, counted on the host (`SourceLengths`), for encoders
        that skip the padding (None: they read the mask). A family's ``encode`` is wrapped in
        `check_source` (by `__init_subclass__`): ``src`` int64, ``src_mask`` bool of its shape."""

    @abstractmethod
    def init_state(self, memory: Memory, final: Any) -> StateT:
        """The decoder state before the first word."""

    @abstractmethod
    def advance(
        self, state: StateT, prev_tokens: torch.Tensor, memory: Memory, t: int, mode: Mode
    ) -> tuple[torch.Tensor, StateT, AttentionOut]:
        """One decoder step from the previous words ``(B,)``: the output ``(B, H)``, the new state
        and the step's attention. ``mode``: ``sample`` / ``greedy`` / ``soft`` (C2F's chunk choice).
        A family's ``advance`` is wrapped in `check_state` and `check_prev_tokens` (by
        `__init_subclass__`): ``state`` a `DecoderState`, ``prev_tokens`` int64 with its rows."""

    @abstractmethod
    def step_log_probs(self, out: torch.Tensor, att: AttentionOut, memory: Memory) -> torch.Tensor:
        """log p(y_t | y_<t, x) ``(B, V')`` from a step's output (copying families read ``att``)."""

    def step(
        self, state: StateT, prev_tokens: torch.Tensor, memory: Memory, t: int, mode: Mode
    ) -> tuple[torch.Tensor, StateT, AttentionOut]:
        """`advance` then `step_log_probs`: log p(y_t) ``(B, V')``, the state, the attention.
        ``prev_tokens`` must be int64 ``(B,)`` with the state's B rows, on its device (`TypeError` /
        `ValueError` naming it; its metadata only, so no host read)."""
        check_prev_tokens(self, prev_tokens, check_state(self, state, "step").feed)
        out, state, att = self.advance(state, prev_tokens, memory, t, mode)
        return self.step_log_probs(out, att, memory), state, att

    def word_attention(self, memory: Memory, h: torch.Tensor, att: AttentionOut) -> torch.Tensor | None:
        """The word attention ``(R, M, N)`` of a step to show (decoding's ``word_attn`` extra) from
        its query ``h`` ``(R, H)``: ``att.word_probs`` when the step computed it, else None."""
        return att.word_probs

    # ------------------------------------------------------------------ output ids
    def corpus_ids(self, tokens: torch.Tensor, memory: Memory) -> torch.Tensor:
        """Output ids ``(B, L)`` -> corpus ids (the identity unless `has_own_output_space`)."""
        return tokens

    def corpus_log_probs(self, log_probs: torch.Tensor, memory: Memory) -> torch.Tensor:
        """``(R, V')`` log-probabilities -> ``(R, V)`` over corpus ids (−inf where the family cannot
        produce a word); the identity unless `has_own_output_space`."""
        return log_probs

    def scored_targets(self, tgt: torch.Tensor, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """The corpus ids ``(B, T)`` the model is scored on (perplexity): a reference word the
        family can neither generate nor copy is ``<unk>``, as in training. The identity by default."""
        return tgt

    # ------------------------------------------------------------------ whole sequences
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
        """Teacher forcing or a free-running summary of a batch.

        Args:
            src, src_mask: ``(B, M, N)``.
            tgt, tgt_mask: ``(B, T)`` with ``<s>`` first.
            mode: C2F's chunk choice: ``sample`` (scg nodes, training), ``greedy`` (argmax /
                top-k) or ``soft``; soft families ignore it.
            task: ``teacher`` (`teacher_forcing`: a `SummarizerOutput`) or ``rollout`` (`rollout`:
                a `Rollout` of at most ``max_len`` words, default T − 1).
            lengths: the batch's `SourceLengths` (`encode`).

        The tensors are checked (`check_source`, `check_target`: dtypes, ranks, shapes, one batch
        size, T >= 2, the model's device) from their metadata only; the ids' values are not read.
        """
        where = f"{type(self).__name__}.forward"
        check_source(where, src, src_mask)
        check_on_model(where, "src", src, self)
        check_target(where, tgt, tgt_mask, src)
        if task == "rollout":
            memory, final = self.encode(src, src_mask, lengths)
            return self.rollout(memory, self.init_state(memory, final), max_len or tgt.shape[1] - 1, mode)
        if task != "teacher":
            raise ValueError(f"{type(self).__name__}.forward: task must be 'teacher' or 'rollout', got {task!r}")
        return self.teacher_forcing(src, src_mask, tgt, tgt_mask, mode, lengths)

    @abstractmethod
    def teacher_forcing(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor,
        tgt: torch.Tensor,
        tgt_mask: torch.Tensor,
        mode: Mode,
        lengths: SourceLengths | None = None,
    ) -> SummarizerOutput:
        """nll_t = −log p(y_{t+1} | y_≤t, x) ``(B,)`` for t = 0 .. T−2 (0 at padding), the reference
        ``tgt`` ``(B, T)`` fed at every step."""

    def rollout(self, memory: Memory, state: StateT, max_len: int, mode: Mode = "soft") -> Rollout:
        """A free-running summary drawn as one scg word node per step (self-critical training; run it
        under ``scg.Graph(intervene=scg.estimators.greedy)`` for greedy decoding). Soft families
        ignore ``mode``."""
        return rollout(self, memory, state, max_len, mode=mode if self.hard else "soft")


def embedding_tables(src_embedding: nn.Embedding, tgt_embedding: nn.Embedding) -> list[nn.Embedding]:
    """The source and target embeddings, the target's left out when it is the source's (shared)."""
    return [src_embedding] + ([] if tgt_embedding is src_embedding else [tgt_embedding])


def uniform_init(model: nn.Module, config: ModelConfig, tables: list[nn.Embedding]) -> None:
    """Every parameter uniform in [−r, r] (r = ``config.init_range``; frozen ones included), the word
    embedding ``tables`` N(0, ``emb_init_std``²) instead when it is set, padding embeddings zero (C2F, Paulus)."""
    r = config.init_range
    for p in model.parameters():
        nn.init.uniform_(p, -r, r)
    if config.emb_init_std > 0:
        for table in tables:  # a list, not a set: a fixed order of random draws
            nn.init.normal_(table.weight, 0.0, config.emb_init_std)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Embedding) and m.padding_idx is not None:
                m.weight[m.padding_idx].zero_()
