"""Batches: the typed records :class:`SourceBatch` / :class:`Batch`, :func:`collate_examples` and
the resumable loader :func:`make_dataloader`.

A :class:`SourceBatch` is what a decoder needs (the source grid); a :class:`Batch` adds the
targets that training and teacher forcing score. Shapes: ``B`` examples, ``M`` chunks of ``N``
words, ``T`` target positions (``<s> ... </s>``, right-padded with 0).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

import numpy as np
import torch
from torch.utils.data import DataLoader

from .dataset import Example, SummarizationDataset
from .sampler import BucketBatchSampler

__all__ = [
    "BUCKET_KEYS",
    "Batch",
    "SourceBatch",
    "SourceLengths",
    "SummaryLoader",
    "collate_examples",
    "collate_sources",
    "make_dataloader",
    "pad_targets",
]

BUCKET_KEYS: tuple[str, ...] = ("tgt", "src", "both", "none")

_B = TypeVar("_B", bound="SourceBatch")


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceLengths:
    """Upper bounds on the real words of a batch's sources, counted on the host when the batch is
    collated: the encoders run over that much of the grid, not over its whole padded width,
    without reading the lengths back from the device (a wait on a GPU, and a read that a CUDA
    graph capture refuses). Any bounds at least the longest lengths give the same states."""

    document: int  # the real words of the longest document: a flat encoder's steps (≤ M·N)
    chunk: int  # the real words of the longest chunk: a chunked encoder's steps (≤ N)
    chunks: int  # the chunks up to the last one holding a word, in any document (≤ M)

    @classmethod
    def of(cls, src_mask: torch.Tensor) -> SourceLengths:
        """The exact longest lengths of ``src_mask`` ``(B, M, N)`` (a read of its values: made on
        the host copy)."""
        B, M, N = src_mask.shape
        if B * M == 0:
            return cls(document=0, chunk=0, chunks=0)
        per_chunk = src_mask.sum(-1)  # (B, M)
        used = per_chunk.amax(0) > 0  # (M,): chunks holding a word in some document
        chunks = int((used * torch.arange(1, M + 1)).max())  # (the last such chunk's number; 0 for none)
        return cls(document=int(per_chunk.sum(-1).max()), chunk=int(per_chunk.max()), chunks=chunks)

    def rounded_up(self, num_chunks: int, chunk_len: int) -> SourceLengths:
        """Each bound rounded up to a power of two, at most its width on a grid of ``num_chunks``
        chunks of ``chunk_len`` words: few distinct values, so that a captured step needs few graphs."""
        return SourceLengths(
            document=min(_power_of_two(self.document), num_chunks * chunk_len),
            chunk=min(_power_of_two(self.chunk), chunk_len),
            chunks=min(_power_of_two(self.chunks), num_chunks),
        )


def _power_of_two(n: int) -> int:
    """The least power of two ≥ ``n`` (1 for n ≤ 1)."""
    return 1 << max(n - 1, 0).bit_length()


@dataclass(kw_only=True, slots=True)
class SourceBatch:
    """The decoder input: a batch of source grids, with the text of the examples when loaded.

    ``lengths`` bounds the real words of every document and chunk of the batch: counted by
    :func:`collate_sources` from the host copy and kept by `rows` (a bound still) and `to`; a
    batch made otherwise leaves it None, and the encoders then read the lengths from the mask. It
    is not checked (that would be the read it saves): a bound below the longest source fails in the
    encoder, which finds no state at that source's last word (on the CPU a `ValueError` naming the
    lengths; on a GPU a device-side index assertion)."""

    src: torch.Tensor  # (B, M, N) long source ids, 0 = <pad>
    src_mask: torch.Tensor  # (B, M, N) bool, True at real source words
    salient: torch.Tensor | None = None  # (B,) long salient chunk (synthetic data), -1 when unknown
    refs: list[list[str]] | None = None  # the reference summaries of each example
    src_sentences: list[list[str]] | None = None  # the source sentences of each example
    ids: list[str] | None = None  # the example ids
    lengths: SourceLengths | None = None  # bounds on the real words (`SourceLengths`), counted on the host

    @property
    def size(self) -> int:
        """B, the number of examples."""
        return int(self.src.shape[0])

    def to(self: _B, device: torch.device | str, *, non_blocking: bool = False) -> _B:
        """This batch with its tensors on ``device``."""
        return self._map_tensors(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self: _B) -> _B:
        """This batch with its tensors in pinned memory (``DataLoader(pin_memory=True)`` calls it)."""
        return self._map_tensors(torch.Tensor.pin_memory)

    def tensors(self) -> dict[str, torch.Tensor]:
        """The batch's tensor fields by name, in field order (absent optional ones and text left out)."""
        return {f.name: value for f in fields(self) if isinstance(value := getattr(self, f.name), torch.Tensor)}

    def _map_tensors(self: _B, fn: Callable[[torch.Tensor], torch.Tensor]) -> _B:
        mapped: dict[str, Any] = {name: fn(value) for name, value in self.tensors().items()}
        return replace(self, **mapped)

    def rows(self: _B, which: slice) -> _B:
        """The examples ``which`` of this batch (tensors and text alike)."""
        picked: dict[str, Any] = {
            f.name: value[which]
            for f in fields(self)
            if isinstance(value := getattr(self, f.name), torch.Tensor | list)
        }
        return replace(self, **picked)


