"""A synthetic summarization corpus with a known answer (the bundled demo/test data).

Every document has ``M`` chunks (one "sentence" each) of made-up words. Exactly one chunk is
*salient*: it contains a marker word (one of a few reserved words never used elsewhere). The
reference summary restates the salient chunk's content words, in order, with

* paraphrase: words that have a synonym in the generated lexicon are replaced by it with
  probability ``p_synonym``;
* word dropout (probability ``p_drop``, never below ``min_summary`` words);
* noise: a filler word inserted after a word with probability ``p_noise``;

and is cut to ``max_summary`` words. Distractor chunks draw from the same content vocabulary,
so a model has to find the marker (the salient chunk index is stored per example, making
coarse-attention accuracy measurable) and then copy/paraphrase that chunk.

All words are generated from syllables (no third-party text); everything is deterministic
under the seed. [`make_synthetic_corpus`][scg_summarize.data.make_synthetic_corpus] writes the same prepared format as
``scg-summarize prepare`` (layout ``sentences``: chunk ``i`` is sentence ``i``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .errors import BadInputReport
from .options import PrepOptions
from .prepare import InputSource, prepare_corpus
from .rawtext import RawExample

__all__ = [
    "Lexicon",
    "SyntheticConfig",
    "generate_examples",
    "make_lexicon",
    "make_synthetic_corpus",
    "synthetic_options",
]

_ONSETS = tuple("b d f g k l m n p r s t v z br dr gl kr pl st tr sk".split())
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "ei")
_CODAS = ("", "", "", "n", "r", "l", "s", "k", "m")


@dataclass(frozen=True)
class SyntheticConfig:
    """Shape and noise of the synthetic corpus (defaults: ~400 words, 8 chunks of <= 15 words).

    Attributes:
        num_chunks: M, chunks per document.
        chunk_len: N; chunks have ``min_chunk_words`` to ``chunk_len - 1`` words (room for
            ``</s>``).
        min_chunk_words: the shortest chunk.
        content_words: size of the content vocabulary shared by all chunks.
        synonym_words: how many content words have a (distinct, made-up) synonym.
        num_markers: reserved marker words; one marks the salient chunk.
        filler_words: noise words that may be inserted into summaries.
        p_synonym: probability of paraphrasing a word that has a synonym.
        p_drop: word dropout probability in the summary.
        p_noise: probability of inserting a filler word after a summary word.
        min_summary: fewest summary words.
        max_summary: most summary words.
        num_refs: references per example (independent paraphrases; the first is the target).
    """

    num_chunks: int = 8
    chunk_len: int = 16
    min_chunk_words: int = 6
    content_words: int = 300
    synonym_words: int = 80
    num_markers: int = 4
    filler_words: int = 16
    p_synonym: float = 0.5
    p_drop: float = 0.1
    p_noise: float = 0.1
    min_summary: int = 5
    max_summary: int = 12
    num_refs: int = 2

    def __post_init__(self) -> None:
        if self.num_chunks < 2:
            raise ValueError("num_chunks must be at least 2 (one salient, one distractor)")
        if not 2 <= self.min_chunk_words <= self.chunk_len - 1:
            raise ValueError("need 2 <= min_chunk_words <= chunk_len - 1")
        if self.min_chunk_words - 1 < self.min_summary:
            raise ValueError("min_chunk_words - 1 (content words) must be >= min_summary")
        if not 1 <= self.min_summary <= self.max_summary:
            raise ValueError("need 1 <= min_summary <= max_summary")
        if self.synonym_words > self.content_words or self.chunk_len > self.content_words:
            raise ValueError("content_words too small for synonym_words / chunk_len")
        if min(self.num_markers, self.filler_words, self.num_refs) < 1:
            raise ValueError("num_markers, filler_words and num_refs must be positive")


@dataclass(frozen=True)
class Lexicon:
    """The generated vocabulary: content words, their synonyms, markers and fillers."""

    content: tuple[str, ...]
    synonyms: dict[str, str]
    markers: tuple[str, ...]
    fillers: tuple[str, ...]

    @property
    def size(self) -> int:
        """The number of distinct words."""
        return len(self.content) + len(self.synonyms) + len(self.markers) + len(self.fillers)


def make_lexicon(config: SyntheticConfig, seed: int) -> Lexicon:
    """Generate unique made-up words for every role (deterministic in ``seed``).

    A pure function of its arguments, memoised (a corpus's three splits, and every corpus made
    with the same config and seed, share one lexicon); each caller gets its own ``synonyms`` dict,
    so no caller can change another's lexicon.
    """
    lexicon = _make_lexicon(config, seed)
    return replace(lexicon, synonyms=dict(lexicon.synonyms))


@functools.lru_cache(maxsize=16)
def _make_lexicon(config: SyntheticConfig, seed: int) -> Lexicon:
    rng = np.random.default_rng([seed, 0])
    needed = config.content_words + config.synonym_words + config.num_markers
    needed += config.filler_words
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < needed:
        syllables = int(rng.integers(2, 4))
        parts = [_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))] for _ in range(syllables)]
        word = "".join(parts) + _CODAS[rng.integers(len(_CODAS))]
        if word not in seen:
            seen.add(word)
            words.append(word)
    c, s, m = config.content_words, config.synonym_words, config.num_markers
    content = tuple(words[:c])
    with_synonym = rng.choice(c, size=s, replace=False)
    synonyms = {content[int(i)]: words[c + k] for k, i in enumerate(sorted(with_synonym))}
    return Lexicon(
        content=content,
        synonyms=synonyms,
        markers=tuple(words[c + s : c + s + m]),
        fillers=tuple(words[c + s + m :]),
    )


def _paraphrase(words: list[str], lexicon: Lexicon, config: SyntheticConfig, rng: np.random.Generator) -> list[str]:
    keep = rng.random(len(words)) >= config.p_drop
    shortfall = config.min_summary - int(keep.sum())
    if shortfall > 0:  # undo random drops until the summary is long enough
        dropped = np.flatnonzero(~keep)
        keep[rng.choice(dropped, size=shortfall, replace=False)] = True
    out: list[str] = []
    for word, kept in zip(words, keep, strict=True):
        if not kept:
            continue
        synonym = lexicon.synonyms.get(word)
        out.append(synonym if synonym and rng.random() < config.p_synonym else word)
        if rng.random() < config.p_noise:
            out.append(lexicon.fillers[rng.integers(len(lexicon.fillers))])
    return out[: config.max_summary]


def generate_examples(
    n: int, config: SyntheticConfig, seed: int, stream: int = 0, *, prefix: str = "syn"
) -> Iterator[RawExample]:
    """Yield ``n`` synthetic examples; ``stream`` selects an independent sequence (split).

    Each example's ``source`` holds the chunks as sentences (``sentences_given``), its
    ``salient`` field the index of the salient chunk.
    """
    lexicon = make_lexicon(config, seed)
    rng = np.random.default_rng([seed, stream + 1])
    content = np.array(lexicon.content)
    for i in range(n):
        salient = int(rng.integers(config.num_chunks))
        chunks: list[list[str]] = []
        for _ in range(config.num_chunks):
            length = int(rng.integers(config.min_chunk_words, config.chunk_len))
            chunks.append(content[rng.choice(len(content), size=length, replace=False)].tolist())
        body = chunks[salient][:-1]  # the marker takes one slot of the salient chunk
        marker = lexicon.markers[rng.integers(len(lexicon.markers))]
        at = int(rng.integers(len(body) + 1))
        chunks[salient] = [*body[:at], marker, *body[at:]]
        references = [" ".join(_paraphrase(body, lexicon, config, rng)) for _ in range(config.num_refs)]
        yield RawExample(
            id=f"{prefix}-{stream}-{i}",
            source=[" ".join(chunk) for chunk in chunks],
            references=references,
            sentences_given=True,
            origin=f"synthetic:{stream}:{i}",
            salient=salient,
        )


def synthetic_options(config: SyntheticConfig) -> PrepOptions:
    """The preprocessing options used for the synthetic corpus (sentence layout)."""
    return PrepOptions(
        tokenizer="whitespace",
        split_sentences=False,
        layout="sentences",
        num_chunks=config.num_chunks,
        chunk_len=config.chunk_len,
        max_target_len=0,
    )


def make_synthetic_corpus(
    out_dir: str | Path,
    n_train: int = 2000,
    n_valid: int = 200,
    n_test: int = 200,
    num_chunks: int = 8,
    chunk_len: int = 16,
    seed: int = 0,
    *,
    config: SyntheticConfig | None = None,
    overwrite: bool = False,
    show_progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Generate and prepare train/valid/test splits under ``out_dir``; returns the metadata.

    ``num_chunks``/``chunk_len`` override the corresponding ``config`` fields. The lexicon
    (content words, synonym pairs, markers, fillers) is stored in ``meta.json`` under
    ``synthetic``.
    """
    base = config or SyntheticConfig()
    config = SyntheticConfig(**{**asdict(base), "num_chunks": num_chunks, "chunk_len": chunk_len})
    lexicon = make_lexicon(config, seed)
    inputs = []
    sizes = (("train", n_train), ("valid", n_valid), ("test", n_test))
    for stream, (split, n) in enumerate(sizes):
        if n <= 0:
            continue

        def opener(_: BadInputReport, n: int = n, stream: int = stream) -> Iterator[RawExample]:
            return generate_examples(n, config, seed, stream)

        inputs.append(InputSource(name=f"synthetic:{split}", split=split, open=opener))
    extra = {
        "synthetic": {
            "seed": seed,
            "config": asdict(config),
            "lexicon": {
                "markers": list(lexicon.markers),
                "fillers": list(lexicon.fillers),
                "synonyms": lexicon.synonyms,
                "num_content_words": len(lexicon.content),
            },
        }
    }
    return prepare_corpus(
        inputs,
        out_dir,
        synthetic_options(config),
        overwrite=overwrite,
        show_progress=show_progress,
        extra_meta=extra,
        log=log,
    )
