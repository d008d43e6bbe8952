"""The summarization data pipeline (readers -> preprocessing -> prepared splits -> batches).

Modules, one concept each:

=============== ===========================================================================
``errors``      `DataError` and the skip report `BadInputReport`
``options``     `PrepOptions` (the paper's preprocessing) and `options_hash`
``tokenizer``   regex PTB-style tokenizer, digit mapping, detokenizer
``sentences``   rule-based sentence splitter
``rawtext``     `RawExample` and the checked line reader
``stories``     CNN/DailyMail ``.story`` files
``readers``     JSON lines, parallel text, and the format dispatcher `read_input`
``vocab``       `Vocab` with ``<pad>``/``<unk>``/``<s>``/``</s>``
``chunking``    grid / sentence chunk layouts and flat views
``preprocess``  `Preprocessor`: raw example -> sentences, tokens, target
``storage``     the on-disk format (memory-mapped arrays + text side file + metadata)
``prepare``     `prepare_corpus`, the streaming two-pass pipeline
``progress``    progress display (tqdm if installed)
``dataset``     `Example` and [`SummarizationDataset`][scg_summarize.data.SummarizationDataset]
``sampler``     `BucketBatchSampler` (seeded, bucketed, resumable)
``batching``    `Batch`, `SourceBatch`, `collate_examples`, `collate_sources`, `make_dataloader`
``synthetic``   the synthetic corpus with a known salient chunk
=============== ===========================================================================

See ``docs/data.md`` for the user guide and the batch format.
"""

from .batching import (
    Batch,
    SourceBatch,
    SourceLengths,
    SummaryLoader,
    collate_examples,
    collate_sources,
    make_dataloader,
)
from .chunking import flat_view, layout_chunks, pack_chunks, pack_flat, regrid
from .dataset import Example, SummarizationDataset, available_splits
from .errors import BadInputReport, DataError
from .options import PrepOptions, options_hash
from .prepare import InputSource, assign_split, prepare_corpus
from .preprocess import Preprocessor, ProcessedExample
from .rawtext import RawExample, iter_lines
from .readers import FORMATS, ReaderConfig, read_input, read_jsonl, read_parallel
from .sampler import BucketBatchSampler
from .sentences import split_sentences
from .storage import ExampleText, load_split, read_meta
from .stories import parse_story, read_stories
from .synthetic import SyntheticConfig, generate_examples, make_synthetic_corpus
from .tokenizer import detokenize, tokenize
from .vocab import BOS, EOS, PAD, UNK, Vocab

__all__ = [
    "BOS",
    "EOS",
    "FORMATS",
    "PAD",
    "UNK",
    "BadInputReport",
    "Batch",
    "BucketBatchSampler",
    "DataError",
    "Example",
    "ExampleText",
    "InputSource",
    "PrepOptions",
    "Preprocessor",
    "ProcessedExample",
    "RawExample",
    "ReaderConfig",
    "SourceBatch",
    "SourceLengths",
    "SummarizationDataset",
    "SummaryLoader",
    "SyntheticConfig",
    "Vocab",
    "assign_split",
    "available_splits",
    "collate_examples",
    "collate_sources",
    "detokenize",
    "flat_view",
    "generate_examples",
    "iter_lines",
    "layout_chunks",
    "load_split",
    "make_dataloader",
    "make_synthetic_corpus",
    "options_hash",
    "pack_chunks",
    "pack_flat",
    "parse_story",
    "prepare_corpus",
    "read_input",
    "read_jsonl",
    "read_meta",
    "read_parallel",
    "read_stories",
    "regrid",
    "split_sentences",
    "tokenize",
]
