"""The summarizer's model families, one folder each, on one base class.

=========================== =================================================================================
``family``                  [`SummarizerFamily`][scg_summarize.models.SummarizerFamily]: the interface every
                            family implements, its defaults and capabilities; `SummarizerOutput`
``input_checks``            the checks of what a family's ``forward``, ``encode``, ``advance`` and ``step``
                            are given (the tensors' metadata only)
``config``                  [`ModelConfig`][scg_summarize.models.ModelConfig]: the options every family shares
``registry``                ``FAMILIES`` (name -> family class and configuration dataclass), `build_model`
``c2f/``                    Ling & Rush (2017), Models 0-3: [`C2FSummarizer`][scg_summarize.models.C2FSummarizer],
                            `C2FConfig`, the chunk encoders, the coarse-to-fine attention
``paulus/``                 Paulus, Xiong & Socher (2018): `PaulusSummarizer`, `PaulusConfig`
``abs/``                    Rush, Chopra & Weston (2015): ``AbsSummarizer``, ``AbsFamilyConfig``, the NNLM
``mal/``                    Li et al. (MAL): ``MALSummarizer``, ``MALConfig``, saliency and PageRank
``common/``                 the shared parts: word encoders, attention, the input-feeding decoder, generators,
                            rows (beam reordering), rollouts, the extended vocabulary, word2vec
``loading``                 [`load_model`][scg_summarize.models.loading.load_model]: a trained model from its
                            checkpoint file
=========================== =================================================================================

Decoding (beam search, ``<unk>`` replacement) and ROUGE live in `scg_summarize.decoding` and
`scg_summarize.evaluation`, which see every family through
``scg_summarize.decoding.adapters.ModelStepDecoder``.
"""

from .c2f.chunk_encoders import BowChunkEncoder, ChunkEncoder, ConvChunkEncoder, WithPosition
from .c2f.coarse_to_fine import C2FAttention, c2f_read, c2f_step
from .c2f.config import ATTENTIONS, CHUNK_ENCODERS, C2FConfig
from .c2f.model import C2FSummarizer
from .common.attention import AttentionOut, FlatAttention, HierAttention, Memory, SourceAttention, flat_step, hier_step
from .common.decoder import Decoder, DecoderState
from .common.encoders import ChunkedWordEncoder, EncodedWords, FlatWordEncoder, WordEncoder
from .common.pretrained import load_word2vec
from .common.rollout import Rollout, rollout
from .common.rows import repeat_rows, select_rows
from .config import ModelConfig
from .family import SummarizerFamily, SummarizerOutput
from .loading import load_model, read_checkpoint
from .paulus.config import PaulusConfig
from .paulus.model import PaulusState, PaulusSummarizer
from .registry import FAMILIES, FamilyRegistry, build_model

__all__ = [
    "ATTENTIONS",
    "CHUNK_ENCODERS",
    "FAMILIES",
    "AttentionOut",
    "BowChunkEncoder",
    "C2FAttention",
    "C2FConfig",
    "C2FSummarizer",
    "ChunkEncoder",
    "ChunkedWordEncoder",
    "ConvChunkEncoder",
    "Decoder",
    "DecoderState",
    "EncodedWords",
    "FamilyRegistry",
    "FlatAttention",
    "FlatWordEncoder",
    "HierAttention",
    "Memory",
    "ModelConfig",
    "PaulusConfig",
    "PaulusState",
    "PaulusSummarizer",
    "Rollout",
    "SourceAttention",
    "SummarizerFamily",
    "SummarizerOutput",
    "WithPosition",
    "WordEncoder",
    "build_model",
    "c2f_read",
    "c2f_step",
    "flat_step",
    "hier_step",
    "load_model",
    "load_word2vec",
    "read_checkpoint",
    "repeat_rows",
    "rollout",
    "select_rows",
]
