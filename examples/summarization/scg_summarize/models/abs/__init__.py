"""ABS and ABS+ (Rush, Chopra & Weston 2015): a feed-forward NNLM with an input encoder.

=================== ======================================================================
``encoders``        enc(x, y_c): bag-of-words, convolutional (TDNN), attention-based, none
``nnlm``            :class:`AbsModel`: the NNLM decoder over a window of C words + the encoder
``kneser_ney``      :class:`KneserNeyLM`: interpolated Kneser-Ney n-grams (Table 2's KN row)
``config``          :class:`~.config.AbsFamilyConfig`: the ``abs`` family's options (``abs_*``)
``family``          :class:`~.family.AbsSummarizer`: the registered ``abs`` model family
=================== ======================================================================

The family decodes through the one step adapter of every family
(:class:`scg_summarize.decoding.ModelStepDecoder`). ABS+ (the log-linear
extractive features, MERT) lives in
:mod:`scg_summarize.decoding.abs_features`, :mod:`scg_summarize.evaluation.mert` and
:mod:`scg_summarize.evaluation.abs_tuning`. See
``docs/abs.md``.
"""

from .config import ABS_ENCODERS, AbsFamilyConfig
from .encoders import AbsEncoder, AttentionEncoder, BowEncoder, ConvEncoder, EncoderMemory, NoEncoder
from .kneser_ney import KneserNeyLM
from .nnlm import AbsModel, context_windows

__all__ = [
    "ABS_ENCODERS",
    "AbsEncoder",
    "AbsFamilyConfig",
    "AbsModel",
    "AttentionEncoder",
    "BowEncoder",
    "ConvEncoder",
    "EncoderMemory",
    "KneserNeyLM",
    "NoEncoder",
    "context_windows",
]
