"""The model's hyperparameters (`ModelConfig`): which encoder, chunk encoder and attention.

The four models of Ling & Rush (2017, Section 4) differ only in how the decoder attends:

==========  =====================  ===================  ======================================
attention   word encoder           chunk encoder        per-step attention
==========  =====================  ===================  ======================================
standard    one LSTM over the      none                 α over all words (Model 0)
            whole document
model1      one LSTM per chunk     none                 α over all words (Model 1)
hier        one LSTM per chunk     conv / bow (+pos)    α_ij = α^s_i α^w_ij (Model 2)
c2f         one LSTM per chunk     conv / bow (+pos)    chunk(s) sampled from α^s, α^w inside
                                                        them only (Model 3, hard attention)
==========  =====================  ===================  ======================================
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["ATTENTIONS", "CHUNK_ENCODERS", "ModelConfig"]

ATTENTIONS: tuple[str, ...] = ("standard", "model1", "hier", "c2f")
CHUNK_ENCODERS: tuple[str, ...] = ("conv", "bow")
DECODER_INITS: tuple[str, ...] = ("encoder", "zero")
ABS_ENCODERS: tuple[str, ...] = ("none", "bow", "conv", "attention")  #: the ``abs`` family's enc(x, y_c)


@dataclass
class ModelConfig:
    """Hyperparameters of `Summarizer`.

    Defaults are the paper's sizes (Section 5: 2-layer LSTMs of 500 units, CONV of width 6 with
    600 filters, 25-d position embeddings, dropout 0.3, uniform init in [-0.1, 0.1]).

    Attributes:
        vocab_size: V (filled in from the prepared corpus when 0).
        num_chunks: M, the size of the position embedding table (filled in from the corpus).
        emb_dim: word embedding size E.
        hidden: LSTM size H of the word encoder and the decoder.
        enc_layers / dec_layers: LSTM depth.
        bidirectional: the word encoder is a bidirectional LSTM (H/2 units per direction; over
            the whole document for Model 0, within each chunk for Models 1-3). Without it, a
            word's state knows nothing of the words after it (ours; off in the paper configs).
        dropout: between LSTM layers and on the decoder output.
        init_range: parameters start uniform in [-init_range, init_range].
        emb_init_std: if > 0, word embeddings start N(0, emb_init_std²) instead (ours: much
            faster escape from the uniform-attention plateau for small models; the paper's
            configurations keep 0).
        attention: one of `ATTENTIONS`.
        chunk_encoder: ``conv`` (Kim 2014) or ``bow`` (sum of a separate, frozen embedding).
        pos: concatenate a ``pos_dim`` embedding of the chunk index to its representation.
        conv_width / conv_filters: the CONV chunk encoder.
        bow_dim: size of the frozen BOW embedding (default: ``emb_dim``).
        multi: k, chunks drawn per step by C2F (k > 1 is +MULTI: μ ~ Multinomial(k, α^s)).
        test_k: chunks read per step at test time (top-``test_k`` of α^s; 1 = argmax).
        input_feed: feed the previous attentional context into the decoder LSTM.
        share_embeddings: one embedding table for source and target words.
        decoder_init: ``encoder`` (final encoder state; for chunked encoders the mean over real
            chunks) or ``zero``.
        copy: a pointer-generator output (`CopyGenerator`: a gate mixes the
            vocabulary softmax with copying the attended source words; See et al. 2017). Not
            in the paper; off by default.
        family: the model family (`.registry`): ``c2f`` (Ling & Rush 2017, this class's
            other options; the default, so older checkpoints load unchanged), ``paulus``
            (Paulus et al. 2018, `.paulus`), ``abs`` (Rush et al. 2015, `.abs.family`)
            or ``mal`` (Li et al., `.mal.family`).
        tgt_vocab_size: V_t, the output vocabulary (the V_t most frequent corpus words; 0: all
            V; a value ≥ V means V). Smaller than V, a copying family copies the rest through the extended
            vocabulary (`.extended_vocab`). ``paulus`` only.
        intra_temporal: ``paulus``: intra-temporal encoder attention (else plain bilinear).
        intra_decoder: ``paulus``: intra-decoder attention over the past decoder states.
        tie_output: ``paulus``: W_out = tanh(W_emb W_proj) (else a free W_out).
        feed_sample_prob: ``paulus``: in training, the probability that a teacher-forced step is
            fed the word sampled from the previous step's distribution instead of the reference
            word (0.25 in the paper).
        abs_encoder: ``abs`` (Rush et al. 2015, `.abs.family`): the input encoder enc(x, y_c),
            ``none`` (the plain NNLM), ``bow``, ``conv`` or ``attention`` (ABS). ``emb_dim`` is D,
            ``hidden`` is H.
        abs_context: ``abs``: C, the window of previous output words (5).
        abs_layers / abs_window: ``abs``: L convolution layers (3) and the half-width Q (2) of
            the convolution and of the attention encoder's smoothing.
        abs_max_norm: ``abs``: embedding rows are renormalized to this norm after every epoch
            (0: never; the paper gives no bound, 2.0 here).
        abs_src_vocab / abs_tgt_vocab: ``abs``: V_x and V_y, the input (article) and output
            (title) vocabularies; 0: every corpus word. Filled in from a corpus prepared with
            separate vocabularies (``prepare --field-vocab-min-freq``, ``data/field_vocabs.py``).
        suatt / unatt: ``mal`` (Li et al., `.mal`): the supervised (c^s, a^s, L_s) and
            unsupervised (PageRank c^u, a^u) saliency attentions; both off is the seq2seq row.
        damping: ``mal``: d of the PageRank (0.9).
        pagerank_guard: ``mal``: the edge-weight guard (``softplus``, ``none`` = the paper, ``abs``).
        temperature_s / temperature_u: ``mal``: the saliency temperatures τ_s and τ_u (1 = the paper).
        scale_by_nodes: ``mal``: a^u = softmax(m·p / τ_u) instead of softmax(p / τ_u).
        max_src_len: ``mal``: the source words read (100).
        stopwords: ``mal``: the ``stop-words`` language of the saliency labels (``docs/mal.md``).
    """

    vocab_size: int = 0
    num_chunks: int = 0
    emb_dim: int = 500
    hidden: int = 500
    enc_layers: int = 2
    dec_layers: int = 2
    bidirectional: bool = False
    dropout: float = 0.3
    init_range: float = 0.1
    emb_init_std: float = 0.0
    attention: str = "standard"
    chunk_encoder: str = "conv"
    pos: bool = False
    pos_dim: int = 25
    conv_width: int = 6
    conv_filters: int = 600
    bow_dim: int = 0
    multi: int = 1
    test_k: int = 1
    input_feed: bool = True
    share_embeddings: bool = False
    decoder_init: str = "encoder"
    copy: bool = False
    family: str = "c2f"
    tgt_vocab_size: int = 0
    intra_temporal: bool = True
    intra_decoder: bool = True
    tie_output: bool = True
    feed_sample_prob: float = 0.0
    abs_encoder: str = "attention"
    abs_context: int = 5
    abs_layers: int = 3
    abs_window: int = 2
    abs_max_norm: float = 2.0
    abs_src_vocab: int = 0
    abs_tgt_vocab: int = 0
    suatt: bool = False
    unatt: bool = False
    damping: float = 0.9
    pagerank_guard: str = "softplus"
    temperature_s: float = 1.0
    temperature_u: float = 1.0
    scale_by_nodes: bool = False
    max_src_len: int = 100
    stopwords: str = "en"

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` for an inconsistent configuration."""
        if self.attention not in ATTENTIONS:
            raise ValueError(f"model.attention must be one of {ATTENTIONS}, got {self.attention!r}")
        if self.chunk_encoder not in CHUNK_ENCODERS:
            raise ValueError(f"model.chunk_encoder must be one of {CHUNK_ENCODERS}, got {self.chunk_encoder!r}")
        if self.decoder_init not in DECODER_INITS:
            raise ValueError(f"model.decoder_init must be one of {DECODER_INITS}, got {self.decoder_init!r}")
        for name in (
            "emb_dim",
            "hidden",
            "enc_layers",
            "dec_layers",
            "conv_width",
            "conv_filters",
            "multi",
            "test_k",
            "pos_dim",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"model.{name} must be a positive integer, got {value!r}")
        if not isinstance(self.copy, bool):
            raise ValueError(f"model.copy must be true or false, got {self.copy!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"model.dropout must be in [0, 1), got {self.dropout!r}")
        if self.multi > 1 and self.attention != "c2f":
            raise ValueError("model.multi > 1 (+MULTI) needs model.attention = 'c2f'")
        from .registry import FAMILIES  # lazy: the registry's built-in families import this module

        if self.family not in FAMILIES:
            raise ValueError(f"model.family must be one of {tuple(FAMILIES.names())}, got {self.family!r}")
        if self.family != "c2f" and self.attention != "standard":  # the other families have their own attention
            raise ValueError(
                f"model.attention = {self.attention!r} (a hierarchical model, with model.multi, "
                f"model.chunk_encoder...) is the 'c2f' family's; the {self.family!r} family would ignore "
                f"it: start from one of its configurations, or set model.attention = 'standard'"
            )
        if (
            not isinstance(self.tgt_vocab_size, int)
            or isinstance(self.tgt_vocab_size, bool)
            or self.tgt_vocab_size < 0
            or 0 < self.tgt_vocab_size < 5
        ):
            raise ValueError(
                f"model.tgt_vocab_size must be 0 (the whole vocabulary) or >= 5, got {self.tgt_vocab_size!r}"
            )
        if self.tgt_vocab_size and self.family == "c2f":
            raise ValueError(
                "model.tgt_vocab_size (a separate target vocabulary) is supported by the 'paulus' family only"
            )
        if not 0.0 <= self.feed_sample_prob <= 1.0:
            raise ValueError(f"model.feed_sample_prob must be in [0, 1], got {self.feed_sample_prob!r}")
        for name in ("intra_temporal", "intra_decoder", "tie_output"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"model.{name} must be true or false, got {getattr(self, name)!r}")
        self._validate_abs()

    def _validate_abs(self) -> None:
        """The ``abs`` family's options (Rush et al. 2015)."""
        if self.abs_encoder not in ABS_ENCODERS:
            raise ValueError(f"model.abs_encoder must be one of {ABS_ENCODERS}, got {self.abs_encoder!r}")
        for name, low in (("abs_context", 1), ("abs_layers", 1), ("abs_window", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"model.{name} must be an integer >= {low}, got {value!r}")
        if not self.abs_max_norm >= 0:
            raise ValueError(f"model.abs_max_norm must be >= 0 (0: no renormalization), got {self.abs_max_norm!r}")
        for name in ("abs_src_vocab", "abs_tgt_vocab"):
            value = getattr(self, name)
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or value < 0
                or 0 < value < 5
                or (self.vocab_size and value > self.vocab_size)
            ):
                raise ValueError(
                    f"model.{name} must be 0 (every corpus word) or in [5, model.vocab_size], got {value!r}"
                )
        if self.family == "abs" and self.tgt_vocab_size:
            raise ValueError(
                "model.tgt_vocab_size is the 'paulus' family's; the 'abs' family's title vocabulary is "
                "model.abs_tgt_vocab"
            )

    @property
    def target_vocab(self) -> int:
        """V_t: the generator's output size (``tgt_vocab_size``, or V when 0 or larger than V)."""
        return min(self.tgt_vocab_size, self.vocab_size) if self.tgt_vocab_size else self.vocab_size

    @property
    def hierarchical(self) -> bool:
        """Whether the model has a coarse (chunk-level) attention, hence a chunk encoder."""
        return self.attention in ("hier", "c2f")

    @property
    def chunked(self) -> bool:
        """Whether the word encoder runs over each chunk separately (Models 1-3)."""
        return self.attention != "standard"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown model option(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return cls(**data)
