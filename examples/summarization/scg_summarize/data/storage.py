"""On-disk layout of a prepared corpus, its streaming writer and its memory-mapped reader.

::

    DIR/meta.json                 options (+ hash), vocabulary size, counts, bad-input report
    DIR/vocab.txt                 token<TAB>count, one line per id (specials first)
    DIR/<split>/src.npy           int32 (n, M, N) chunked source ids, 0 = <pad>
    DIR/<split>/tgt.npy           int32 (total,)  all targets, each <s> ... </s>, concatenated
    DIR/<split>/tgt_offsets.npy   int64 (n + 1,)  target i is tgt[off[i]:off[i + 1]]
    DIR/<split>/salient.npy       int32 (n,)      salient chunk index, -1 when unknown
    DIR/<split>/src_lengths.npy   int32 (n,)      number of real (non-pad) source positions
    DIR/<split>/text.jsonl        one JSON object per example: id, origin, refs, src_sentences
    DIR/<split>/text_offsets.npy  int64 (n + 1,)  byte offset of each text.jsonl line

The writer is two-phase so that memory stays bounded whatever the corpus size: pass 1
(:meth:`SplitWriter.add`) streams every example's words to a temporary file (and its text to
``text.jsonl``) while the caller counts the vocabulary; pass 2 (:meth:`SplitWriter.finish`)
re-reads the temporary file, encodes it with the final vocabulary into preallocated
memory-mapped arrays, and deletes it. ``meta.json`` is written last, so its presence marks a
complete corpus.
"""

from __future__ import annotations

import json
import os
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from .chunking import pack_chunks
from .vocab import Vocab

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "META_FILE",
    "VOCAB_FILE",
    "ExampleText",
    "PreparedSplit",
    "SplitWriter",
    "TextStore",
    "load_split",
    "read_meta",
    "write_meta",
]

FORMAT_NAME = "scg-summarize-prepared"
FORMAT_VERSION = 1
META_FILE = "meta.json"
VOCAB_FILE = "vocab.txt"
_TMP_NAME = "words.tmp.jsonl"
SPLIT_FILES: tuple[str, ...] = (
    "src.npy",
    "tgt.npy",
    "tgt_offsets.npy",
    "salient.npy",
    "src_lengths.npy",
    "text.jsonl",
    "text_offsets.npy",
)


def _new_array(path: Path, shape: tuple[int, ...], dtype: Any) -> npt.NDArray[Any]:
    """A writable array backed by ``path`` (``.npy``); plain in memory when empty."""
    if int(np.prod(shape)) == 0:
        empty = np.zeros(shape, dtype=dtype)
        np.save(path, empty)
        return empty
    return np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)


@dataclass(kw_only=True, slots=True)
class ExampleText:
    """The strings one prepared example keeps for evaluation: one line of ``text.jsonl``."""

    id: str
    origin: str  # ``file:line`` of the raw example
    refs: list[str]  # the reference summaries
    src_sentences: list[str]  # the source sentences as original text (for the extractive baselines)

    def to_json(self) -> dict[str, Any]:
        """The JSON object written to ``text.jsonl`` (its fields in order; built directly, not with
        ``dataclasses.asdict``, whose recursive deep copy took ~40 us per example)."""
        return {
            "id": self.id,
            "origin": self.origin,
            "refs": list(self.refs),
            "src_sentences": list(self.src_sentences),
        }

    @classmethod
    def from_json(cls, record: Any, where: str) -> ExampleText:
        """Parse one ``text.jsonl`` object; ``where`` (``file:line``) names it in the error."""
        if not isinstance(record, dict):
            raise ValueError(f"{where}: expected a JSON object, found {type(record).__name__}")
        missing = [key for key in ("id", "refs", "src_sentences") if key not in record]
        lists = [key for key in ("refs", "src_sentences") if key in record and not _is_str_list(record[key])]
        if missing or lists:
            found = f"missing {', '.join(missing)}" if missing else f"{', '.join(lists)} not a list of strings"
            raise ValueError(
                f"{where}: expected an object with 'id', 'refs' (the reference summaries, a list of strings) "
                f"and 'src_sentences' (a list of strings); {found}"
            )
        return cls(
            id=str(record["id"]),
            origin=str(record.get("origin", "")),
            refs=list(record["refs"]),
            src_sentences=list(record["src_sentences"]),
        )


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


