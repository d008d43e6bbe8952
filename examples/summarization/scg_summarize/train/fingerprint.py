"""A fingerprint of the prepared corpus a run trains on, so that a replaced corpus is refused.

``scg-summarize prepare --overwrite`` on the corpus of a running (or interrupted) run would make
the run continue, or be tested, on other data without a word. :func:`corpus_fingerprint` hashes
(SHA-256) ``meta.json``, ``vocab.txt`` and every file of the splits the run reads; the trainer
records it in ``RUN_DIR/data.json`` and :func:`check_fingerprint` refuses a corpus that no
longer matches, on ``--resume`` and before the final test evaluation. Hashing reads the
splits once (time linear in the corpus size).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from ..data.storage import META_FILE, SPLIT_FILES, VOCAB_FILE

__all__ = ["CorpusChangedError", "check_fingerprint", "corpus_fingerprint"]


class CorpusChangedError(ValueError):
    """The corpus differs from the one the run recorded."""


def corpus_fingerprint(root: str | Path, splits: Iterable[str]) -> str:
    """SHA-256 over the corpus's metadata, vocabulary and the files of ``splits``."""
    root = Path(root)
    h = hashlib.sha256()
    paths = [root / META_FILE, root / VOCAB_FILE]
    paths += [root / split / name for split in sorted(set(splits)) for name in SPLIT_FILES]
    for path in paths:
        h.update(str(path.relative_to(root)).encode() + b"\0")
        if not path.is_file():
            h.update(b"<missing>")
            continue
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()


def check_fingerprint(run_dir: Path, data_dir: Path, splits: Iterable[str], what: str) -> None:
    """Raise :class:`CorpusChangedError` when ``data_dir`` is not the corpus ``run_dir`` recorded
    (runs from before fingerprints are accepted)."""
    record_path = run_dir / "data.json"
    if not record_path.is_file():
        return
    recorded = json.loads(record_path.read_text(encoding="utf-8")).get("fingerprint")
    if not recorded:
        return
    if corpus_fingerprint(data_dir, splits) != recorded:
        raise CorpusChangedError(
            f"{data_dir}: this corpus is not the one {run_dir} was trained on (its fingerprint in "
            f"{record_path} differs: the corpus was replaced, e.g. by prepare --overwrite, or another "
            f"--data was given); refusing to {what} on different data"
        )
