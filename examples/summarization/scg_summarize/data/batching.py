"""Batches: :func:`collate_examples` and the resumable loader :func:`make_dataloader`.

A batch (the input of the models) is a dict:

================  =====================  ==================================================
``src``           long ``(B, M, N)``     chunked source ids (0 = ``<pad>``)
``src_mask``      bool ``(B, M, N)``     True at real source words
``tgt``           long ``(B, T)``        ``<s> ... </s>`` target ids, right-padded with 0
``tgt_mask``      bool ``(B, T)``        True at real target positions
``tgt_lengths``   long ``(B,)``          target lengths including ``<s>`` and ``</s>``
``salient``       long ``(B,)``          salient chunk index, -1 when unknown
``index``         long ``(B,)``          example positions in the split
``refs``          list[list[str]]        reference summaries per example (if loaded)
``src_sentences`` list[list[str]]        source sentences per example (if loaded)
``ids``           list[str]              example ids (if loaded)
================  =====================  ==================================================
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from .dataset import SummarizationDataset
from .sampler import BucketBatchSampler

__all__ = ["BUCKET_KEYS", "SummaryLoader", "collate_examples", "make_dataloader"]

BUCKET_KEYS: tuple[str, ...] = ("tgt", "src", "both", "none")


def collate_examples(examples: Sequence[dict[str, Any]], pad_id: int = 0) -> dict[str, Any]:
    """Stack dataset items into a batch (see the module docstring), padding targets."""
    if not examples:
        raise ValueError("cannot collate an empty batch")
    tgts = [ex["tgt"] for ex in examples]
    lengths = torch.tensor([len(t) for t in tgts], dtype=torch.long)
    tgt = torch.full((len(tgts), int(lengths.max())), pad_id, dtype=torch.long)
    for row, ids in enumerate(tgts):
        tgt[row, : len(ids)] = ids
    tgt_mask = torch.arange(tgt.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
    batch: dict[str, Any] = {
        "src": torch.stack([ex["src"] for ex in examples]),
        "src_mask": torch.stack([ex["src_mask"] for ex in examples]),
        "tgt": tgt,
        "tgt_mask": tgt_mask,
        "tgt_lengths": lengths,
        "salient": torch.tensor([ex["salient"] for ex in examples], dtype=torch.long),
        "index": torch.tensor([ex["index"] for ex in examples], dtype=torch.long),
    }
    for key, out in (("refs", "refs"), ("src_sentences", "src_sentences"), ("id", "ids")):
        if key in examples[0]:
            batch[out] = [ex[key] for ex in examples]
    return batch


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

    def __iter__(self) -> Iterator[dict[str, Any]]:
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

    def __call__(self, examples: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return collate_examples(examples, self.pad_id)
