"""Separate input (article) and output (title) vocabularies inside a prepared corpus.

Rush, Chopra & Weston (2015, Section 7.1) give ABS its own input and output vocabularies: the
types seen fewer than 5 times in the training articles (titles) are ``<unk>`` on the input
(output) side. A prepared corpus keeps one id space (``vocab.txt``, the union), so the rest of
the pipeline (decoding, ``<unk>`` replacement, ROUGE) is unchanged; the two field vocabularies
are subsets of it, written next to it by ``scg-summarize prepare --field-vocab-min-freq N``:

::

    DIR/src_vocab.txt     token<TAB>count: the article vocabulary (specials first)
    DIR/tgt_vocab.txt     token<TAB>count: the title vocabulary (specials first)

A word is in the article (title) vocabulary when it is in ``vocab.txt`` and occurs at least
``N`` times in the articles (titles) of the training split (counted on the encoded ids, so a
word cut from ``vocab.txt`` by ``--vocab-size`` is in neither). A family that reads them (the
``abs`` family, :mod:`scg_summarize.models.abs.family`) maps corpus ids to its own input and
output ids; :func:`load_field_vocabs` checks that both files agree with ``vocab.txt`` and names
the file, line and field of anything that does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .storage import VOCAB_FILE, load_split, read_meta, write_meta
from .vocab import SPECIALS, Vocab

__all__ = ["FIELD_FILES", "FieldVocabs", "build_field_vocabs", "load_field_vocabs", "write_field_vocabs"]

#: field -> file name (``src``: the article side, ``tgt``: the title side)
FIELD_FILES: dict[str, str] = {"src": "src_vocab.txt", "tgt": "tgt_vocab.txt"}
_FIELD_WORDS = {"src": "article (source)", "tgt": "title (target)"}


@dataclass(frozen=True)
class FieldVocabs:
    """The corpus ids of each field's vocabulary, ascending, the specials (0-3) first.

    Attributes:
        src_ids: corpus ids of the article vocabulary (V_x of them).
        tgt_ids: corpus ids of the title vocabulary (V_y of them).
        min_freq: the count threshold they were built with (0 when read from files).
    """

    src_ids: list[int]
    tgt_ids: list[int]
    min_freq: int = 0


def _counts(values: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(values[values > 0].astype(np.int64), minlength=size)[:size]


def _field_counts(root: Path, split: str, size: int) -> dict[str, np.ndarray]:
    data = load_split(root, split)
    return {
        "src": _counts(np.asarray(data.src).reshape(-1), size),
        "tgt": _counts(np.asarray(data.tgt).reshape(-1), size),
    }


def build_field_vocabs(root: str | Path, min_freq: int, split: str = "train") -> FieldVocabs:
    """Count the corpus ids of the articles and titles of ``split`` and keep those seen at least
    ``min_freq`` times (plus the specials)."""
    if not isinstance(min_freq, int) or isinstance(min_freq, bool) or min_freq < 1:
        raise ValueError(f"--field-vocab-min-freq must be a positive integer, got {min_freq!r}")
    root = Path(root)
    counts = _field_counts(root, split, len(Vocab.load(root / VOCAB_FILE)))
    specials = list(range(len(SPECIALS)))

    def keep(c: np.ndarray) -> list[int]:
        return specials + [int(i) for i in np.nonzero(c >= min_freq)[0] if i >= len(SPECIALS)]

    return FieldVocabs(keep(counts["src"]), keep(counts["tgt"]), min_freq)


def write_field_vocabs(root: str | Path, min_freq: int, split: str = "train") -> FieldVocabs:
    """Build the field vocabularies (:func:`build_field_vocabs`), write ``src_vocab.txt`` /
    ``tgt_vocab.txt`` with the counts of ``split`` and record them in ``meta.json``
    (``field_vocabs``)."""
    root = Path(root)
    fields = build_field_vocabs(root, min_freq, split)
    tokens = Vocab.load(root / VOCAB_FILE).tokens
    counts = _field_counts(root, split, len(tokens))
    for field, ids in (("src", fields.src_ids), ("tgt", fields.tgt_ids)):
        lines = [f"{tokens[i]}\t{int(counts[field][i]) if i >= len(SPECIALS) else 0}\n" for i in ids]
        (root / FIELD_FILES[field]).write_text("".join(lines), encoding="utf-8")
    meta = read_meta(root)
    meta["field_vocabs"] = {
        "min_freq": min_freq,
        "src_size": len(fields.src_ids),
        "tgt_size": len(fields.tgt_ids),
        "split": split,
    }
    write_meta(root, meta)
    return fields


def load_field_vocabs(root: str | Path) -> FieldVocabs | None:
    """The field vocabularies of a prepared corpus (None when it has neither file).

    Raises ``ValueError`` naming the file, line and field for a file without the other, a word
    missing from ``vocab.txt``, a duplicate, or specials out of place.
    """
    root = Path(root)
    paths = {field: root / name for field, name in FIELD_FILES.items()}
    present = [f for f, p in paths.items() if p.is_file()]
    if not present:
        return None
    if len(present) == 1:
        other = next(f for f in FIELD_FILES if f not in present)
        raise ValueError(
            f"{paths[present[0]]}: the {_FIELD_WORDS[present[0]]} vocabulary has no "
            f"{_FIELD_WORDS[other]} counterpart {paths[other].name} in {root}"
        )
    vocab = Vocab.load(root / VOCAB_FILE)
    ids: dict[str, list[int]] = {}
    for field, path in paths.items():
        seen: list[int] = []
        for lineno, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
            if not line:
                continue
            token = line.partition("\t")[0]
            where = f"{path}:{lineno} ({_FIELD_WORDS[field]} vocabulary)"
            if lineno <= len(SPECIALS):
                if token != SPECIALS[lineno - 1]:
                    raise ValueError(f"{where}: expected the special token {SPECIALS[lineno - 1]!r}, got {token!r}")
                seen.append(lineno - 1)
                continue
            if token not in vocab or vocab.token_to_id(token) < len(SPECIALS):
                raise ValueError(f"{where}: {token!r} is not a word of {root / VOCAB_FILE}")
            seen.append(vocab.token_to_id(token))
        if len(seen) < len(SPECIALS):
            raise ValueError(
                f"{path} ({_FIELD_WORDS[field]} vocabulary): {len(seen)} lines, expected at least the "
                f"{len(SPECIALS)} special tokens"
            )
        if len(set(seen)) != len(seen):
            dup = next(vocab.id_to_token(i) for i in seen if seen.count(i) > 1)
            raise ValueError(f"{path} ({_FIELD_WORDS[field]} vocabulary): the word {dup!r} is listed twice")
        ids[field] = sorted(seen)
    return FieldVocabs(ids["src"], ids["tgt"], int(read_meta(root).get("field_vocabs", {}).get("min_freq", 0)))
