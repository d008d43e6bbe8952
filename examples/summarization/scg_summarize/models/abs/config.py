"""`AbsFamilyConfig`: the ``abs`` family's options (Rush, Chopra & Weston 2015)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import ModelConfig

__all__ = ["ABS_ENCODERS", "AbsFamilyConfig"]

#: The values of ``model.abs_encoder`` (Table 2's rows; :class:`~.nnlm.AbsModel` builds the one named).
ABS_ENCODERS: tuple[str, ...] = ("none", "bow", "conv", "attention")


@dataclass(kw_only=True, slots=True)
class AbsFamilyConfig(ModelConfig):
    """Hyperparameters of `AbsSummarizer` and its NNLM (with those of `ModelConfig`: ``emb_dim``
    is D, ``hidden`` is H; ``emb_init_std`` is not used: embeddings start N(0, 0.05²); the paper's
    sizes are D = 200, H = 400, C = 5, L = 3, Q = 2).

    Attributes:
        abs_encoder: the input encoder enc(x, y_c): ``none`` (the plain NNLM), ``bow``,
            ``conv`` or ``attention`` (ABS).
        abs_context: C, the window of previous output words (5).
        abs_layers / abs_window: L convolution layers (3) and the half-width Q (2) of the
            convolution and of the attention encoder's smoothing.
        abs_max_norm: embedding rows are renormalized to this norm after every epoch (0: never;
            the paper gives no bound, 2.0 here).
        abs_src_vocab / abs_tgt_vocab: V_x and V_y, the input (article) and output (title)
            vocabularies; 0: every corpus word. Filled in from a corpus prepared with separate
            vocabularies (``prepare --field-vocab-min-freq``, ``data/field_vocabs.py``).
    """

    family: str = "abs"
    abs_encoder: str = "attention"
    abs_context: int = 5
    abs_layers: int = 3
    abs_window: int = 2
    abs_max_norm: float = 2.0
    abs_src_vocab: int = 0
    abs_tgt_vocab: int = 0

    @property
    def src_vocab(self) -> int:
        """V_x: ``abs_src_vocab``, or every corpus word (``vocab_size``) when it is 0."""
        return self.abs_src_vocab or self.vocab_size

    @property
    def tgt_vocab(self) -> int:
        """V_y: ``abs_tgt_vocab``, or every corpus word (``vocab_size``) when it is 0."""
        return self.abs_tgt_vocab or self.vocab_size

    def validate(self) -> None:
        ModelConfig.validate(self)
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