@dataclass(kw_only=True, slots=True)
class Batch(SourceBatch):
    """A :class:`SourceBatch` with its targets (training, validation, teacher forcing)."""

    tgt: torch.Tensor  # (B, T) long <s> ... </s> target ids, right-padded with 0
    tgt_mask: torch.Tensor  # (B, T) bool, True at real target positions
    index: torch.Tensor | None = None  # (B,) long example positions in the split

    @property
    def tgt_lengths(self) -> torch.Tensor:
        """(B,) long target lengths including ``<s>`` and ``</s>``."""
        return self.tgt_mask.sum(1)

    def with_target_length(self, length: int) -> Batch:
        """This batch with its targets right-padded to ``length`` positions (the same examples: the
        padding is masked out of every loss; a compiled or captured step then sees one shape);
        ``ValueError`` if the targets are longer."""
        T = int(self.tgt.shape[1])
        if T > length:
            raise ValueError(f"a batch has targets of {T} positions, more than the {length} it is padded to")
        if T == length:
            return self
        B = self.tgt.shape[0]
        return replace(
            self,
            tgt=torch.cat([self.tgt, self.tgt.new_zeros(B, length - T)], 1),
            tgt_mask=torch.cat([self.tgt_mask, self.tgt_mask.new_zeros(B, length - T)], 1),
        )


