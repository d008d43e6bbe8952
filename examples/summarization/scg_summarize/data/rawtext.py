"""Raw input primitives: the :class:`RawExample` record and a checked line reader.

Every reader (CNN/DM stories, JSON lines, parallel text, the synthetic generator) yields
:class:`RawExample` objects; preprocessing turns them into token ids. :func:`iter_lines` reads a
file as bytes, one ``\\n``-terminated line at a time, so that an invalid UTF-8 sequence or an
absurdly long line is reported with its line number instead of crashing (or exhausting memory)
somewhere inside Python's text decoding.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .errors import DataError

__all__ = ["RawExample", "iter_lines", "iter_stream_lines", "read_text_file"]


@dataclass
class RawExample:
    """One source document with its reference summaries, before preprocessing.

    Attributes:
        id: a stable identifier (story file stem, a JSON ``id`` field, or ``file:line``).
        source: the document as paragraphs (each may hold several sentences, split later when
            ``sentences_given`` is False) or as sentences (``sentences_given`` True).
        references: the reference summaries; ``references[0]`` is the default training
            target, all of them are kept for evaluation.
        sentences_given: whether ``source`` is already a list of sentences.
        origin: where the example came from, ``"file:line"`` or ``"file"``, for messages.
        salient: for synthetic data, the index of the chunk the summary restates; ``-1`` when
            unknown.
    """

    id: str
    source: list[str]
    references: list[str]
    sentences_given: bool = False
    origin: str = ""
    salient: int = -1


def _decode(raw: bytes, path: str | Path, lineno: int) -> str | DataError:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = raw[err.start : err.start + 4]
        return DataError(
            f"invalid UTF-8 at byte {err.start} of the line ({bad!r})",
            path,
            lineno,
            reason="invalid_utf8",
        )


def iter_lines(path: str | Path, max_chars: int = 1_000_000) -> Iterator[tuple[int, str | DataError]]:
    """Yield ``(line_number, text)`` for each line of ``path``; bad lines as ``DataError``.

    Lines are split on ``\\n`` only (a stray ``\\r`` or Unicode line separator inside a line is
    kept), the line terminator (``\\n`` or ``\\r\\n``) is removed, and a UTF-8 byte-order mark
    on the first line is dropped. Instead of text, a :class:`DataError` is yielded for a line
    that is not valid UTF-8 (reason ``invalid_utf8``) or is longer than ``max_chars``
    characters (reason ``line_too_long``); reading never holds more than about
    ``4 * max_chars`` bytes of one line in memory. Reading continues after a bad line, so the
    caller decides whether to stop or skip.
    """
    path = Path(path)
    with path.open("rb") as handle:
        yield from iter_stream_lines(handle, path, max_chars)


def iter_stream_lines(
    handle: BinaryIO, path: str | Path, max_chars: int = 1_000_000
) -> Iterator[tuple[int, str | DataError]]:
    """:func:`iter_lines` over an open binary stream (standard input: ``sys.stdin.buffer``), with
    the same checks; ``path`` names the stream in messages."""
    limit = 4 * max_chars + 2  # enough bytes for max_chars 4-byte characters plus "\r\n"
    lineno = 0
    while True:
        raw = handle.readline(limit)
        if not raw:
            return
        lineno += 1
        if len(raw) >= limit and not raw.endswith(b"\n"):
            while True:  # discard the rest of the overlong line in bounded pieces
                more = handle.readline(1 << 20)
                if not more or more.endswith(b"\n"):
                    break
            yield (
                lineno,
                DataError(f"line longer than {max_chars} characters", path, lineno, "line_too_long"),
            )
            continue
        text = _decode(raw, path, lineno)
        if isinstance(text, DataError):
            yield lineno, text
            continue
        if text.endswith("\n"):
            text = text[:-2] if text.endswith("\r\n") else text[:-1]
        if lineno == 1 and text.startswith("\ufeff"):
            text = text[1:]
        if len(text) > max_chars:
            yield (
                lineno,
                DataError(
                    f"line of {len(text)} characters, longer than {max_chars}",
                    path,
                    lineno,
                    "line_too_long",
                ),
            )
            continue
        yield lineno, text


def read_text_file(path: str | Path, max_chars: int = 1_000_000) -> list[str]:
    """All lines of a (small) text file, raising the first :class:`DataError` found."""
    lines: list[str] = []
    for _, text in iter_lines(path, max_chars):
        if isinstance(text, DataError):
            raise text
        lines.append(text)
    return lines
