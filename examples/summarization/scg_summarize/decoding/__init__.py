"""Decoding: beam and greedy search over any model that implements the step protocol.

=============== ===========================================================================
``protocol``    :class:`StepDecoder` (``init_state`` / ``step`` / ``reorder``) and extras
``blocking``    constraints: lengths, ``<unk>``, no-repeat n-gram (trigram) blocking
``beam``        batched beam search with length normalization
``greedy``      greedy search
``inputs``      raw text / prepared splits -> :class:`SourceDocument` and batches
``summarizer``  :class:`Summarizer`: search, ``<unk>`` replacement, detokenized sentences
``adapters``    :class:`ModelStepDecoder`: a model of any family as a step decoder
``loading``     :func:`load_run`: a run directory -> decoder, vocabulary, preprocessing
``wrapped``     wrapped plain text: detection, and a whole file as one document
=============== ===========================================================================

The search settings, `DecodeOptions`, live in the torch-free `scg_summarize.decode_options` (the
command-line parsers read them without importing torch). See ``docs/evaluation.md``.
"""

from ..decode_options import DecodeOptions, Hypothesis
from .adapters import ModelStepDecoder
from .beam import beam_search
from .blocking import SpecialIds, apply_constraints, banned_ngram_mask, block_repeated_ngrams
from .greedy import greedy_search
from .inputs import SourceDocument, documents_from_split, encode_text, read_documents
from .loading import LoadedRun, RunLoadError, load_run
from .protocol import StepDecoder, check_step_output
from .summarizer import Summarizer, Summary, decode_batch
from .wrapped import looks_wrapped, read_document

__all__ = [
    "DecodeOptions",
    "Hypothesis",
    "LoadedRun",
    "ModelStepDecoder",
    "RunLoadError",
    "SourceDocument",
    "SpecialIds",
    "StepDecoder",
    "Summarizer",
    "Summary",
    "apply_constraints",
    "banned_ngram_mask",
    "beam_search",
    "block_repeated_ngrams",
    "check_step_output",
    "decode_batch",
    "documents_from_split",
    "encode_text",
    "greedy_search",
    "load_run",
    "looks_wrapped",
    "read_document",
    "read_documents",
]
