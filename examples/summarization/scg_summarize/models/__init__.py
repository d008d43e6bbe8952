"""The coarse-to-fine summarizer's models (Ling & Rush 2017), one concept per module.

=================== ==========================================================================
``config``          [`ModelConfig`][scg_summarize.models.ModelConfig]: which encoder, chunk encoder and attention
``encoders``        word encoders: flat LSTM (Model 0) and per-chunk LSTM (Models 1-3)
``chunk_encoders``  chunk vectors for the coarse attention: CONV, BOW, +POS
``attention``       flat / HIER / C2F attention; the per-step functions (``c2f_step``)
``decoder``         the 2-layer input-feeding LSTM decoder
``summarizer``      [Summarizer][scg_summarize.models.Summarizer]: the parts composed, teacher-forced NLL per step (the
                    ``c2f`` family)
``registry``        the registries of families and parts, `build_model`
``rows``            row-wise reordering of any state or memory (beam search)
``rollout``         free-running decoding with scg word nodes (sequence-level training)
``extended_vocab``  separate target vocabulary, copying out-of-vocabulary words
``paulus``          Paulus, Xiong & Socher (2018): the ``paulus`` family
``pretrained``      word2vec text-format embeddings
``loading``         [`load_model`][scg_summarize.models.loading.load_model]: a trained model from its checkpoint file
=================== ==========================================================================

Decoding (beam search, ``<unk>`` replacement) and ROUGE live in `scg_summarize.decoding` and
`scg_summarize.evaluation`, which see these models through
``scg_summarize.decoding.adapters.ModelStepDecoder``.
"""

from .c2f.chunk_encoders import BowChunkEncoder, ChunkEncoder, ConvChunkEncoder, WithPosition
from .c2f.coarse_to_fine import C2FAttention, c2f_read, c2f_step
from .c2f.model import Summarizer, SummarizerOutput
from .common.attention import AttentionOut, FlatAttention, HierAttention, Memory, SourceAttention, flat_step, hier_step
from .common.decoder import Decoder, DecoderState
from .common.encoders import ChunkedWordEncoder, EncodedWords, FlatWordEncoder, WordEncoder
from .common.pretrained import load_word2vec
from .common.rollout import Rollout, rollout
from .common.rows import repeat_rows, select_rows
from .config import ATTENTIONS, CHUNK_ENCODERS, ModelConfig
from .loading import load_model, read_checkpoint
from .paulus.model import PaulusState, PaulusSummarizer
from .registry import (  # (registry.ATTENTIONS: by module)
    DECODERS,
    ENCODERS,
    FAMILIES,
    GENERATORS,
    Registry,
    build_model,
)

__all__ = [
    "ATTENTIONS",
    "CHUNK_ENCODERS",
    "DECODERS",
    "ENCODERS",
    "FAMILIES",
    "GENERATORS",
    "AttentionOut",
    "BowChunkEncoder",
    "C2FAttention",
    "ChunkEncoder",
    "ChunkedWordEncoder",
    "ConvChunkEncoder",
    "Decoder",
    "DecoderState",
    "EncodedWords",
    "FlatAttention",
    "FlatWordEncoder",
    "HierAttention",
    "Memory",
    "ModelConfig",
    "PaulusState",
    "PaulusSummarizer",
    "Registry",
    "Rollout",
    "SourceAttention",
    "Summarizer",
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
