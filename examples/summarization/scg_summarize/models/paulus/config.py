"""`PaulusConfig`: the ``paulus`` family's options (Paulus, Xiong & Socher 2018)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import ModelConfig, positive_ints

__all__ = ["PaulusConfig"]


@dataclass(kw_only=True, slots=True)
class PaulusConfig(ModelConfig):
    """Hyperparameters of `PaulusSummarizer` (with those of `ModelConfig`: ``emb_dim`` (100 in
    the paper), ``hidden`` (400 = 2 × 200 for the bidirectional encoder, and the decoder),
    ``vocab_size`` (the input vocabulary, 150k)).

    Attributes:
        enc_layers: depth of the bidirectional LSTM encoder.
        tgt_vocab_size: V_t, the output vocabulary (the V_t most frequent corpus words; 0: all
            V; a value ≥ V means V); the rest is copied through the extended vocabulary (50k).
        intra_temporal: intra-temporal encoder attention (else plain bilinear).
        intra_decoder: intra-decoder attention over the past decoder states.
        tie_output: W_out = tanh(W_emb W_proj) (else a free W_out).
        feed_sample_prob: in training, the probability that a teacher-forced step is fed the
            word sampled from the previous step's distribution instead of the reference word
            (0.25 in the paper).
    """

    family: str = "paulus"
    enc_layers: int = 2
    tgt_vocab_size: int = 0
    intra_temporal: bool = True
    intra_decoder: bool = True
    tie_output: bool = True
    feed_sample_prob: float = 0.0

    def validate(self) -> None:
        ModelConfig.validate(self)
        positive_ints(self, "enc_layers")
        if self.hidden % 2:
            raise ValueError(
                f"model.hidden must be even for the paulus family's bidirectional encoder, got {self.hidden}"
            )
        size = self.tgt_vocab_size
        if not isinstance(size, int) or isinstance(size, bool) or size < 0 or 0 < size < 5:
            raise ValueError(f"model.tgt_vocab_size must be 0 (the whole vocabulary) or >= 5, got {size!r}")
        if not 0.0 <= self.feed_sample_prob <= 1.0:
            raise ValueError(f"model.feed_sample_prob must be in [0, 1], got {self.feed_sample_prob!r}")
        for name in ("intra_temporal", "intra_decoder", "tie_output"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"model.{name} must be true or false, got {getattr(self, name)!r}")

    @property
    def target_vocab(self) -> int:
        """V_t: the generator's output size (``tgt_vocab_size``, or V when 0 or larger than V)."""
        return min(self.tgt_vocab_size, self.vocab_size) if self.tgt_vocab_size else self.vocab_size
