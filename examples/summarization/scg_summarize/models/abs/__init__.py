"""ABS and ABS+ (Rush, Chopra & Weston 2015): a feed-forward NNLM with an input encoder.

=================== ======================================================================
``encoders``        enc(x, y_c): bag-of-words, convolutional (TDNN), attention-based, none
``nnlm``            :class:`AbsModel`: the NNLM decoder over a window of C words + an encoder
``step``            :class:`AbsStepDecoder`: the model as a step decoder (beam/greedy search)
``train``           NLL training with the paper's schedule (SGD, halving, max-norm); a CLI
``count_baselines`` KN 5-gram perplexity, IR baseline, Ext. % on a prepared corpus (CLI)
``variants``        a trained run decoded as ABS / recombined / greedy / extractive / ABS+ (CLI)
=================== ======================================================================

ABS+ (the log-linear extractive features, MERT) lives in
:mod:`scg_summarize.decoding.abs_features`, :mod:`scg_summarize.evaluation.mert` and
:mod:`scg_summarize.evaluation.abs_tuning`. See
``docs/abs.md``.
"""

from .encoders import ENCODERS, AbsEncoder, AttentionEncoder, BowEncoder, ConvEncoder, EncoderMemory, NoEncoder
from .nnlm import AbsConfig, AbsModel, context_windows
from .step import AbsState, AbsStepDecoder, flatten_source

__all__ = [
    "ENCODERS",
    "AbsConfig",
    "AbsEncoder",
    "AbsModel",
    "AbsState",
    "AbsStepDecoder",
    "AttentionEncoder",
    "BowEncoder",
    "ConvEncoder",
    "EncoderMemory",
    "NoEncoder",
    "context_windows",
    "flatten_source",
]
