"""The torch [`SummarizationDataset`][scg_summarize.data.SummarizationDataset] over a prepared split,
and its item, the typed record [`Example`][scg_summarize.data.Example] (batched by `collate_examples`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import Dataset

from .options import PrepOptions
from .storage import META_FILE, VOCAB_FILE, ExampleText, PreparedSplit, load_split, read_meta
from .vocab import Vocab

__all__ = ["Example", "SummarizationDataset", "available_splits"]


@dataclass(kw_only=True, slots=True)
class Example:
    """One document: the model input, its target and its text.

    A prepared split's items have all fields; a document read for ``summarize`` has no target.
    """

    src: torch.Tensor  # (M, N) long chunked source ids, 0 = <pad>
    src_mask: torch.Tensor  # (M, N) bool, True at real words
    tgt: torch.Tensor | None = None  # (T,) long <s> target ids </s> (T includes both); None when unknown
    salient: int = -1  # the salient chunk (synthetic data), -1 when unknown
    index: int = -1  # the position in the split, -1 outside one
    id: str = ""  # the example id
    refs: list[str] = field(default_factory=list)  # all reference summaries (original text)
    src_sentences: list[str] = field(default_factory=list)  # the source sentences (original text)


def available_splits(root: str | Path) -> list[str]:
    """The split names recorded in a prepared corpus's metadata, sorted."""
    return sorted(read_meta(root)["splits"])


class SummarizationDataset(Dataset[Example]):
    """One split of a prepared corpus (arrays memory-mapped, text read on demand).

    Args:
        root: the prepared corpus directory (holding ``meta.json``).
        split: the split name (``train``, ``valid``, ``test``...).
        vocab: a vocabulary to share between splits (default: loaded from ``root``).
        max_target_len: if set, truncate targets to this many words (``</s>`` is kept).
        with_text: fill ``refs``/``src_sentences``/``id`` (reads ``text.jsonl``; without it the id
            is the position); turn off for the fastest training loads.
        mmap: memory-map the arrays (False loads them into memory).
        expected_hash: if given, raise ``ValueError`` unless the corpus's options hash matches.
    """

    def __init__(
        self,
        root: str | Path,
        split: str,
        *,
        vocab: Vocab | None = None,
        max_target_len: int | None = None,
        with_text: bool = True,
        mmap: bool = True,
        expected_hash: str | None = None,
    ) -> None:
        self.root = Path(root)
        self.meta = read_meta(self.root)
        if split not in self.meta["splits"]:
            have = ", ".join(sorted(self.meta["splits"])) or "none"
            raise KeyError(f"{self.root}: no split {split!r} (available: {have})")
        if expected_hash is not None and self.meta["options_hash"] != expected_hash:
            raise ValueError(
                f"{self.root}: prepared with options hash {self.meta['options_hash']}, expected {expected_hash}"
            )
        self.split = split
        self.options = PrepOptions.from_dict(self.meta["options"])
        self.vocab = vocab if vocab is not None else Vocab.load(self.root / VOCAB_FILE)
        recorded = self.meta.get("vocab_size")
        if vocab is None and isinstance(recorded, int) and recorded != len(self.vocab):
            raise ValueError(
                f"{self.root / VOCAB_FILE}: {len(self.vocab)} words, but {self.root / META_FILE} records "
                f"vocab_size {recorded}: the file was replaced after the corpus was prepared; prepare it again"
            )
        if max_target_len is not None and (
            isinstance(max_target_len, bool) or not isinstance(max_target_len, int) or max_target_len < 2
        ):  # (a target keeps <s> and </s>)
            raise ValueError(f"max_target_len: expected None or an int >= 2, got {max_target_len!r}")
        self.max_target_len = max_target_len
        self.with_text = with_text
        self.mmap = mmap
        self.data: PreparedSplit = load_split(self.root, split, mmap=mmap)
        for name, ids in (("src.npy", self.data.src), ("tgt.npy", self.data.tgt)):  # else: an IndexError in a model
            low, high = (int(ids.min()), int(ids.max())) if ids.size else (0, 0)
            if low < 0 or high >= len(self.vocab):
                raise ValueError(
                    f"{self.root / split / name}: token ids from {low} to {high}, but the vocabulary has "
                    f"{len(self.vocab)} words (ids 0-{len(self.vocab) - 1}): the split and the vocabulary "
                    f"do not belong together; prepare the corpus again"
                )

    def __len__(self) -> int:
        return len(self.data)

    @property
    def num_chunks(self) -> int:
        """M."""
        return int(self.data.src.shape[1])

    @property
    def chunk_len(self) -> int:
        """N."""
        return int(self.data.src.shape[2])

    def target_ids(self, index: int) -> npt.NDArray[np.int32]:
        """The stored target of example ``index`` (``<s>`` ... ``</s>``), possibly truncated."""
        start, end = int(self.data.tgt_offsets[index]), int(self.data.tgt_offsets[index + 1])
        ids = np.asarray(self.data.tgt[start:end])
        limit = self.max_target_len
        if limit is not None and len(ids) > limit + 2:
            ids = np.concatenate([ids[: limit + 1], ids[-1:]])
        return ids

    def target_lengths(self) -> npt.NDArray[np.int64]:
        """Target lengths (with ``<s>``/``</s>``, after truncation) of all examples."""
        lengths = np.diff(self.data.tgt_offsets).astype(np.int64)
        if self.max_target_len is not None:
            lengths = np.minimum(lengths, self.max_target_len + 2)
        return lengths

    def source_lengths(self) -> npt.NDArray[np.int64]:
        """The number of real (non-pad) source positions of every example."""
        return self.data.src_lengths.astype(np.int64)

    def __getstate__(self) -> dict[str, Any]:
        # Worker processes reopen the memory maps instead of receiving a copy of the arrays.
        state = dict(self.__dict__)
        state["data"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.data = load_split(self.root, self.split, mmap=self.mmap)

    def text(self, index: int) -> ExampleText:
        """The stored strings of example ``index`` (its id, origin, references and source sentences)."""
        return self.data.text[index]

    def __getitem__(self, index: int) -> Example:
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} examples")
        src = torch.from_numpy(np.array(self.data.src[index], dtype=np.int64))
        example = Example(
            src=src,
            src_mask=src != self.vocab.pad_id,
            tgt=torch.from_numpy(self.target_ids(index).astype(np.int64)),
            salient=int(self.data.salient[index]),
            index=index,
            id=str(index),
        )
        if self.with_text:
            text = self.data.text[index]
            example.refs, example.src_sentences, example.id = text.refs, text.src_sentences, text.id
        return example
