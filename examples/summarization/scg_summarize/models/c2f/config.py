"""`C2FConfig`: the ``c2f`` family's options (Ling & Rush 2017, Section 4).

The four models differ only in how the decoder attends:

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

from dataclasses import dataclass

from ..config import ModelConfig, positive_ints

__all__ = ["ATTENTIONS", "CHUNK_ENCODERS", "DECODER_INITS", "C2FConfig"]

ATTENTIONS: tuple[str, ...] = ("standard", "model1", "hier", "c2f")
CHUNK_ENCODERS: tuple[str, ...] = ("conv", "bow")
DECODER_INITS: tuple[str, ...] = ("encoder", "zero")


@dataclass(kw_only=True, slots=True)
class C2FConfig(ModelConfig):
    """Hyperparameters of the ``c2f`` family's `C2FSummarizer` (with those of `ModelConfig`).

    Defaults are the paper's sizes (Section 5: 2-layer LSTMs of 500 units, CONV of width 6 with
    600 filters, 25-d position embeddings, dropout 0.3, uniform init in [-0.1, 0.1]).

    Attributes:
        enc_layers / dec_layers: LSTM depth.
        bidirectional: the word encoder is a bidirectional LSTM (H/2 units per direction; over
            the whole document for Model 0, within each chunk for Models 1-3; ours).
        attention: one of `ATTENTIONS`.
        chunk_encoder: ``conv`` (Kim 2014) or ``bow`` (sum of a separate, frozen embedding).
        pos: concatenate a ``pos_dim`` embedding of the chunk index to its representation.
        conv_width / conv_filters: the CONV chunk encoder.
        bow_dim: size of the frozen BOW embedding (default: ``emb_dim``).
        multi: k, chunks drawn per step by C2F (k > 1 is +MULTI: μ ~ Multinomial(k, α^s)).
        test_k: chunks read per step at test time (top-``test_k`` of α^s; 1 = argmax); decoding
            may pass another (``coarse_topk``).
        input_feed: feed the previous attentional context into the decoder LSTM.
        decoder_init: ``encoder`` (final encoder state; for chunked encoders the mean over real
            chunks) or ``zero``.
        copy: a pointer-generator output (`CopyGenerator`, See et al. 2017; not in the paper).
    """

    family: str = "c2f"
    enc_layers: int = 2
    dec_layers: int = 2
    bidirectional: bool = False
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
    decoder_init: str = "encoder"
    copy: bool = False

    def validate(self) -> None:
        ModelConfig.validate(self)
        if self.attention not in ATTENTIONS:
            raise ValueError(f"model.attention must be one of {ATTENTIONS}, got {self.attention!r}")
        if self.chunk_encoder not in CHUNK_ENCODERS:
            raise ValueError(f"model.chunk_encoder must be one of {CHUNK_ENCODERS}, got {self.chunk_encoder!r}")
        if self.decoder_init not in DECODER_INITS:
            raise ValueError(f"model.decoder_init must be one of {DECODER_INITS}, got {self.decoder_init!r}")
        positive_ints(self, "enc_layers", "dec_layers", "conv_width", "conv_filters", "multi", "test_k", "pos_dim")
        if not isinstance(self.copy, bool):
            raise ValueError(f"model.copy must be true or false, got {self.copy!r}")
        for key in ("multi", "test_k"):  # (soft attention reads every chunk: the option would be ignored)
            if getattr(self, key) > 1 and self.attention != "c2f":
                raise ValueError(f"model.{key} > 1 (chunks read per step) needs model.attention = 'c2f'")

    @property
    def hierarchical(self) -> bool:
        """Whether the model has a coarse (chunk-level) attention, hence a chunk encoder."""
        return self.attention in ("hier", "c2f")

    @property
    def chunked(self) -> bool:
        """Whether the word encoder runs over each chunk separately (Models 1-3)."""
        return self.attention != "standard"
