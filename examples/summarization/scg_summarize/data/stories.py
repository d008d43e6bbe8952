"""CNN/DailyMail ``.story`` files (Hermann et al., 2015).

A story file holds the article's paragraphs separated by blank lines, then one block per
highlight: a line ``@highlight``, a blank line, and the highlight text::

    First paragraph of the article.

    Second paragraph.

    @highlight

    First highlight

    @highlight

    Second highlight

Each highlight is one reference summary; the first is the paper's training target.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from .errors import BadInputReport, DataError
from .rawtext import RawExample, iter_lines

__all__ = ["HIGHLIGHT_MARKER", "find_story_files", "parse_story", "read_stories"]

HIGHLIGHT_MARKER = "@highlight"


def parse_story(path: str | Path, max_chars: int = 1_000_000) -> RawExample:
    """Parse one ``.story`` file.

    Raises:
        DataError: for an unreadable line (invalid UTF-8, too long), an empty file, a story
            without ``@highlight`` (reason ``missing_highlight``), an ``@highlight`` block with
            no text (``empty_highlight``) or a story with no article text
            (``empty_source``).
    """
    path = Path(path)
    paragraphs: list[str] = []
    highlights: list[str] = []
    first_marker: int | None = None
    open_marker: int | None = None  # line of an @highlight still waiting for its text
    n_lines = 0
    for lineno, text in iter_lines(path, max_chars):
        if isinstance(text, DataError):
            raise text
        n_lines = lineno
        stripped = text.strip()
        if stripped == HIGHLIGHT_MARKER:
            if open_marker is not None:
                raise DataError("@highlight block without text", path, open_marker, reason="empty_highlight")
            open_marker = lineno
            if first_marker is None:
                first_marker = lineno
            continue
        if not stripped:
            continue
        if first_marker is None:
            paragraphs.append(stripped)
        elif open_marker is not None:
            highlights.append(stripped)
            open_marker = None
        else:  # a highlight that wraps onto a second line
            highlights[-1] = f"{highlights[-1]} {stripped}"
    if n_lines == 0:
        raise DataError("empty file", path, reason="empty_source")
    if open_marker is not None:
        raise DataError("@highlight block without text", path, open_marker, reason="empty_highlight")
    if first_marker is None:
        raise DataError(
            f"no {HIGHLIGHT_MARKER} line: not a CNN/DailyMail story (or a story without highlights)",
            path,
            reason="missing_highlight",
        )
    if not paragraphs:
        raise DataError(
            f"no article text before the first {HIGHLIGHT_MARKER}",
            path,
            first_marker,
            reason="empty_source",
        )
    return RawExample(
        id=path.stem,
        source=paragraphs,
        references=highlights,
        sentences_given=False,
        origin=str(path),
    )


def find_story_files(path: str | Path) -> list[Path]:
    """``path`` itself if it is a file, else every ``*.story`` below it, sorted by path."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise DataError("no such file or directory", path, reason="missing_input")
    files = sorted(p for p in path.rglob("*.story") if p.is_file())
    if not files:
        raise DataError("directory contains no *.story files", path, reason="missing_input")
    return files


def read_stories(
    path: str | Path,
    *,
    report: BadInputReport | None = None,
    max_chars: int = 1_000_000,
) -> Iterator[RawExample]:
    """Yield the stories of a ``.story`` file or a directory tree of them, in path order.

    Malformed stories are passed to ``report`` (which raises unless it skips bad input).
    """
    report = report if report is not None else BadInputReport()
    for file in find_story_files(path):
        try:
            yield parse_story(file, max_chars)
        except DataError as err:
            report.handle(err)
