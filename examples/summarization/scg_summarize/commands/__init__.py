"""The subcommands of ``scg-summarize``, one module each (listed in `scg_summarize.cli.COMMANDS`).

A module defines ``COMMAND``, a `Command`. Its top-level imports are light (the standard
library, this package's helpers): what a command needs from torch, the models or the data
pipeline is imported inside its ``add_arguments``/``run``, so that ``scg-summarize --help`` and a
mistyped command answer at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Command"]


@dataclass(frozen=True, kw_only=True, slots=True)
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
