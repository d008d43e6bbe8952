"""Dataset items, collation, the bucketing sampler and exact mid-epoch resumption."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from scg_summarize.data.batching import Batch, SummaryLoader, collate_examples, make_dataloader
from scg_summarize.data.dataset import SummarizationDataset, available_splits
from scg_summarize.data.sampler import BucketBatchSampler

from ..conftest import SYNTHETIC_SPLITS


def _indices(batches: list[Batch]) -> list[list[int]]:
    return [b.index.tolist() for b in batches]


def test_dataset_items(synthetic_corpus: Path) -> None:
    assert available_splits(synthetic_corpus) == ["test", "train", "valid"]
    dataset = SummarizationDataset(synthetic_corpus, "valid")
    assert len(dataset) == SYNTHETIC_SPLITS["valid"] and (dataset.num_chunks, dataset.chunk_len) == (8, 16)
    item = dataset[-1]
    assert item.index == SYNTHETIC_SPLITS["valid"] - 1
    assert item.src.dtype == torch.long and item.src.shape == (8, 16)
    assert item.src_mask.dtype == torch.bool
    assert torch.equal(item.src_mask, item.src != 0)
    assert item.tgt[0] == dataset.vocab.bos_id and item.tgt[-1] == dataset.vocab.eos_id
    assert (item.tgt[1:-1] > dataset.vocab.eos_id).all()
    assert 0 <= item.salient < 8
    assert isinstance(item.refs, list) and all(isinstance(r, str) for r in item.refs)
    assert len(item.src_sentences) == 8
    assert item.id == f"syn-1-{SYNTHETIC_SPLITS['valid'] - 1}"
    with pytest.raises(IndexError):
        dataset[SYNTHETIC_SPLITS["valid"]]
    with pytest.raises(KeyError, match="available"):
        SummarizationDataset(synthetic_corpus, "dev")
    with pytest.raises(ValueError, match="options hash"):
        SummarizationDataset(synthetic_corpus, "valid", expected_hash="0" * 16)
    lean = SummarizationDataset(synthetic_corpus, "valid", with_text=False, mmap=False)
    assert lean[0].refs == [] and lean[0].id == "0" and torch.equal(lean[0].src, dataset[0].src)


def test_target_truncation_keeps_the_end_token(synthetic_corpus: Path) -> None:
    dataset = SummarizationDataset(synthetic_corpus, "train", max_target_len=3)
    full = SummarizationDataset(synthetic_corpus, "train")
    tgt, whole = dataset[0].tgt, full[0].tgt
    assert tgt.tolist() == [*whole[:4].tolist(), dataset.vocab.eos_id]
    assert dataset.target_lengths().max() == 5
    items = [full[i] for i in range(len(full))]
    assert full.target_lengths().tolist() == [len(it.tgt) for it in items]
    assert full.source_lengths().tolist() == [int(it.src_mask.sum()) for it in items]


def test_dataset_pickles_without_its_arrays(synthetic_corpus: Path) -> None:
    dataset = SummarizationDataset(synthetic_corpus, "train")
    payload = pickle.dumps(dataset)
    assert len(payload) < dataset.data.src.nbytes / 4
    clone = pickle.loads(payload)
    assert torch.equal(clone[5].src, dataset[5].src) and clone[5].refs == dataset[5].refs


def test_collate_pads_targets(synthetic_corpus: Path) -> None:
    dataset = SummarizationDataset(synthetic_corpus, "test")
    items = [dataset[i] for i in range(5)]
    batch = collate_examples(items)
    lengths = [len(it.tgt) for it in items]
    assert batch.src.shape == (5, 8, 16) and batch.src_mask.shape == (5, 8, 16)
    assert batch.tgt.shape == (5, max(lengths))
    assert batch.tgt_lengths.tolist() == lengths
    assert batch.tgt_mask.sum(1).tolist() == lengths
    assert (batch.tgt[~batch.tgt_mask] == 0).all()
    for row, it in enumerate(items):
        assert batch.tgt[row, : lengths[row]].tolist() == it.tgt.tolist()
    assert batch.salient.dtype == torch.long and batch.salient.tolist() == [it.salient for it in items]
    assert batch.refs == [it.refs for it in items]
    assert batch.ids == [it.id for it in items]
    with pytest.raises(ValueError):
        collate_examples([])


def test_sampler_covers_every_example_and_is_seeded() -> None:
    lengths = np.random.default_rng(0).integers(1, 100, size=103)
    a = BucketBatchSampler(lengths, 10, seed=3)
    b = BucketBatchSampler(lengths, 10, seed=3)
    assert len(a) == 11
    first = a.batches(0)
    assert first == b.batches(0)
    assert sorted(i for batch in first for i in batch) == list(range(103))
    assert a.batches(1) != first
    assert BucketBatchSampler(lengths, 10, seed=4).batches(0) != first
    assert BucketBatchSampler(lengths, 10, shuffle=False).batches()[0] == list(range(10))
    assert len(BucketBatchSampler(lengths, 10, drop_last=True)) == 10
    assert all(len(x) == 10 for x in BucketBatchSampler(lengths, 10, drop_last=True).batches())


def test_bucketing_groups_similar_lengths() -> None:
    lengths = np.random.default_rng(1).integers(1, 200, size=2000)

    def mean_spread(pool_batches: int) -> float:
        batches = BucketBatchSampler(lengths, 16, pool_batches=pool_batches, seed=0).batches()
        return float(np.mean([np.ptp(lengths[b]) for b in batches]))

    assert mean_spread(50) < 0.2 * mean_spread(1)


def test_sampler_state_round_trip() -> None:
    sampler = BucketBatchSampler(list(range(50)), 8, seed=5)
    sampler.set_epoch(2)
    iterator = iter(sampler)
    seen = [next(iterator) for _ in range(3)]
    state = sampler.state_dict()
    assert (state["epoch"], state["position"]) == (2, 3)
    fresh = BucketBatchSampler(list(range(50)), 8, seed=5)
    fresh.load_state_dict(state)
    assert seen + list(fresh) == sampler.batches(2)
    assert (fresh.epoch, fresh.position) == (3, 0)  # a finished epoch moves on
    with pytest.raises(ValueError, match="seed"):
        BucketBatchSampler(list(range(50)), 8, seed=6).load_state_dict(state)
    with pytest.raises(ValueError, match="num_examples"):
        BucketBatchSampler(list(range(49)), 8, seed=5).load_state_dict(state)
    with pytest.raises(ValueError, match=r"sampler state: missing epoch, position"):  # (a bare KeyError before)
        BucketBatchSampler(list(range(50)), 8, seed=5).load_state_dict({})
    with pytest.raises(ValueError, match=r"batch_size must be a positive integer, got 2.5"):  # (failed when iterated)
        BucketBatchSampler(list(range(50)), 2.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_loader_resumes_exactly_mid_epoch(synthetic_corpus: Path, num_workers: int) -> None:
    dataset = SummarizationDataset(synthetic_corpus, "train", with_text=False)

    def loader() -> SummaryLoader:
        return make_dataloader(dataset, 32, seed=11, num_workers=num_workers)

    # the reference epochs 0 and 1 in-process: worker processes must deliver the same batches
    reference = make_dataloader(dataset, 32, seed=11, num_workers=0)
    full = [_indices(list(reference)) for _ in range(2)]
    assert full[0] != full[1]
    assert sorted(i for b in full[0] for i in b) == list(range(len(dataset)))

    interrupted = loader()
    interrupted.set_epoch(1)
    taken = []
    for batch in interrupted:
        taken.append(batch.index.tolist())
        if len(taken) == 3:
            break
    state = interrupted.state_dict()
    assert (state["epoch"], state["position"]) == (1, 3)

    resumed = loader()
    resumed.load_state_dict(state)
    rest = _indices(list(resumed))
    assert taken + rest == full[1]
    assert (resumed.epoch, resumed.position) == (2, 0)
    # The interrupted loader itself also continues where it stopped.
    assert _indices(list(interrupted)) == rest


def test_loader_batches_have_similar_targets(synthetic_corpus: Path) -> None:
    dataset = SummarizationDataset(synthetic_corpus, "train")
    loader = make_dataloader(dataset, 16, seed=0, bucket_by="tgt")
    batches = list(loader)
    assert len(batches) == len(loader) == 15
    spread = [int(b.tgt_lengths.max() - b.tgt_lengths.min()) for b in batches]
    assert np.mean(spread) <= 1.0
    ordered = list(make_dataloader(dataset, 50, shuffle=False))
    assert ordered[0].index.tolist() == list(range(50))
    with pytest.raises(ValueError, match="bucket_by"):
        make_dataloader(dataset, 4, bucket_by="size")
