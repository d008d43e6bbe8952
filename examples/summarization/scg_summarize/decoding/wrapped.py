"""Plain-text input written as one wrapped document, and reading a whole file as one document.

The ``text`` input format of ``summarize`` takes every non-blank line as a document. An article
saved with hard line breaks (a ``.txt`` wrapped at 70-80 characters) then becomes one "document"
per line fragment. :func:`looks_wrapped` recognises such input from its first lines: most line
breaks fall inside a sentence (the line does not end with ``.``/``!``/``?``/a closing quote and
the next line goes on in lower case, or the line ends with ``,``/``;``/``-``). A file with one
document per line rarely looks like that (its lines end sentences), nor does a list of headlines
(the next line starts with a capital).

:func:`read_document` reads the whole input as one document: blank lines separate paragraphs,
the lines of a paragraph are joined with spaces (``summarize --format document``).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..data.errors import DataError
from ..data.options import PrepOptions
from ..data.vocab import Vocab
from .inputs import SourceDocument, encode_text, text_lines

__all__ = ["WrapVerdict", "looks_wrapped", "read_document", "read_paragraphs"]

_SENTENCE_END = tuple(".!?\"')]”’»…")
_CONTINUES = (",", ";", "-", "—", "–")
#: lines looked at by :func:`looks_wrapped`
SAMPLE_LINES = 200


class WrapVerdict:
    """The result of :func:`looks_wrapped`: ``breaks`` line breaks between two non-blank lines
    were looked at, ``inside`` of them fall inside a sentence; ``first_line`` is the first one."""

    def __init__(self, breaks: int, inside: int, first_line: int) -> None:
        self.breaks, self.inside, self.first_line = breaks, inside, first_line

    @property
    def wrapped(self) -> bool:
        """At least 2 breaks inside sentences, and at least half of all breaks."""
        return self.inside >= 2 and 2 * self.inside >= self.breaks


def _breaks_inside(line: str, following: str) -> bool:
    end = line.rstrip()
    if end.endswith(_CONTINUES):
        return True
    if end.endswith(_SENTENCE_END):
        return False
    first = following.lstrip()[:1]
    return first.islower() or first.isdigit()


def looks_wrapped(lines: Iterable[str], sample: int = SAMPLE_LINES) -> WrapVerdict:
    """Whether the first ``sample`` lines of a text look like wrapped prose (see the module
    docstring); a blank line ends a paragraph and is not a break."""
    breaks = inside = 0
    first = 0
    previous: str | None = None
    for lineno, line in enumerate(lines, 1):
        if lineno > sample:
            break
        if not line.strip():
            previous = None
            continue
        if previous is not None:
            breaks += 1
            if _breaks_inside(previous, line):
                inside += 1
                first = first or lineno - 1
        previous = line
    return WrapVerdict(breaks, inside, first)


def read_paragraphs(path: str) -> list[str]:
    """The paragraphs of a text file (``-``: stdin): blank lines separate them, the lines of one
    paragraph are joined with single spaces."""
    paragraphs: list[str] = []
    current: list[str] = []
    for _, _, text in text_lines(path):
        if text.strip():
            current.append(text.strip())
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return paragraphs


def read_document(path: str, options: PrepOptions, vocab: Vocab) -> SourceDocument:
    """The whole file (``-``: stdin) as one document, preprocessed with a run's options; a
    :class:`~scg_summarize.data.DataError` naming the file when it has no words."""
    name = "<stdin>" if path == "-" else path
    paragraphs = read_paragraphs(path)
    try:
        return encode_text(name, paragraphs, options, vocab)
    except ValueError:
        raise DataError("the document has no words", name, 1, "empty_source") from None
