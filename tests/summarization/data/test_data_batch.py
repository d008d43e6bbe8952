"""The typed batch records, the one collate for training and decoding, and the one JSON record parser."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from scg_summarize.data import Batch, Example, SourceBatch, SourceLengths, collate_examples, collate_sources
from scg_summarize.data.errors import DataError
from scg_summarize.data.readers import parse_json_record


def _example(i: int, length: int | None) -> Example:
    src = torch.full((2, 3), 4 + i)
    tgt = None if length is None else torch.tensor([2, *range(5, 3 + length), 3])
    return Example(src=src, src_mask=src > 0, tgt=tgt, salient=i % 2, index=i, id=f"e{i}", refs=[f"r{i}"])


def test_collate_examples_pads_targets_and_keeps_the_text() -> None:
    batch = collate_examples([_example(0, 3), _example(1, 5), _example(2, 2)])
    assert isinstance(batch, Batch) and batch.size == 3
    assert batch.src.shape == (3, 2, 3) and batch.tgt.shape == (3, 5)
    assert batch.tgt_lengths.tolist() == [3, 5, 2] and (batch.tgt[~batch.tgt_mask] == 0).all()
    assert batch.index is not None and batch.index.tolist() == [0, 1, 2]
    assert batch.ids == ["e0", "e1", "e2"] and batch.refs == [["r0"], ["r1"], ["r2"]]


def test_a_document_without_target_collates_as_a_source_batch_only() -> None:
    docs = [_example(0, 3), _example(1, None)]
    source = collate_sources(docs)
    assert type(source) is SourceBatch and source.salient is not None and source.salient.tolist() == [0, 1]
    with pytest.raises(ValueError, match="'e1' has no target"):
        collate_examples(docs)


def test_rows_and_to_keep_the_record_type() -> None:
    batch = collate_examples([_example(i, 2 + i) for i in range(4)])
    odd = batch.rows(slice(1, None, 2))
    assert type(odd) is Batch and odd.ids == ["e1", "e3"]
    assert torch.equal(odd.tgt, batch.tgt[1::2]) and torch.equal(odd.src, batch.src[1::2])
    moved = batch.to("cpu")
    assert type(moved) is Batch and moved.refs == batch.refs and torch.equal(moved.tgt_mask, batch.tgt_mask)


def test_source_lengths_are_the_longest_document_and_chunk_and_round_up_within_the_grid() -> None:
    mask = torch.zeros(2, 6, 5, dtype=torch.bool)  # (B, M, N)
    mask[0, 0, :5] = mask[0, 1, :2] = True  # 7 words, chunks of 5 and 2
    mask[1, 0, :3] = mask[1, 2, :3] = mask[1, 4, :3] = True  # 9 words, chunks of 3 (sentences: empty ones between)
    got = SourceLengths.of(mask)
    assert got == SourceLengths(document=9, chunk=5, chunks=5)  # (chunk 4 holds document 1's last words)
    assert got.rounded_up(6, 5) == SourceLengths(document=16, chunk=5, chunks=6)  # (8 → capped at N = 5, M = 6)
    assert got.rounded_up(2, 5) == SourceLengths(document=10, chunk=5, chunks=2)  # (16 → capped at M·N = 10)
    assert SourceLengths(document=8, chunk=1, chunks=3).rounded_up(6, 5) == SourceLengths(document=8, chunk=1, chunks=4)
    zero = SourceLengths(document=0, chunk=0, chunks=0)
    assert zero.rounded_up(4, 5) == SourceLengths(document=1, chunk=1, chunks=1)
    assert SourceLengths.of(torch.zeros(0, 4, 5, dtype=torch.bool)) == zero
    assert SourceLengths.of(torch.zeros(2, 4, 5, dtype=torch.bool)) == zero


def test_collate_counts_the_source_lengths_and_rows_keep_them_as_bounds() -> None:
    examples = [_example(i, 2 + i) for i in range(3)]
    examples[1].src_mask[1] = False  # (a document of one chunk)
    batch = collate_examples(examples)
    assert batch.lengths == SourceLengths(document=6, chunk=3, chunks=2) == SourceLengths.of(batch.src_mask)
    assert collate_sources(examples).lengths == batch.lengths
    one = batch.rows(slice(1, 2))
    assert one.lengths == batch.lengths and SourceLengths.of(one.src_mask) == SourceLengths(
        document=3, chunk=3, chunks=1
    )
    assert batch.to("cpu").lengths == batch.lengths and batch.with_target_length(9).lengths == batch.lengths


def test_the_record_parser_serves_prepare_and_summarize() -> None:
    where = Path("docs.jsonl")
    line = '{"source": ["One.", "Two."]}'
    with pytest.raises(DataError, match=r"docs.jsonl:3: missing field 'target'"):
        parse_json_record(line, where, 3, source="source", target="target")
    doc = parse_json_record(line, where, 3, source="source", target="target", default_id="x:3", target_required=False)
    assert (doc.id, doc.source, doc.references, doc.sentences_given) == ("x:3", ["One.", "Two."], [], True)
    named = parse_json_record('{"source": "a", "target": "t", "id": 7}', where, 1, source="source", target="target")
    assert named.id == "7" and named.references == ["t"]
