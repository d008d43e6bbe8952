"""Readers for JSON lines and parallel text, and the format dispatcher :func:`read_input`.

Formats (``scg-summarize prepare --format ...``):

* ``cnndm``: a ``.story`` file, a directory of them (see :mod:`.stories`), or the common JSON
  lines export with fields ``article`` and ``highlights`` (highlights joined by newlines,
  each one a reference).
* ``jsonl``: one JSON object per line with configurable source/target fields. A string
  source is a document whose lines are paragraphs (XSum ``document``); a list source is a list
  of sentences (SciTLDR ``source``). A string target is one reference (or several, split on
  ``target_sep``); a list target is several references (SciTLDR ``target``).
* ``parallel``: two line-aligned files, ``X.article.txt`` / ``X.title.txt`` (the Gigaword
  "sumdata" layout of Rush et al., 2015), one example per line; optionally with the paper's
  pair filters (``ReaderConfig.gigaword_filters``, see :mod:`.gigaword_filters`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..choices import CORPUS_FORMATS as FORMATS
from .errors import BadInputReport, DataError, require_file
from .gigaword_filters import GigawordFilter
from .rawtext import RawExample, iter_lines
from .stories import read_stories

__all__ = [
    "FORMATS",
    "ReaderConfig",
    "parallel_paths",
    "parse_json_record",
    "read_input",
    "read_jsonl",
    "read_parallel",
]

_ARTICLE_SUFFIX = ".article.txt"
_TITLE_SUFFIX = ".title.txt"


@dataclass(frozen=True)
class ReaderConfig:
    """Field names and limits for the readers.

    ``None`` fields mean the format's default: ``article``/``highlights`` with newline-separated
    highlights for ``cnndm``; ``source``/``target`` for ``jsonl``.
    """

    source_field: str | None = None
    target_field: str | None = None
    id_field: str = "id"
    target_sep: str | None = None
    max_line_chars: int = 1_000_000
    gigaword_filters: tuple[str, ...] = ()


def _location(path: Path, lineno: int) -> str:
    return f"{path}:{lineno}"


def _as_source(value: Any, name: str, path: Path, lineno: int) -> tuple[list[str], bool]:
    """Paragraphs (from a string) or sentences (from a list of strings) of a source field."""
    if isinstance(value, str):
        return [p.strip() for p in value.splitlines() if p.strip()], False
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()], True
    kind = type(value).__name__
    raise DataError(
        f"field {name!r} must be a string or a list of strings, got {kind}",
        path,
        lineno,
        reason="wrong_type",
    )


def _as_references(value: Any, name: str, sep: str | None, path: Path, lineno: int) -> list[str]:
    if isinstance(value, str):
        parts = value.split(sep) if sep else [value]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        parts = list(value)
    else:
        kind = type(value).__name__
        raise DataError(
            f"field {name!r} must be a string or a list of strings, got {kind}",
            path,
            lineno,
            reason="wrong_type",
        )
    return [" ".join(p.split()) for p in parts if p.strip()]


class _DuplicateField(Exception):
    """A JSON object with a field given twice (the field's name)."""


def _unique_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook``: the object, refusing a field given twice."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateField(key)
        out[key] = value
    return out


def _check_surrogates(record: dict[str, Any], path: Path, lineno: int) -> None:
    """Refuse a field holding an unpaired surrogate (JSON allows the escape ``"\\udc80"``; no UTF-8
    text holds it, so writing the corpus would fail later, naming no line)."""
    for name, value in record.items():
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as err:
                    bad = text[err.start]
                    raise DataError(
                        f"field {name!r} holds an unpaired surrogate {bad!r} (not text)", path, lineno, "invalid_text"
                    ) from None


def parse_json_record(
    text: str,
    path: str | Path,
    lineno: int,
    *,
    source: str,
    target: str,
    id_field: str = "id",
    target_sep: str | None = None,
    default_id: str | None = None,
    target_required: bool = True,
) -> RawExample:
    """One JSON lines record as a :class:`RawExample` (see the module docstring); every problem is
    a :class:`~scg_summarize.data.DataError` naming ``path`` and ``lineno``.

    Without ``target_required`` (documents to summarize) the target field may be absent (no
    references). The id is the record's ``id_field``, else ``default_id``, else ``<file stem>:<line>``.
    """
    path = Path(path)
    try:
        record = json.loads(text, object_pairs_hook=_unique_fields)
    except json.JSONDecodeError as err:
        message = f"invalid JSON ({err.msg} at column {err.colno})"
        raise DataError(message, path, lineno, reason="bad_json") from None
    except _DuplicateField as err:  # (json keeps the last value of a repeated field, silently)
        raise DataError(f"the field {err.args[0]!r} appears twice in the record", path, lineno, "bad_json") from None
    if not isinstance(record, dict):
        raise DataError(f"expected a JSON object, got {type(record).__name__}", path, lineno, "bad_json")
    if "\\ud" in text or "\\uD" in text:  # a \uXXXX escape of a surrogate: paired, or not text
        _check_surrogates(record, path, lineno)
    for name in (source, target) if target_required else (source,):
        if name not in record:
            have = ", ".join(sorted(record)) or "none"
            message = f"missing field {name!r} (fields present: {have})"
            raise DataError(message, path, lineno, reason="missing_field")
    paragraphs, given = _as_source(record[source], source, path, lineno)
    if not paragraphs:
        raise DataError(f"empty source field {source!r}", path, lineno, reason="empty_source")
    references = _as_references(record.get(target, []), target, target_sep, path, lineno)
    if not references and target_required:
        raise DataError(f"empty target field {target!r}", path, lineno, reason="empty_target")
    raw_id = record.get(id_field)
    if id_field in record and (isinstance(raw_id, bool) or not isinstance(raw_id, (str, int))):
        kind = "null" if raw_id is None else type(raw_id).__name__
        raise DataError(
            f"field {id_field!r} must be a string or an integer, got {kind} {raw_id!r:.40}",
            path,
            lineno,
            reason="bad_id",
        )
    fallback = default_id if default_id is not None else f"{path.stem}:{lineno}"
    return RawExample(
        id=str(raw_id) if isinstance(raw_id, (str, int)) else fallback,
        source=paragraphs,
        references=references,
        sentences_given=given,
        origin=_location(path, lineno),
    )


def read_jsonl(
    path: str | Path,
    config: ReaderConfig | None = None,
    *,
    report: BadInputReport | None = None,
    default_source: str = "source",
    default_target: str = "target",
) -> Iterator[RawExample]:
    """Yield one :class:`RawExample` per non-blank line of a JSON lines file.

    Blank (whitespace-only) lines are not records and are ignored. Every other problem --
    a line that is not valid UTF-8 or JSON, not an object, too long, lacks a field, has a field
    of the wrong type, or an empty source/target -- is a :class:`DataError` naming the file and
    line, passed to ``report``.
    """
    path = Path(path)
    config = config or ReaderConfig()
    report = report if report is not None else BadInputReport()
    source = config.source_field or default_source
    target = config.target_field or default_target
    require_file(path)
    for lineno, text in iter_lines(path, config.max_line_chars):
        try:
            if isinstance(text, DataError):
                raise text
            if not text.strip():
                continue
            yield parse_json_record(
                text,
                path,
                lineno,
                source=source,
                target=target,
                id_field=config.id_field,
                target_sep=config.target_sep,
            )
        except DataError as err:
            report.handle(err)


def parallel_paths(path: str | Path) -> tuple[Path, Path]:
    """The ``(article, title)`` files for a path to either file or to their common prefix.

    ``data/train.article.txt``, ``data/train.title.txt`` and ``data/train`` all give
    ``(data/train.article.txt, data/train.title.txt)``.
    """
    text = str(path)
    for suffix in (_ARTICLE_SUFFIX, _TITLE_SUFFIX):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
            break
    return Path(text + _ARTICLE_SUFFIX), Path(text + _TITLE_SUFFIX)


def read_parallel(
    source_path: str | Path,
    target_path: str | Path | None = None,
    *,
    report: BadInputReport | None = None,
    max_line_chars: int = 1_000_000,
    filters: GigawordFilter | None = None,
) -> Iterator[RawExample]:
    """Yield one example per line of two line-aligned files (source line, target line).

    With ``filters``, a pair a filter rejects is not yielded but counted in ``report`` under
    ``filtered_<filter name>`` (whatever ``skip_bad`` says: filtering is not an error).

    ``target_path`` defaults to the ``.title.txt`` file next to a ``.article.txt`` source
    (see :func:`parallel_paths`). Files of different lengths are an error at the first line
    that has no partner (reason ``line_count_mismatch``); with ``skip_bad`` every unpaired
    line is counted.
    """
    if target_path is None:
        source_path, target_path = parallel_paths(source_path)
    src, tgt = Path(source_path), Path(target_path)
    report = report if report is not None else BadInputReport()
    for file in (src, tgt):
        require_file(file)
    src_lines = iter_lines(src, max_line_chars)
    tgt_lines = iter_lines(tgt, max_line_chars)
    while True:
        left, right = next(src_lines, None), next(tgt_lines, None)
        if left is None and right is None:
            return
        try:
            if left is None or right is None:
                if left is None:
                    assert right is not None
                    longer, other, lineno = tgt, src, right[0]
                else:
                    longer, other, lineno = src, tgt, left[0]
                raise DataError(
                    f"line count mismatch: {other} has only {lineno - 1} lines",
                    longer,
                    lineno,
                    reason="line_count_mismatch",
                )
            lineno, source_text = left
            _, target_text = right
            if isinstance(source_text, DataError):
                raise source_text
            if isinstance(target_text, DataError):
                raise target_text
            if not source_text.strip():
                raise DataError("empty source line", src, lineno, reason="empty_source")
            if not target_text.strip():
                raise DataError("empty target line", tgt, lineno, reason="empty_target")
            dropped = filters.reason(source_text, target_text) if filters is not None else None
            if dropped is not None:
                report.skipped[f"filtered_{dropped}"] += 1
                continue
            yield RawExample(
                id=f"{src.name[: -len(_ARTICLE_SUFFIX)] or src.stem}:{lineno}",
                source=[source_text.strip()],
                references=[" ".join(target_text.split())],
                sentences_given=False,
                origin=_location(src, lineno),
            )
        except DataError as err:
            report.handle(err)


def read_input(
    fmt: str,
    path: str | Path,
    config: ReaderConfig | None = None,
    *,
    report: BadInputReport | None = None,
) -> Iterator[RawExample]:
    """Stream the examples of one input in format ``fmt`` (one of :data:`FORMATS`).

    For ``cnndm``, ``path`` may be a ``.story`` file, a directory of them, or a ``.jsonl`` /
    ``.json`` export; for ``parallel`` see :func:`parallel_paths`.
    """
    config = config or ReaderConfig()
    report = report if report is not None else BadInputReport()
    path = Path(path)
    if fmt == "cnndm":
        if path.is_file() and path.suffix in (".jsonl", ".json"):
            # In the common export, the highlights are joined by newlines.
            cnn_config = config if config.target_sep else replace(config, target_sep="\n")
            return read_jsonl(
                path,
                cnn_config,
                report=report,
                default_source="article",
                default_target="highlights",
            )
        return read_stories(path, report=report, max_chars=config.max_line_chars)
    if fmt == "jsonl":
        return read_jsonl(path, config, report=report)
    if fmt == "parallel":
        filters = GigawordFilter.from_names(config.gigaword_filters) if config.gigaword_filters else None
        return read_parallel(path, report=report, max_line_chars=config.max_line_chars, filters=filters)
    raise ValueError(f"unknown input format {fmt!r}; expected one of {FORMATS}")
