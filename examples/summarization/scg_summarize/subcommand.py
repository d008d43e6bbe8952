"""The :class:`Command` record of an ``scg-summarize`` subcommand.

It lives in its own module, below every layer of the package, so that a command defined next to
the code it drives (``prepare`` in :mod:`scg_summarize.data.command`) need not import the
command line itself (:mod:`scg_summarize.cli`, the top layer, which re-exports it).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Command"]


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
