"""Loading a prepared corpus for training and evaluation, and moving batches to the device with
the run's ``data.regrid`` (:func:`scg_summarize.data.chunking.regrid`) applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..data import SummarizationDataset, SummaryLoader, make_dataloader, regrid
from ..data.batching import Batch, SourceLengths
from .config import Config

__all__ = ["batch_to", "load_dataset", "load_training_splits", "make_loader"]


def batch_to(batch: Batch, device: torch.device, config: Config) -> Batch:
    """Move the tensors of ``batch`` to ``device`` and apply ``data.regrid``, which keeps each
    document's first m·n words and cuts them into chunks of n: its `SourceLengths` follow (exact
    when they were: the longest document's first n words are the longest chunk, and its chunks
    are the last to hold a word)."""
    out = batch.to(device, non_blocking=True)
    if config.data.regrid:
        m, n = config.data.regrid
        out.src, out.src_mask = regrid(out.src, out.src_mask, m, n)
        out.salient = None if out.salient is None else torch.full_like(out.salient, -1)  # chunk indices no longer apply
        if out.lengths is not None:
            words = min(out.lengths.document, m * n)
            out.lengths = SourceLengths(document=words, chunk=min(words, n), chunks=-(-words // n))
    return out


def load_dataset(
    root: str | Path, split: str, config: Config, *, train: bool = False, with_text: bool = False, vocab: Any = None
) -> SummarizationDataset:
    """A split of the prepared corpus at ``root`` as a dataset (training targets truncated to
    ``data.max_target_len``); its storage alone is `scg_summarize.data.load_split`."""
    max_len = config.data.max_target_len if train and config.data.max_target_len > 0 else None
    return SummarizationDataset(root, split, vocab=vocab, max_target_len=max_len, with_text=with_text)


def make_loader(
    dataset: SummarizationDataset,
    config: Config,
    *,
    train: bool,
    batch_size: int | None = None,
    drop_last: bool = False,
) -> SummaryLoader:
    """The training loader (seeded, bucketed, resumable) or an in-order evaluation loader."""
    if train:
        loader = make_dataloader(
            dataset,
            batch_size or config.train.batch_size,
            shuffle=True,
            seed=config.train.seed,
            bucket_by=config.data.bucket_by,
            pool_batches=config.train.pool_batches or len(dataset),  # 0: the whole split sorted at once
            drop_last=drop_last,
            num_workers=config.train.num_workers,
        )
    else:
        loader = make_dataloader(dataset, batch_size or config.eval.batch_size, shuffle=False, bucket_by="none")
    # A DataLoader draws a worker seed from torch's *global* generator whenever an iterator is
    # created; give it its own, so that resuming mid-epoch (a new iterator) leaves the global
    # stream (dropout, C2F's draws) exactly where the checkpoint put it.
    loader.loader.generator = torch.Generator().manual_seed(config.train.seed)
    return loader


def load_training_splits(data_dir: Path, config: Config) -> tuple[SummarizationDataset, SummarizationDataset]:
    """The training and validation splits of ``data_dir`` (``data.train_split``, ``data.valid_split``;
    neither may be empty: validation picks ``best.pt`` and drives the lr decay)."""
    train_set = load_dataset(data_dir, config.data.train_split, config, train=True)
    valid_set = load_dataset(data_dir, config.data.valid_split, config, vocab=train_set.vocab)
    for role, dataset in (("training", train_set), ("validation", valid_set)):
        if len(dataset) == 0:
            raise ValueError(
                f"{data_dir}: the {role} split {dataset.split!r} has no examples "
                f"(validation perplexity picks best.pt and drives the lr decay; prepare a "
                f"non-empty split or name another with --set data.{role[:5]}_split=NAME)"
            )
    return train_set, valid_set
