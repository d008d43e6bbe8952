"""The search flags of ``summarize`` and ``evaluate``, generated from `DecodeOptions`' fields.

Each field of [`DecodeOptions`][scg_summarize.decode_options.DecodeOptions] has one flag, named
with its help text and allowed values in the field's metadata
([`Setting`][scg_summarize.decode_options.Setting]); no table here repeats them. Every flag
defaults to "not given": a command takes each field from the command line, else from the run's
``[eval]`` table (its family's documented settings), else from `DecodeOptions`' defaults, and a
bad value is refused by argparse naming the flag (``argument --length-penalty: expected a finite
number >= 0, got nan``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from ..decode_options import DecodeOptions, Setting, default_min_len, setting_of
from ..devices import missing_cuda, parse_device
from ._common import non_negative_int, positive_int

__all__ = [
    "add_decode_arguments",
    "check_recombine",
    "decode_options",
    "describe_sources",
    "given_options",
]

_DEST = "decode_"  #: argparse destination of a field's flag: ``decode_<field>``


def _checked(setting: Setting) -> Callable[[str], Any]:
    """The argparse ``type`` of a flag: its parser, then the field's test (argparse adds the flag)."""
    parse = setting.parse
    assert parse is not None

    def convert(text: str) -> Any:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {setting.expected}, got {text!r}") from None
        if not setting.test(value):
            raise argparse.ArgumentTypeError(f"expected {setting.expected}, got {text!r}")
        return value

    convert.__name__ = setting.flag  # (argparse names the type in some messages)
    return convert


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(value) or "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def add_decode_arguments(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """One flag per `DecodeOptions` field (but the fields ``skip``, which the command would not
    use), then the batching/placement options of decoding."""

    group = parser.add_argument_group(
        "decoding (each flag defaults to the run's [eval] table, else to the default shown; "
        "evaluate prints the settings it uses)"
    )
    defaults = DecodeOptions()
    for item in fields(DecodeOptions):
        if item.name in skip:
            continue
        setting: Setting = item.metadata["setting"]
        shown = "" if item.name == "min_len" else f" (default {_shown(getattr(defaults, item.name))})"
        kwargs: dict[str, Any] = {"dest": _DEST + item.name, "default": None, "help": setting.help + shown}
        if setting.parse is None:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = _checked(setting)
            if setting.choices:
                kwargs["choices"] = setting.choices
            elif setting.metavar:
                kwargs["metavar"] = setting.metavar
        group.add_argument(setting.flag, **kwargs)
    group.add_argument(
        "--coarse-topk",
        type=positive_int,
        default=None,
        metavar="K",
        help="chunks read per step by C2F at test time (1 = argmax; >1 = +MULTI; default: the run's setting)",
    )
    group.add_argument("--batch-size", type=positive_int, default=32)
    group.add_argument("--checkpoint", default=None, help="a specific checkpoint of the run (default: the best)")
    group.add_argument("--device", type=available_device, default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    group.add_argument(
        "--threads", type=non_negative_int, default=0, help="torch CPU threads (default 0: torch's choice)"
    )


def available_device(text: str) -> str:
    """``argparse`` type: a device torch knows that this machine has (``cuda`` without a GPU was
    an error about the checkpoint, which torch could not load onto it)."""
    if text == "cpu":  # (the default, converted by argparse too: --help and usage errors import no torch)
        return text
    if parse_device(text) is None:
        raise argparse.ArgumentTypeError(f"expected cpu, cuda or cuda:N, got {text!r}")
    missing = missing_cuda(text)
    if missing is not None:
        raise argparse.ArgumentTypeError(f"{missing}; expected 'cpu'")
    return text


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The `DecodeOptions` fields given on the command line (field -> value)."""

    given = {item.name: getattr(args, _DEST + item.name, None) for item in fields(DecodeOptions)}
    return {name: value for name, value in given.items() if value is not None}


def decode_options(args: argparse.Namespace, run_options: DecodeOptions | None = None) -> DecodeOptions:
    """The search settings of a command: its flags over ``run_options`` (the run's ``[eval]``
    table) over the defaults. Raises ``ValueError`` naming the flag when they do not fit together
    (``--n-best`` over the beam size, ``--min-len`` over ``--max-len``)."""

    given = given_options(args)
    try:
        return (run_options or DecodeOptions()).updated(given)
    except ValueError as err:
        flags = " ".join(setting_of(name).flag for name in given)
        raise ValueError(f"decoding flags {flags}: {err}" if flags else f"the run's [eval] table: {err}") from None


def describe_sources(options: DecodeOptions, given: Mapping[str, Any], run_options: DecodeOptions | None) -> str:
    """Where the settings that are not `DecodeOptions`' defaults came from, for the line ``evaluate``
    prints: the command line, or the run's ``[eval]`` table (its family's decoding defaults)."""

    defaults = {**DecodeOptions().to_dict(), "min_len": default_min_len(options.max_len)}
    from_run = [
        item.name
        for item in fields(DecodeOptions)
        if item.name not in given and run_options is not None and options.to_dict()[item.name] != defaults[item.name]
    ]
    parts = [
        f"{label}: {' '.join(setting_of(name).flag for name in names)}"
        for label, names in (("command line", list(given)), ("the run's [eval] table", from_run))
        if names
    ]
    parts.append("the documented defaults for the rest" if parts else "the documented defaults")
    return "; ".join(parts)


def check_recombine(options: DecodeOptions, decoder: object, run: object) -> None:
    """Raise ``ValueError`` when ``options.recombine`` is asked of a decoder it is not exact for."""
    if not options.recombine:
        return
    from ..decoding.beam import markov_window

    try:
        markov_window(decoder)
    except TypeError:
        raise ValueError(
            f"--recombine merges hypotheses that end in the same C words, which needs a decoder "
            f"whose state is its last C words (ABS's NNLM); {run} decodes with "
            f"{type(decoder).__name__}, whose state is not"
        ) from None
