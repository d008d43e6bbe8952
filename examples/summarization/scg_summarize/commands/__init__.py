"""Subcommands discovered by :mod:`scg_summarize.cli` (each module exposes ``COMMAND``)."""
