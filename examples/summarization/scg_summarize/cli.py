"""The ``scg-summarize`` command line: the subcommands listed in `COMMANDS`.

Each subcommand is a [`Command`][scg_summarize.commands.Command] in its own module of
`scg_summarize.commands`. Only the options of the command that is run are added to the parser
(a command imports torch, the models or the data pipeline when it adds its options or runs), so
``scg-summarize --help``, ``--version`` and a mistyped command answer without importing torch.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence

from .commands import (
    Command,
    abs_baselines,
    abs_variants,
    baseline,
    compare,
    demo,
    evaluate,
    mal_conditioning,
    prepare,
    report,
    summarize,
    train,
    visualize,
)

__all__ = ["COMMANDS", "build_parser", "main"]

#: The subcommands, in the order ``--help`` lists them (the order of a session's work).
COMMANDS: tuple[Command, ...] = (
    prepare.COMMAND,
    train.COMMAND,
    summarize.COMMAND,
    evaluate.COMMAND,
    report.COMMAND,
    visualize.COMMAND,
    baseline.COMMAND,
    compare.COMMAND,
    demo.COMMAND,
    abs_baselines.COMMAND,
    abs_variants.COMMAND,
    mal_conditioning.COMMAND,
)


@functools.cache
def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser, with one subparser per command; the options are added to the
    subparser of ``selected`` only (to every subparser when ``selected`` is None).

    Built once per ``selected`` and reused (parsing leaves a parser unchanged): `main` called
    in one process many times (notebooks, the test suite) pays argparse's construction, ~5 ms
    of CPU with its message-catalogue look-ups, once per command."""
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="scg-summarize",
        description="Coarse-to-fine hard-attention summarization (Ling & Rush, 2017) and the ABS, Paulus "
        "and MAL families, built on scg.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        # (argparse %-formats a subcommand's help line, not its description)
        sub_parser = sub.add_parser(command.name, help=command.help.replace("%", "%%"), description=command.help)
        if selected is None or command.name == selected:
            command.add_arguments(sub_parser)
        sub_parser.set_defaults(_run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``scg-summarize``; returns the exit status (never raises SystemExit)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(first if any(c.name == first for c in COMMANDS) else "")
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    run = getattr(args, "_run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return 2
    status: int = run(args)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
