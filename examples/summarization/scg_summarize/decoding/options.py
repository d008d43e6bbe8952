"""Search settings ([`DecodeOptions`][scg_summarize.decoding.options.DecodeOptions]) and the finished-hypothesis record.

`DecodeOptions`' field defaults are *the* decoding defaults of the project, the settings
documented in ``docs/evaluation.md`` and used for ``docs/results.md``: beam 4, 10-40 words,
trigram blocking, ``<unk>`` replaced by the most attended source word. Everything else takes its
defaults from here: the ``[eval]`` table of a run configuration
(``scg_summarize.train.config.EvalConfig``), the command-line options of ``summarize`` and
``evaluate``, and `resolve_decode_options`, which merges the three in the order
*command line > the run's* ``[eval]`` *table > these defaults*.

Lengths count generated words *without* ``</s>``: a hypothesis of length ``L`` has ``L`` words
followed by ``</s>``. Length normalization divides the summed log-probability by
``(L + 1) ** length_penalty`` (the ``+ 1`` counts ``</s>``), so ``length_penalty=0`` ranks by
total log-probability (the exact-argmax setting) and ``1`` by the average per word.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import torch

__all__ = [
    "DEFAULT_MIN_LEN",
    "EVAL_TABLE_KEYS",
    "UNK_MODES",
    "DecodeOptions",
    "Hypothesis",
    "describe_options",
    "options_from_eval_table",
    "resolve_decode_options",
]

UnkMode = Literal["allow", "forbid", "replace"]
UNK_MODES: tuple[str, ...] = ("allow", "forbid", "replace")


#: The default minimum summary length (words) for the default ``max_len`` of 40.
DEFAULT_MIN_LEN = 10


@dataclass(frozen=True)
class DecodeOptions:
    """How to search.

    Attributes:
        beam_size: hypotheses kept per example (1 with ``greedy`` is plain greedy search).
        greedy: use greedy search (``beam_size`` is then ignored).
        max_len: the most words a summary may have (``</s>`` is forced after them).
        min_len: ``</s>`` is forbidden before this many words (default: `DEFAULT_MIN_LEN`,
            but at most a quarter of ``max_len``, so that ``max_len`` alone can be lowered).
        length_penalty: the exponent ``alpha`` of the length normalization (0 = none).
        no_repeat_ngram: forbid any word that would repeat an n-gram of this size already in
            the hypothesis (3 = trigram blocking, Paulus et al. 2018; 0 = off).
        unk: ``"allow"`` ``<unk>`` like any word, ``"forbid"`` it (its probability is set to 0),
            or ``"replace"`` each generated ``<unk>`` by the source word with the highest word
            attention at that step (kept as ``<unk>`` when the model has no ``word_attn``).
        no_repeat_word: forbid generating the word just generated (immediate repeats such as
            "the the"; trigram blocking alone allows one such bigram).
        block_digits: forbid number tokens: words made only of digits, ``#`` (digits of
            corpora prepared with digit mapping) and number punctuation (``##.#``, ``#,###``).
        n_best: finished hypotheses returned per example (at most ``beam_size``).
        extras: names of the model's ``extras`` (attention) to record for every generated word
            (``"*"`` records all of them; names the model does not return are ignored).
        recombine: hypothesis recombination in beam search (Rush et al. 2015, Algorithm 1): of
            the live hypotheses of an example that end in the same ``C`` words, only the best is
            kept. Exact for a decoder whose state is its last ``C`` words (it must say so with a
            ``markov_window = C`` attribute, e.g. ABS's NNLM) and no constraint that looks further
            back (n-gram blocking does: with ``no_repeat_ngram`` it is a heuristic).
    """

    beam_size: int = 4
    greedy: bool = False
    max_len: int = 40
    min_len: int | None = None  # None: DEFAULT_MIN_LEN, at most max_len // 4 (set in __post_init__)
    length_penalty: float = 1.0
    no_repeat_ngram: int = 3
    unk: UnkMode = "replace"
    no_repeat_word: bool = False
    block_digits: bool = False
    n_best: int = 1
    extras: tuple[str, ...] = ()
    recombine: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.beam_size, int) or self.beam_size < 1:
            raise ValueError(f"beam_size must be a positive integer, got {self.beam_size!r}")
        if not isinstance(self.max_len, int) or self.max_len < 1:
            raise ValueError(f"max_len must be a positive integer, got {self.max_len!r}")
        if self.min_len is None:
            object.__setattr__(self, "min_len", min(DEFAULT_MIN_LEN, self.max_len // 4))
        if not isinstance(self.min_len, int) or not 0 <= self.min_len <= self.max_len:
            raise ValueError(f"min_len must be in [0, max_len={self.max_len}], got {self.min_len!r}")
        if not isinstance(self.length_penalty, (int, float)) or not 0 <= self.length_penalty < float("inf"):
            raise ValueError(f"length_penalty must be a finite number >= 0, got {self.length_penalty!r}")
        if not isinstance(self.no_repeat_ngram, int) or self.no_repeat_ngram < 0 or self.no_repeat_ngram == 1:
            raise ValueError(f"no_repeat_ngram must be 0 (off) or >= 2, got {self.no_repeat_ngram!r}")
        if self.unk not in UNK_MODES:
            raise ValueError(f"unk must be one of {UNK_MODES}, got {self.unk!r}")
        for flag in ("greedy", "no_repeat_word", "block_digits"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag} must be true or false, got {getattr(self, flag)!r}")
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


#: ``[eval]`` table key of a run configuration -> [`DecodeOptions`][scg_summarize.decoding.options.DecodeOptions] field.
EVAL_TABLE_KEYS: dict[str, str] = {
    "beam": "beam_size",
    "max_len": "max_len",
    "min_len": "min_len",
    "block_ngram": "no_repeat_ngram",
    "length_penalty": "length_penalty",
    "unk": "unk",
    "no_repeat_word": "no_repeat_word",
    "block_digits": "block_digits",
}


def options_from_eval_table(table: Mapping[str, Any] | None) -> dict[str, Any]:
    """The `DecodeOptions` fields set by a run's ``[eval]`` table (other keys, such as
    ``batch_size``, are ignored). ``beam = 1`` means greedy search."""
    fields: dict[str, Any] = {}
    for key, name in EVAL_TABLE_KEYS.items():
        if table is not None and table.get(key) is not None:
            fields[name] = table[key]
    if fields.get("beam_size") == 1:
        fields["greedy"] = True
    return fields


def resolve_decode_options(
    flags: Mapping[str, Any], run_table: Mapping[str, Any] | None = None, **fixed: Any
) -> tuple[DecodeOptions, dict[str, str]]:
    """The search settings of a command: each field from the command line (``flags``: field ->
    value, ``None`` = not given), else from the run's ``[eval]`` table, else the default.

    ``fixed`` fields (``extras``, ``n_best``) are set as given. Returns the options and, per
    field that is not the default, where its value came from (``"command line"`` or ``"run"``).
    Raises ``ValueError`` naming the bad field.
    """
    values: dict[str, Any] = {}
    source: dict[str, str] = {}
    for name, value in options_from_eval_table(run_table).items():
        values[name], source[name] = value, "run"
    if flags.get("beam_size") is not None and flags.get("greedy") is None and values.get("greedy"):
        values["greedy"] = False  # an explicit --beam K overrides the run's greedy setting
    for name, value in flags.items():
        if value is not None:
            values[name], source[name] = value, "command line"
    options = DecodeOptions(**{**values, **fixed})
    return options, source


def describe_options(options: DecodeOptions) -> str:
    """A short description such as ``beam 4, 10-40 words, no repeated 3-grams, <unk> replace``."""
    parts = ["greedy" if options.greedy else f"beam {options.beam_size}", f"{options.min_len}-{options.max_len} words"]
    if options.length_penalty != 1.0:
        parts.append(f"length penalty {options.length_penalty:g}")
    parts.append(f"no repeated {options.no_repeat_ngram}-grams" if options.no_repeat_ngram else "no n-gram blocking")
    parts.append(f"<unk> {options.unk}")
    if options.no_repeat_word:
        parts.append("no immediate word repeats")
    if options.block_digits:
        parts.append("no number tokens")
    if options.recombine:
        parts.append("hypothesis recombination")
    return ", ".join(parts)


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
