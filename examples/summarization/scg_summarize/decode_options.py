"""Search settings ([`DecodeOptions`][scg_summarize.decode_options.DecodeOptions]) and the finished-hypothesis record.

`DecodeOptions` is the one source of the decoding settings. Each field carries, in its dataclass
metadata, a [`Setting`][scg_summarize.decode_options.Setting]: its command-line flag, its help
text and its allowed values. From it come

* the ``[eval]`` table of a run configuration, whose keys are the field names
  (``scg_summarize.train.config.EvalConfig`` holds a ``DecodeOptions``);
* the search flags of ``scg-summarize summarize`` and ``evaluate``
  (``scg_summarize.commands._decoding_args``), one per field;
* the checks: a bad value is refused with the field (or flag) named, the allowed values and the
  value found, wherever it came from.

The field defaults are the project's documented settings (beam 4, 10-40 words, trigram blocking,
``<unk>`` replaced by the most attended source word); a family's configuration may set others in
its ``[eval]`` table (``docs/evaluation.md`` lists them). A command takes each field from the
command line, else from the run's ``[eval]`` table, else from these defaults
([`DecodeOptions.updated`][scg_summarize.decode_options.DecodeOptions.updated]).

Lengths count generated words *without* ``</s>``: a hypothesis of length ``L`` has ``L`` words
followed by ``</s>``. Length normalization divides the summed log-probability by
``(L + 1) ** length_penalty`` (the ``+ 1`` counts ``</s>``), so ``length_penalty=0`` ranks by
total log-probability (the exact-argmax setting) and ``1`` by the average per word.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal

from .typed import did_you_mean

if TYPE_CHECKING:
    import torch

__all__ = [
    "DEFAULT_MIN_LEN",
    "EVAL_TABLE_OTHER_KEYS",
    "UNK_MODES",
    "DecodeOptions",
    "Hypothesis",
    "Setting",
    "default_min_len",
    "describe_options",
    "option_problems",
    "setting_of",
]

UnkMode = Literal["allow", "forbid", "replace"]
UNK_MODES: tuple[str, ...] = ("allow", "forbid", "replace")

#: The default minimum summary length (words) for the default ``max_len`` of 40.
DEFAULT_MIN_LEN = 10

#: The keys of a run's ``[eval]`` table that are not search settings
#: (``scg_summarize.train.config.EvalConfig``'s own fields).
EVAL_TABLE_OTHER_KEYS: tuple[str, ...] = ("batch_size", "max_examples")


@dataclass(frozen=True, kw_only=True, slots=True)
class Setting:
    """The user-facing side of a `DecodeOptions` field (stored in its metadata).

    Attributes:
        flag: the command-line flag of ``summarize`` and ``evaluate`` (the TOML key is the field name).
        help: the help text.
        expected: the allowed values in words (``"an integer >= 1"``), for error messages.
        test: whether a value (already of the field's type, as TOML or the flag's parser gives it)
            is allowed.
        parse: turns the flag's text into a value (``None``: an on/off flag).
        choices: the allowed words of a string setting.
        metavar: the flag's placeholder in ``--help``.
    """

    flag: str
    help: str
    expected: str
    test: Callable[[Any], bool]
    parse: Callable[[str], Any] | None = None
    choices: tuple[str, ...] = ()
    metavar: str | None = None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_at_least(low: int) -> Callable[[Any], bool]:
    return lambda v: _is_int(v) and v >= low


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _setting(default: Any, **setting: Any) -> Any:
    """A `DecodeOptions` field: its default and, in its metadata, its `Setting`."""
    return field(default=default, metadata={"setting": Setting(**setting)})


def _switch(*, flag: str, help: str) -> Any:
    """An on/off `DecodeOptions` field (default off; the flag takes no value)."""
    return _setting(False, flag=flag, help=help, expected="true or false", test=lambda v: isinstance(v, bool))


@dataclass(frozen=True, kw_only=True, slots=True)
class DecodeOptions:
    """How to search (see the module docstring; each field's `Setting` says more).

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
            (``"*"`` records all of them). A name the decoder does not return is refused
            when it declares its ``offered_extras`` (the project's decoders do; see
            ``scg_summarize.decoding.protocol``), and recorded nowhere otherwise.
        recombine: hypothesis recombination in beam search (Rush et al. 2015, Algorithm 1): of
            the live hypotheses of an example that end in the same ``C`` words, only the best is
            kept. Exact for a decoder whose state is its last ``C`` words (it must say so with a
            ``markov_window = C`` attribute, e.g. ABS's NNLM) and no constraint that looks further
            back (n-gram blocking does: with ``no_repeat_ngram`` it is a heuristic).
    """

    beam_size: int = _setting(
        4,
        flag="--beam",
        help="beam size",
        expected="an integer >= 1",
        test=_int_at_least(1),
        parse=int,
    )
    greedy: bool = _switch(flag="--greedy", help="greedy search instead of beam search")
    max_len: int = _setting(
        40,
        flag="--max-len",
        help="most words per summary",
        expected="an integer >= 1",
        test=_int_at_least(1),
        parse=int,
    )
    min_len: int | None = _setting(
        None,
        flag="--min-len",
        help=f"fewest words per summary (unset: {DEFAULT_MIN_LEN}, at most a quarter of the most)",
        expected="an integer >= 0 and at most max_len",
        test=lambda v: v is None or (_is_int(v) and v >= 0),
        parse=int,
    )
    length_penalty: float = _setting(
        1.0,
        flag="--length-penalty",
        help="rank finished hypotheses by log-prob / (length + 1) ** ALPHA (0 = none)",
        expected="a finite number >= 0",
        test=lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0,
        parse=float,
        metavar="ALPHA",
    )
    no_repeat_ngram: int = _setting(
        3,
        flag="--no-repeat-ngram",
        help="forbid repeating any N-gram (3 = trigram blocking; 0 = off)",
        expected="0 (off) or an integer >= 2",
        test=lambda v: _is_int(v) and (v == 0 or v >= 2),
        parse=int,
        metavar="N",
    )
    unk: UnkMode = _setting(  # noqa: RUF009 (a field, as for the others; ruff does not see the Literal is a str)
        "replace",
        flag="--unk",
        help="<unk> handling: allow it, forbid it, or replace it by the most attended source word",
        expected="one of " + ", ".join(repr(m) for m in UNK_MODES),
        test=lambda v: v in UNK_MODES,
        parse=str,
        choices=UNK_MODES,
    )
    no_repeat_word: bool = _switch(
        flag="--block-repeats", help="forbid generating the word just generated, as in 'the the'"
    )
    block_digits: bool = _switch(flag="--block-digits", help="forbid number tokens ('#', '##.#', digits) in summaries")
    n_best: int = _setting(
        1,
        flag="--n-best",
        help="finished summaries returned per document (at most the beam size; written by summarize --jsonl)",
        expected="an integer >= 1",
        test=_int_at_least(1),
        parse=int,
        metavar="K",
    )
    extras: tuple[str, ...] = _setting(
        (),
        flag="--extras",
        help="model outputs recorded per generated word and written to the JSON lines, comma-separated: "
        "coarse_attn, chunk_read, word_attn (* = all; --attention records all the attention)",
        expected="a list of names",
        test=lambda v: isinstance(v, (tuple, list)) and all(isinstance(e, str) for e in v),
        parse=_names,
        metavar="NAMES",
    )
    recombine: bool = _switch(
        flag="--recombine",
        help="merge beam hypotheses that end in the same C words (Rush et al. 2015; exact for a decoder "
        "whose state is its last C words, such as ABS's NNLM)",
    )

    def __post_init__(self) -> None:
        if isinstance(self.extras, list):
            object.__setattr__(self, "extras", tuple(self.extras))  # (a TOML array)
        problems = option_problems({f.name: getattr(self, f.name) for f in fields(self)})
        if problems:
            raise ValueError("; ".join(problems))
        if self.min_len is None:
            object.__setattr__(self, "min_len", default_min_len(self.max_len))

    @classmethod
    def from_eval_table(
        cls, table: Mapping[str, Any] | None, other_keys: tuple[str, ...] = EVAL_TABLE_OTHER_KEYS
    ) -> DecodeOptions:
        """The search settings of a run's ``[eval]`` table (``config.json``): every key is a field
        of this class or one of ``other_keys`` (the table's settings that are not search settings,
        skipped); the defaults for ``None``. Raises ``ValueError`` naming a bad or unknown key (the
        table of a run written before the keys were the field names: ``eval.beam: unknown option``)."""
        values = dict(table or {})
        problems = option_problems(values, prefix="eval.", also_known=other_keys)
        if problems:
            raise ValueError("; ".join(problems))
        return cls(**{key: value for key, value in values.items() if key not in other_keys})

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

    def updated(self, changes: Mapping[str, Any]) -> DecodeOptions:
        """These options with ``changes`` (field -> value) applied, as a command applies its flags
        over a run's settings: a ``min_len`` that was the default for the old ``max_len`` follows a
        new ``max_len``, and a ``beam_size`` given without ``greedy`` turns greedy search off.
        Raises ``ValueError`` naming a bad field."""
        changes = dict(changes)
        unknown = sorted(set(changes) - {f.name for f in fields(self)})
        if unknown:
            raise ValueError(f"unknown decoding option(s) {', '.join(unknown)}")
        if "max_len" in changes and "min_len" not in changes and self.min_len == default_min_len(self.max_len):
            changes["min_len"] = None
        if "beam_size" in changes and "greedy" not in changes:
            changes["greedy"] = False
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable dict (stored next to outputs; the ``[eval]`` keys)."""
        values = asdict(self)
        values["extras"] = list(self.extras)
        return values


def default_min_len(max_len: int) -> int:
    """The ``min_len`` used when none is set: `DEFAULT_MIN_LEN`, at most a quarter of ``max_len``."""
    return min(DEFAULT_MIN_LEN, max_len // 4)


def setting_of(name: str) -> Setting:
    """The `Setting` of the `DecodeOptions` field ``name``."""
    found = {f.name: f for f in fields(DecodeOptions)}
    if name not in found:
        raise KeyError(f"DecodeOptions has no field {name!r}")
    setting: Setting = found[name].metadata["setting"]
    return setting


def option_problems(values: Mapping[str, Any], prefix: str = "", also_known: tuple[str, ...] = ()) -> list[str]:
    """Every problem of the `DecodeOptions` fields ``values`` (as a TOML table or a caller gives
    them), one line each: ``PREFIX+FIELD: expected ..., got ...`` (or an unknown field; the keys
    ``also_known`` are skipped, and listed as known). Empty when `DecodeOptions` (**values) is
    valid."""
    known = {f.name: f.metadata["setting"] for f in fields(DecodeOptions)}
    problems: list[str] = []
    for name, value in values.items():
        setting = known.get(name)
        if name in also_known:
            continue
        if setting is None:
            names = (*known, *also_known)
            problems.append(f"{prefix}{name}: unknown option{did_you_mean(name, names)} (known: {', '.join(names)})")
        elif not setting.test(value):
            problems.append(f"{prefix}{name}: expected {setting.expected}, got {value!r}")
    if problems:
        return problems
    values = {f.name: values.get(f.name, f.default) for f in fields(DecodeOptions)}  # (unset: the defaults)
    max_len, min_len = values["max_len"], values["min_len"]
    if min_len is not None and min_len > max_len:
        problems.append(f"{prefix}min_len: expected at most max_len={max_len}, got {min_len}")
    width = 1 if values["greedy"] else values["beam_size"]
    if values["n_best"] > width:
        search = "greedy search keeps 1 summary" if values["greedy"] else f"the beam size is {width}"
        problems.append(
            f"{prefix}n_best: expected at most the summaries the search keeps ({search}), got {values['n_best']}"
        )
    return problems


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