class SplitWriter:
    """Writes one split (see the module docstring for the files and the two passes).

    Args:
        split_dir: the split's directory (created).
        num_chunks: M.
        chunk_len: N.
    """

    def __init__(self, split_dir: str | Path, num_chunks: int, chunk_len: int) -> None:
        self.dir = Path(split_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.num_chunks = num_chunks
        self.chunk_len = chunk_len
        self.count = 0
        self.target_total = 0
        self._salient = array("i")
        self._text_offsets = array("q", [0])
        self._text: BinaryIO | None = (self.dir / "text.jsonl").open("wb")
        self._words: BinaryIO | None = (self.dir / _TMP_NAME).open("wb")

    def add(
        self,
        chunks: list[list[str]],
        target: list[str],
        text: ExampleText,
        salient: int = -1,
    ) -> None:
        """Pass 1: queue one example.

        Args:
            chunks: the source words in layout (at most M chunks of at most N words).
            target: the training target's words (without ``<s>``/``</s>``).
            text: the strings kept for evaluation.
            salient: the salient chunk index or -1.
        """
        if self._text is None or self._words is None:
            raise RuntimeError("SplitWriter.add() after finish()")
        line = json.dumps({"c": chunks, "t": target}, ensure_ascii=False) + "\n"
        self._words.write(line.encode("utf-8"))
        text_line = (json.dumps(text.to_json(), ensure_ascii=False) + "\n").encode("utf-8")
        self._text.write(text_line)
        self._text_offsets.append(self._text_offsets[-1] + len(text_line))
        self._salient.append(salient)
        self.count += 1
        self.target_total += len(target) + 2

    def finish(self, vocab: Vocab, progress: Any = None) -> dict[str, Any]:
        """Pass 2: encode everything with ``vocab``; returns token/unknown-word counts.

        ``progress``, if given, gets ``update(1)`` per example.
        """
        if self._text is None or self._words is None:
            raise RuntimeError("SplitWriter.finish() called twice")
        self._text.close()
        self._words.close()
        self._text = self._words = None
        n, m, width = self.count, self.num_chunks, self.chunk_len
        src = _new_array(self.dir / "src.npy", (n, m, width), np.int32)
        tgt = _new_array(self.dir / "tgt.npy", (self.target_total,), np.int32)
        offsets = np.zeros(n + 1, dtype=np.int64)
        src_lengths = np.zeros(n, dtype=np.int32)
        src_tokens = src_unk = tgt_tokens = tgt_unk = 0
        position = 0
        tmp = self.dir / _TMP_NAME
        with tmp.open("rb") as handle:
            for i, raw in enumerate(handle):
                record = json.loads(raw)
                chunk_ids = [vocab.encode(chunk) for chunk in record["c"]]
                src[i], _ = pack_chunks(chunk_ids, m, width, vocab.pad_id)
                flat = [t for chunk in chunk_ids for t in chunk]
                src_tokens += len(flat)
                src_lengths[i] = len(flat)
                src_unk += flat.count(vocab.unk_id)
                ids = vocab.encode(record["t"], bos=True, eos=True)
                tgt[position : position + len(ids)] = ids
                tgt_tokens += len(ids) - 2
                tgt_unk += ids.count(vocab.unk_id)
                position += len(ids)
                offsets[i + 1] = position
                if progress is not None:
                    progress.update(1)
        tmp.unlink()
        for array_ in (src, tgt):
            if isinstance(array_, np.memmap):
                array_.flush()
        del src, tgt
        np.save(self.dir / "tgt_offsets.npy", offsets)
        np.save(self.dir / "salient.npy", np.asarray(self._salient, dtype=np.int32))
        np.save(self.dir / "src_lengths.npy", src_lengths)
        np.save(self.dir / "text_offsets.npy", np.asarray(self._text_offsets, dtype=np.int64))
        return {
            "examples": n,
            "src_tokens": src_tokens,
            "tgt_tokens": tgt_tokens,
            "src_unk_rate": src_unk / src_tokens if src_tokens else 0.0,
            "tgt_unk_rate": tgt_unk / tgt_tokens if tgt_tokens else 0.0,
        }

    def abort(self) -> None:
        """Close files and remove what this writer wrote (after an error): its temporary word file,
        its split's files and its split folder when that is left empty, so that a failed prepare
        leaves no half-written split behind (which the next prepare would take for the user's)."""
        for handle in (self._text, self._words):
            if handle is not None:
                handle.close()
        self._text = self._words = None
        for name in (_TMP_NAME, *SPLIT_FILES):
            (self.dir / name).unlink(missing_ok=True)
        try:
            self.dir.rmdir()
        except OSError:  # (not empty: files of the user's, or of a finished split)
            pass


class TextStore:
    """Random access to ``text.jsonl`` through its byte offsets (opened lazily, per process)."""

    def __init__(self, path: str | Path, offsets: npt.NDArray[np.int64]) -> None:
        self.path = Path(path)
        self.offsets = offsets
        self._handle: BinaryIO | None = None
        self._pid = -1

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> ExampleText:
        if self._handle is None or self._pid != os.getpid():
            self._handle = self.path.open("rb")
            self._pid = os.getpid()
        start, end = int(self.offsets[index]), int(self.offsets[index + 1])
        self._handle.seek(start)
        raw = self._handle.read(end - start)
        try:
            record = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:  # a file cut short, or overwritten
            raise ValueError(
                f"{self.path}:{index + 1}: not a complete JSON line ({len(raw)} of {end - start} bytes "
                f"read: {err}); the split is damaged, prepare the corpus again"
            ) from None
        return ExampleText.from_json(record, f"{self.path}:{index + 1}")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_handle"] = None  # file handles do not pickle (DataLoader workers)
        return state

    def close(self) -> None:
        """Close the file handle (reopened on the next access)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None


@dataclass
class PreparedSplit:
    """The arrays of one prepared split (memory-mapped read-only by default)."""

    name: str
    src: npt.NDArray[np.int32]
    tgt: npt.NDArray[np.int32]
    tgt_offsets: npt.NDArray[np.int64]
    salient: npt.NDArray[np.int32]
    src_lengths: npt.NDArray[np.int32]
    text: TextStore

    def __len__(self) -> int:
        return int(self.src.shape[0])


def load_split(root: str | Path, split: str, *, mmap: bool = True) -> PreparedSplit:
    """Open the arrays of ``split`` under a prepared corpus ``root``."""
    split_dir = Path(root) / split
    missing = [f for f in SPLIT_FILES if not (split_dir / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{split_dir}: not a prepared split (missing {', '.join(missing)})")
    mode: Any = "r" if mmap else None

    def load(name: str, mmap_mode: Any = None) -> npt.NDArray[Any]:
        path = split_dir / name
        try:
            array_: npt.NDArray[Any] = np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
        except (ValueError, OSError, EOFError) as err:  # truncated or overwritten: name the file
            raise ValueError(
                f"{path}: unreadable array ({path.stat().st_size} bytes; truncated or damaged: "
                f"{err}); prepare the corpus again"
            ) from None
        return array_

    prepared = PreparedSplit(
        name=split,
        src=load("src.npy", mode),
        tgt=load("tgt.npy", mode),
        tgt_offsets=load("tgt_offsets.npy"),
        salient=load("salient.npy"),
        src_lengths=load("src_lengths.npy"),
        text=TextStore(split_dir / "text.jsonl", load("text_offsets.npy")),
    )
    if prepared.src.ndim != 3:
        raise ValueError(
            f"{split_dir / 'src.npy'}: an array of shape {prepared.src.shape}, expected (examples, "
            f"chunks, words per chunk); the split is damaged, prepare the corpus again"
        )
    n = len(prepared)
    sizes = {
        "tgt_offsets.npy": (len(prepared.tgt_offsets), n + 1),
        "salient.npy": (len(prepared.salient), n),
        "src_lengths.npy": (len(prepared.src_lengths), n),
        "text_offsets.npy": (len(prepared.text.offsets), n + 1),
    }
    for name, (have, want) in sizes.items():
        if have != want:
            raise ValueError(
                f"{split_dir / name}: {have} entries for {n} examples in src.npy (expected {want}); "
                f"the split is damaged, prepare the corpus again"
            )
    if n and int(prepared.tgt_offsets[-1]) != len(prepared.tgt):
        raise ValueError(
            f"{split_dir / 'tgt.npy'}: {len(prepared.tgt)} ids, but tgt_offsets.npy ends at "
            f"{int(prepared.tgt_offsets[-1])}; the split is damaged, prepare the corpus again"
        )
    return prepared


def write_meta(root: str | Path, meta: dict[str, Any]) -> None:
    """Write ``meta.json`` atomically (temporary file, then rename)."""
    path = Path(root) / META_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_meta(root: str | Path) -> dict[str, Any]:
    """Read and check ``meta.json`` of a prepared corpus."""
    path = Path(root) / META_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{root}: no {META_FILE}; not a prepared corpus (run prepare)")
    try:
        meta: Any = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not valid JSON ({err}); the corpus is damaged, prepare it again") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise ValueError(f"{path}: not a {FORMAT_NAME} metadata file")
    if meta.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path}: format version {meta.get('version')}, this code reads {FORMAT_VERSION}")
    return dict(meta)
