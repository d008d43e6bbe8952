"""Search settings (:class:`DecodeOptions`) and the finished-hypothesis record.

Lengths count generated words *without* ``</s>``: a hypothesis of length ``L`` has ``L`` words
followed by ``</s>``. Length normalization divides the summed log-probability by
``(L + 1) ** length_penalty`` (the ``+ 1`` counts ``</s>``), so ``length_penalty=0`` ranks by
total log-probability (the exact-argmax setting) and ``1`` by the average per word.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import torch

__all__ = ["UNK_MODES", "DecodeOptions", "Hypothesis"]

UnkMode = Literal["allow", "forbid", "replace"]
UNK_MODES: tuple[str, ...] = ("allow", "forbid", "replace")


@dataclass(frozen=True)
class DecodeOptions:
    """How to search.

    Attributes:
        beam_size: hypotheses kept per example (1 with ``greedy`` is plain greedy search).
        greedy: use greedy search (``beam_size`` is then ignored).
        max_len: the most words a summary may have (``</s>`` is forced after them).
        min_len: ``</s>`` is forbidden before this many words.
        length_penalty: the exponent ``alpha`` of the length normalization (0 = none).
        no_repeat_ngram: forbid any word that would repeat an n-gram of this size already in
            the hypothesis (3 = trigram blocking, Paulus et al. 2018; 0 = off).
        unk: ``"allow"`` ``<unk>`` like any word, ``"forbid"`` it (its probability is set to 0),
            or ``"replace"`` each generated ``<unk>`` by the source word with the highest word
            attention at that step (kept as ``<unk>`` when the model has no ``word_attn``).
        n_best: finished hypotheses returned per example (at most ``beam_size``).
        extras: names of the model's ``extras`` (attention) to record for every generated word
            (``"*"`` records all of them; names the model does not return are ignored).
        recombine: hypothesis recombination in beam search (Rush et al. 2015, Algorithm 1): of
            the live hypotheses of an example that end in the same ``C`` words, only the best is
            kept. Exact for a decoder whose state is its last ``C`` words (it must say so with a
            ``markov_window = C`` attribute, e.g. ABS's NNLM) and no constraint that looks further
            back (n-gram blocking does: with ``no_repeat_ngram`` it is a heuristic).
    """

    beam_size: int = 5
    greedy: bool = False
    max_len: int = 100
    min_len: int = 0
    length_penalty: float = 1.0
    no_repeat_ngram: int = 0
    unk: UnkMode = "allow"
    n_best: int = 1
    extras: tuple[str, ...] = ()
    recombine: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.beam_size, int) or self.beam_size < 1:
            raise ValueError(f"beam_size must be a positive integer, got {self.beam_size!r}")
        if not isinstance(self.max_len, int) or self.max_len < 1:
            raise ValueError(f"max_len must be a positive integer, got {self.max_len!r}")
        if not isinstance(self.min_len, int) or not 0 <= self.min_len <= self.max_len:
            raise ValueError(f"min_len must be in [0, max_len={self.max_len}], got {self.min_len!r}")
        if self.length_penalty < 0:
            raise ValueError(f"length_penalty must be >= 0, got {self.length_penalty!r}")
        if not isinstance(self.no_repeat_ngram, int) or self.no_repeat_ngram < 0 or self.no_repeat_ngram == 1:
            raise ValueError(f"no_repeat_ngram must be 0 (off) or >= 2, got {self.no_repeat_ngram!r}")
        if self.unk not in UNK_MODES:
            raise ValueError(f"unk must be one of {UNK_MODES}, got {self.unk!r}")
        if not isinstance(self.n_best, int) or self.n_best < 1:
            raise ValueError(f"n_best must be a positive integer, got {self.n_best!r}")
        if isinstance(self.extras, str) or not all(isinstance(e, str) for e in self.extras):
            raise ValueError(f"extras must be a tuple of names, got {self.extras!r}")
        width = 1 if self.greedy else self.beam_size
        if self.n_best > width:
            raise ValueError(f"n_best={self.n_best} exceeds the beam size {width}")

    def wants(self, name: str) -> bool:
        """Whether the extra ``name`` is recorded."""
        return "*" in self.extras or name in self.extras

    @property
    def width(self) -> int:
        """Hypotheses kept per example (1 for greedy search)."""
        return 1 if self.greedy else self.beam_size

    def normalize(self, log_prob: float, length: int) -> float:
        """The ranking score of a finished hypothesis of ``length`` words (``</s>`` excluded)."""
        if self.length_penalty == 0:
            return log_prob
        return float(log_prob / float(length + 1) ** float(self.length_penalty))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable dict (stored next to outputs)."""
        return asdict(self)


@dataclass
class Hypothesis:
    """A finished summary.

    Attributes:
        tokens: the word ids, without ``<s>`` and ``</s>``.
        log_prob: the summed log-probability of the words and ``</s>``.
        score: the ranking score (``log_prob`` after length normalization).
        extras: when requested, each extra stacked over the ``len(tokens) + 1`` steps
            (the last row belongs to ``</s>``): e.g. ``coarse_attn`` ``(L + 1, M)``.
    """

    tokens: list[int]
    log_prob: float
    score: float
    extras: dict[str, torch.Tensor] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.tokens)
