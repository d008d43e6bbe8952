"""Chunk layouts, padding masks and flat views (with hypothesis properties)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scg_summarize.data.chunking import flat_view, layout_chunks, pack_chunks, pack_flat, pack_words, regrid

EOS_ID = 3
sentences_strategy = st.lists(st.lists(st.integers(4, 50), max_size=12), max_size=10)
shape_strategy = st.tuples(st.integers(1, 6), st.integers(1, 9))
#: examples per property: small integer structures (empty sentences and documents, one chunk, one word per
#: chunk, documents longer and shorter than the grid) that hypothesis reaches well within 40 (~8 ms each)
EXAMPLES = 40


def test_grid_cuts_the_first_m_times_n_words() -> None:
    chunks = layout_chunks([["a", "b", "c"], ["d", "e"]], "grid", num_chunks=2, chunk_len=3)
    assert chunks == [["a", "b", "c"], ["</s>", "d", "e"]]
    chunks = layout_chunks([["a"]], "grid", num_chunks=3, chunk_len=2)
    assert chunks == [["a", "</s>"]]


def test_sentences_layout_truncates_and_limits() -> None:
    doc = [["a", "b", "c", "d"], [], ["e"], ["f"], ["g"]]
    chunks = layout_chunks(doc, "sentences", num_chunks=3, chunk_len=3)
    assert chunks == [["a", "b", "c"], ["e", "</s>"], ["f", "</s>"]]
    with pytest.raises(ValueError, match="unknown layout"):
        layout_chunks(doc, "pages", 2, 2)


def test_pack_chunks_pads_with_zero() -> None:
    ids, mask = pack_chunks([[5, 6], [7]], num_chunks=3, chunk_len=2)
    assert ids.tolist() == [[5, 6], [7, 0], [0, 0]]
    assert mask.tolist() == [[True, True], [True, False], [False, False]]
    assert ids.dtype == np.int32
    with pytest.raises(ValueError):
        pack_chunks([[1, 2, 3]], 1, 2)
    with pytest.raises(ValueError):
        pack_chunks([[1], [2]], 1, 2)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
@given(sentences_strategy, shape_strategy)
def test_grid_flat_view_is_the_document_prefix(doc: list[list[int]], shape: tuple[int, int]) -> None:
    m, n = shape
    flat_doc = [t for s in doc if s for t in [*s, EOS_ID]]
    ids, mask = pack_chunks(layout_chunks(doc, "grid", m, n, EOS_ID), m, n)
    placed = min(len(flat_doc), m * n)
    assert int(mask.sum()) == placed
    assert (ids[~mask] == 0).all() and (ids[mask] != 0).all()
    flat_ids, flat_mask = flat_view(torch.from_numpy(ids), torch.from_numpy(mask))
    assert flat_ids.shape == (m * n,)
    assert flat_ids[:placed].tolist() == flat_doc[:placed]
    assert flat_mask.tolist() == [True] * placed + [False] * (m * n - placed)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
@given(sentences_strategy, shape_strategy)
def test_sentence_chunks_hold_one_sentence_each(doc: list[list[int]], shape: tuple[int, int]) -> None:
    m, n = shape
    kept = [s for s in doc if s][:m]
    ids, mask = pack_chunks(layout_chunks(doc, "sentences", m, n, EOS_ID), m, n)
    assert int(mask.sum()) == sum(min(len(s) + 1, n) for s in kept)
    assert (ids[~mask] == 0).all()
    for row, sentence in enumerate(kept):
        assert ids[row][mask[row]].tolist() == [*sentence, EOS_ID][:n]
        assert mask[row].tolist() == sorted(mask[row].tolist(), reverse=True)  # prefix mask
    assert not mask[len(kept) :].any()
    packed, packed_mask = pack_flat(torch.from_numpy(ids)[None], torch.from_numpy(mask)[None])
    expected = [t for s in kept for t in [*s, EOS_ID][:n]]
    assert packed[0][packed_mask[0]].tolist() == expected
    assert packed_mask[0].tolist() == [True] * len(expected) + [False] * (m * n - len(expected))
    assert (packed[0][~packed_mask[0]] == 0).all()


def test_pack_flat_equals_flat_view_for_grid() -> None:
    ids, mask = pack_chunks(layout_chunks([[4, 5, 6, 7, 8]], "grid", 3, 2, EOS_ID), 3, 2)
    src, src_mask = torch.from_numpy(ids)[None].long(), torch.from_numpy(mask)[None]
    assert torch.equal(pack_flat(src, src_mask)[0], flat_view(src, src_mask)[0])


def test_regrid_recuts_the_flat_document() -> None:
    src = torch.tensor([[[5, 6, 0], [7, 0, 0], [8, 9, 10]]])
    out, mask = regrid(src, src != 0, 2, 4)
    assert out.tolist() == [[[5, 6, 7, 8], [9, 10, 0, 0]]]
    assert mask.tolist() == [[[True] * 4, [True, True, False, False]]]
    out, _ = regrid(src, src != 0, 1, 3)
    assert out.tolist() == [[[5, 6, 7]]]


def test_pack_words_packs_grid_words_in_order_with_their_grid_positions() -> None:
    src = torch.tensor([[[5, 6, 0], [7, 0, 0]], [[8, 0, 0], [0, 0, 0]]])
    words, mask, positions = pack_words(src, src != 0)
    assert words.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert mask.tolist() == [[True, True, True], [True, False, False]]
    assert positions.tolist() == [[0, 1, 3], [0, 0, 0]]
    assert pack_words(src, src != 0, max_len=2)[0].tolist() == [[5, 6], [8, 0]]
