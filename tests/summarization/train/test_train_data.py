"""`scg_summarize.train.data.batch_to`: a batch on the device, with ``data.regrid`` applied to its
source grid and to its `SourceLengths`."""

from __future__ import annotations

from dataclasses import replace

import torch
from scg_summarize.data import Example, SourceLengths, collate_examples
from scg_summarize.train import load_config
from scg_summarize.train.data import batch_to


def _batch() -> tuple[torch.Tensor, list[Example]]:
    mask = torch.zeros(2, 3, 5, dtype=torch.bool)  # (B, M, N): documents of 7 and 12 words
    mask[0, 0, :5] = mask[0, 1, :2] = True
    mask[1, :2, :5] = mask[1, 2, :2] = True
    src = torch.randint(4, 30, mask.shape) * mask
    tgt = torch.tensor([2, 5, 3])
    return mask, [Example(src=src[i], src_mask=mask[i], tgt=tgt, index=i) for i in range(2)]


def test_regrid_gives_the_regridded_sources_exact_lengths() -> None:
    mask, examples = _batch()
    batch = collate_examples(examples)
    assert batch.lengths == SourceLengths(document=12, chunk=5, chunks=3)
    plain = batch_to(batch, torch.device("cpu"), load_config("tiny-C2F", []))
    assert plain.lengths == batch.lengths and torch.equal(plain.src_mask, mask)
    for m, n, want in ((4, 4, (12, 4, 3)), (2, 4, (8, 4, 2)), (1, 20, (12, 12, 1)), (8, 5, (12, 5, 3))):
        moved = batch_to(batch, torch.device("cpu"), load_config("tiny-C2F", [f"data.regrid=[{m}, {n}]"]))
        assert moved.src_mask.shape == (2, m, n)
        document, chunk, chunks = want
        exact = SourceLengths(document=document, chunk=chunk, chunks=chunks)
        assert moved.lengths == exact == SourceLengths.of(moved.src_mask)
    looser = batch_to(
        replace(batch, lengths=SourceLengths(document=14, chunk=5, chunks=3)),
        torch.device("cpu"),
        load_config("tiny-C2F", ["data.regrid=[1, 20]"]),
    )
    assert looser.lengths == SourceLengths(document=14, chunk=14, chunks=1)  # (a bound stays a bound)
