"""The :class:`Command` record of an ``scg-summarize`` subcommand, and :func:`script_main` for
the ``python -m scg_summarize...`` scripts that are not (yet) subcommands.

It lives in its own module, below every layer of the package, so that a command defined next to
the code it drives (``prepare`` in :mod:`scg_summarize.data.command`) need not import the
command line itself (:mod:`scg_summarize.cli`, the top layer, which re-exports it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Command", "script_main"]


def script_main(prog: str, main: Callable[[Sequence[str] | None], int]) -> int:
    """Run a script's ``main`` with the subcommands' bad-input convention: a ``ValueError`` (the
    data pipeline's and the checkpoint reader's errors are ones), a missing file or a missing key
    becomes one line ``PROG: error: ...`` naming it, and exit status 2, never a traceback."""
    try:
        return main(None)
    except (ValueError, FileNotFoundError, NotADirectoryError, KeyError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 2


@dataclass(frozen=True)
class Command:
    """A subcommand.

    Attributes:
        name: the word after ``scg-summarize``.
        help: a one-line description for ``--help``.
        add_arguments: adds the subcommand's options to its ``ArgumentParser``.
        run: executes the parsed arguments; returns the process exit status.
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
