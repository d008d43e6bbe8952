"""The search options of ``summarize`` and ``evaluate``, with one source of defaults.

Every option defaults to ``None`` (not given); :func:`decode_options` then takes the value from
the run's ``[eval]`` table when it has one, else from :class:`~scg_summarize.decoding.DecodeOptions`'
field defaults (the documented settings: beam 4, 10-40 words, trigram blocking, ``<unk>``
replaced). The help texts show those defaults, read from the same class, so the command line, the
configuration files and the Python API cannot disagree.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

from ..decoding.beam import markov_window
from ..decoding.options import UNK_MODES, DecodeOptions, resolve_decode_options

__all__ = [
    "DECODE_FLAGS",
    "add_decode_arguments",
    "check_recombine",
    "decode_options",
    "decode_options_with_sources",
    "describe_sources",
    "positive_int",
]

_D = DecodeOptions()

#: argparse destination -> :class:`DecodeOptions` field.
DECODE_FLAGS: dict[str, str] = {
    "beam": "beam_size",
    "greedy": "greedy",
    "max_len": "max_len",
    "min_len": "min_len",
    "length_penalty": "length_penalty",
    "no_repeat_ngram": "no_repeat_ngram",
    "unk": "unk",
    "block_repeats": "no_repeat_word",
    "block_digits": "block_digits",
    "recombine": "recombine",
}


def positive_int(text: str) -> int:
    """``argparse`` type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def add_decode_arguments(parser: argparse.ArgumentParser) -> None:
    """Search options (beam, lengths, normalization, blocking, ``<unk>``, coarse top-k) and the
    batching/placement options of decoding."""
    group = parser.add_argument_group(
        "decoding (defaults: the run's [eval] table, else the documented settings shown here)"
    )
    group.add_argument("--beam", type=positive_int, default=None, help=f"beam size (default {_D.beam_size})")
    group.add_argument(
        "--greedy", action="store_const", const=True, default=None, help="greedy search instead of beam search"
    )
    group.add_argument(
        "--max-len", type=positive_int, default=None, help=f"most words per summary (default {_D.max_len})"
    )
    group.add_argument(
        "--min-len",
        type=int,
        default=None,
        help=f"fewest words per summary (default {_D.min_len}, at most a quarter of --max-len)",
    )
    group.add_argument(
        "--length-penalty",
        type=float,
        default=None,
        metavar="ALPHA",
        help=f"rank finished hypotheses by log-prob / (length + 1) ** ALPHA (default {_D.length_penalty:g}; 0 = none)",
    )
    group.add_argument(
        "--no-repeat-ngram",
        type=int,
        default=None,
        metavar="N",
        help=f"forbid repeating any N-gram (3 = trigram blocking; 0 = off; default {_D.no_repeat_ngram})",
    )
    group.add_argument(
        "--unk",
        choices=UNK_MODES,
        default=None,
        help=f"<unk> handling (default {_D.unk}: the most attended source word)",
    )
    group.add_argument(
        "--block-repeats",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="forbid generating the word just generated, as in 'the the' (default off)",
    )
    group.add_argument(
        "--block-digits",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="forbid number tokens ('#', '##.#', digits) in summaries (default off)",
    )
    group.add_argument(
        "--recombine",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="merge beam hypotheses that end in the same C words (Rush et al. 2015; exact for a "
        "decoder whose state is its last C words, such as ABS's NNLM; default off)",
    )
    group.add_argument(
        "--coarse-topk",
        type=positive_int,
        default=None,
        metavar="K",
        help="chunks read per step by C2F at test time (1 = argmax; >1 = +MULTI; default: the run's setting)",
    )
    group.add_argument("--batch-size", type=positive_int, default=32)
    group.add_argument("--checkpoint", default=None, help="a specific checkpoint of the run (default: the best)")
    group.add_argument("--device", default="cpu")
    group.add_argument("--threads", type=int, default=0, help="torch CPU threads (default 0: torch's choice)")


def decode_options(
    args: argparse.Namespace, extras: Iterable[str] = (), run_table: Mapping[str, Any] | None = None
) -> DecodeOptions:
    """:class:`DecodeOptions` from parsed arguments over the run's ``[eval]`` table over the
    defaults (raises ``ValueError`` naming the option)."""
    options, _ = decode_options_with_sources(args, extras, run_table)
    return options


def decode_options_with_sources(
    args: argparse.Namespace, extras: Iterable[str] = (), run_table: Mapping[str, Any] | None = None
) -> tuple[DecodeOptions, dict[str, str]]:
    """:func:`decode_options` and, per field not at its default, where the value came from."""
    flags = {field: getattr(args, dest, None) for dest, field in DECODE_FLAGS.items()}
    try:
        return resolve_decode_options(flags, run_table, n_best=getattr(args, "n_best", 1), extras=tuple(extras))
    except (ValueError, TypeError) as err:
        raise ValueError(f"bad decoding option: {err}") from None


def describe_sources(options: DecodeOptions, sources: Mapping[str, str]) -> str:
    """Where the search settings that differ from the documented defaults of
    :class:`~scg_summarize.decoding.DecodeOptions` came from, for the line ``evaluate`` prints:
    the command line or the run's ``[eval]`` table (its configuration's, i.e. its family's
    decoding defaults)."""
    flag = {field: dest.replace("_", "-") for dest, field in DECODE_FLAGS.items()}
    shorter = DecodeOptions(max_len=options.max_len)  # (the default min_len depends on max_len)

    def default(name: str) -> Any:
        return getattr(shorter if name == "min_len" else _D, name)

    parts = []
    for origin, label in (("command line", "command line"), ("run", "the run's [eval] table")):
        names = [
            f"--{flag.get(name, name)}"
            for name, where in sources.items()
            if where == origin and (origin == "command line" or getattr(options, name) != default(name))
        ]
        if names:
            parts.append(f"{label}: {' '.join(names)}")
    parts.append("the documented defaults for the rest" if parts else "the documented defaults")
    return "; ".join(parts)


def check_recombine(options: DecodeOptions, decoder: object, run: object) -> None:
    """Raise ``ValueError`` when ``options.recombine`` is asked of a decoder it is not exact for."""
    if not options.recombine:
        return
    try:
        markov_window(decoder)
    except TypeError:
        raise ValueError(
            f"--recombine merges hypotheses that end in the same C words, which needs a decoder "
            f"whose state is its last C words (ABS's NNLM); {run} decodes with "
            f"{type(decoder).__name__}, whose state is not"
        ) from None