def pad_targets(targets: Sequence[torch.Tensor], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tgt (B, T), tgt_mask (B, T))`` of right-padded target id sequences."""
    lengths = torch.tensor([len(t) for t in targets], dtype=torch.long)
    tgt = torch.full((len(targets), int(lengths.max())), pad_id, dtype=torch.long)
    for row, ids in enumerate(targets):
        tgt[row, : len(ids)] = ids
    return tgt, torch.arange(tgt.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)


def collate_sources(examples: Sequence[Example]) -> SourceBatch:
    """Stack the sources (and text) of examples into a :class:`SourceBatch` (the decoder input)."""
    if not examples:
        raise ValueError("cannot collate an empty batch")
    src_mask = torch.stack([ex.src_mask for ex in examples])
    return SourceBatch(
        src=torch.stack([ex.src for ex in examples]),
        src_mask=src_mask,
        salient=torch.tensor([ex.salient for ex in examples], dtype=torch.long),
        refs=[ex.refs for ex in examples],
        src_sentences=[ex.src_sentences for ex in examples],
        ids=[ex.id for ex in examples],
        lengths=SourceLengths.of(src_mask),
    )


def collate_examples(examples: Sequence[Example], pad_id: int = 0) -> Batch:
    """Stack examples into a :class:`Batch`, padding targets; ``ValueError`` naming an example
    without a target (a document read for ``summarize``)."""
    source = collate_sources(examples)
    targets = [ex.tgt for ex in examples]
    missing = [ex.id for ex, tgt in zip(examples, targets) if tgt is None]
    if missing:
        raise ValueError(f"cannot collate a training batch: example {missing[0]!r} has no target summary")
    tgt, tgt_mask = pad_targets([t for t in targets if t is not None], pad_id)
    fields_of_source: dict[str, Any] = {f.name: getattr(source, f.name) for f in fields(source)}
    index = torch.tensor([ex.index for ex in examples], dtype=torch.long)
    return Batch(**fields_of_source, tgt=tgt, tgt_mask=tgt_mask, index=index)


class SummaryLoader:
    """A ``DataLoader`` over a :class:`BucketBatchSampler` that can be saved and resumed.

    The position is counted in batches *delivered to the caller*, so it is exact even when
    worker processes prefetch batches ahead. Iterating yields the rest of the current epoch;
    after a full pass the epoch advances by one.
    """

    def __init__(self, loader: DataLoader[Any], sampler: BucketBatchSampler) -> None:
        self.loader = loader
        self.sampler = sampler
        self.dataset = loader.dataset
        self._epoch = sampler.epoch
        self._position = sampler.position

    @property
    def epoch(self) -> int:
        """The epoch the next batch belongs to."""
        return self._epoch

    @property
    def position(self) -> int:
        """Batches of the current epoch already delivered."""
        return self._position

    def __len__(self) -> int:
        """Batches in a full epoch."""
        return len(self.sampler)

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its beginning (no-op if it is the current epoch)."""
        if epoch != self._epoch:
            self._epoch = epoch
            self._position = 0

    def __iter__(self) -> Iterator[Batch]:
        self.sampler.epoch = self._epoch
        self.sampler.position = self._position
        for batch in self.loader:
            self._position += 1
            yield batch
        self._epoch += 1
        self._position = 0

    def state_dict(self) -> dict[str, Any]:
        """The sampler's state with the delivered position (for checkpoints)."""
        state = self.sampler.state_dict()
        state.update(epoch=self._epoch, position=self._position)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict` output (checked against this sampler)."""
        self.sampler.load_state_dict(state)
        self._epoch = self.sampler.epoch
        self._position = self.sampler.position


def _bucket_lengths(dataset: SummarizationDataset, bucket_by: str) -> np.ndarray[Any, Any]:
    if bucket_by == "tgt":
        return dataset.target_lengths()
    if bucket_by == "src":
        return dataset.source_lengths()
    if bucket_by == "both":
        src = dataset.source_lengths()
        return dataset.target_lengths() * (int(src.max(initial=0)) + 1) + src
    if bucket_by == "none":
        return np.zeros(len(dataset), dtype=np.int64)
    raise ValueError(f"bucket_by must be one of {BUCKET_KEYS}, got {bucket_by!r}")


def make_dataloader(
    dataset: SummarizationDataset,
    batch_size: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    bucket_by: str = "both",
    pool_batches: int = 50,
    drop_last: bool = False,
    num_workers: int = 0,
    pin_memory: bool = False,
) -> SummaryLoader:
    """A resumable, length-bucketed loader over ``dataset``.

    Args:
        dataset: a prepared split.
        batch_size: examples per batch.
        shuffle: seeded shuffling with bucketing (False: dataset order, e.g. evaluation).
        seed: the shuffling seed (epoch ``e`` uses ``(seed, e)``).
        bucket_by: the length that batches share: ``"tgt"``, ``"src"``, ``"both"`` (target
            first, then source) or ``"none"``.
        pool_batches: batches' worth of examples sorted together (see the sampler).
        drop_last: drop the final short batch of each epoch.
        num_workers: ``DataLoader`` worker processes.
        pin_memory: pin batch tensors (for GPU training).
    """
    sampler = BucketBatchSampler(
        _bucket_lengths(dataset, bucket_by),
        batch_size,
        shuffle=shuffle,
        seed=seed,
        pool_batches=pool_batches,
        drop_last=drop_last,
    )
    loader: DataLoader[Any] = DataLoader(
        dataset,
        batch_sampler=sampler,
        collate_fn=_Collate(dataset.vocab.pad_id),
        num_workers=num_workers,
        pin_memory=pin_memory,
    )
    return SummaryLoader(loader, sampler)


class _Collate:
    """A picklable collate function (for worker processes)."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, examples: Sequence[Example]) -> Batch:
        return collate_examples(examples, self.pad_id)
