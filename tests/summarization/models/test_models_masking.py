"""Padding never changes outputs: extra padding chunks, longer chunks, padded targets."""

from __future__ import annotations

import pytest
import torch
from scg_summarize.models import ConvChunkEncoder
from scg_summarize.models.common.attention import masked_softmax

from ..models_helpers import make_batch, make_model, pad_batch

CASES = [
    ("standard", {}),
    ("model1", {}),
    ("hier", {}),
    ("hier", {"chunk_encoder": "bow", "pos": True}),
    ("c2f", {"multi": 2}),
    ("c2f", {"pos": True, "test_k": 2}),
    ("standard", {"bidirectional": True}),
    ("c2f", {"bidirectional": True, "multi": 2}),
]


def _nll(model, batch):
    out = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="greedy")
    return torch.stack(out.step_nll, 1), out


@pytest.mark.parametrize(("attention", "options"), CASES)
def test_extra_source_padding_changes_nothing(attention: str, options: dict) -> None:
    model = make_model(attention, **options).eval()
    batch = make_batch(B=3, M=4, N=6)
    with torch.no_grad():
        base, out = _nll(model, batch)
        for extra in ({"extra_chunks": 2}, {"extra_words": 3}, {"extra_chunks": 1, "extra_words": 5}):
            padded, out2 = _nll(model, pad_batch(batch, **extra))
            torch.testing.assert_close(padded, base, rtol=1e-5, atol=1e-6)
            for a, b in zip(out.attention, out2.attention):
                M = a.chunk_probs.shape[1]
                torch.testing.assert_close(b.chunk_probs[:, :M], a.chunk_probs, rtol=1e-5, atol=1e-6)
                assert torch.all(b.chunk_probs[:, M:] == 0)


@pytest.mark.parametrize("attention", ["standard", "hier", "c2f"])
def test_padded_target_rows_match_unpadded_ones(attention: str) -> None:
    model = make_model(attention).eval()
    batch = make_batch(B=3, T=6)
    with torch.no_grad():
        full, _ = _nll(model, batch)
        for row in range(3):
            length = int(batch.tgt_mask[row].sum())
            single = batch.rows(slice(row, row + 1))
            single.tgt, single.tgt_mask = single.tgt[:, :length], single.tgt_mask[:, :length]
            alone, _ = _nll(model, single)
            torch.testing.assert_close(full[row, : length - 1], alone[0], rtol=1e-5, atol=1e-6)
            assert torch.all(full[row, length - 1 :] == 0)


def test_padding_rows_get_no_gradient_through_embeddings() -> None:
    model = make_model("hier")
    batch = make_batch()
    out = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask)
    out.total_nll().backward()
    assert torch.all(model.src_embedding.weight.grad[0] == 0)


def test_conv_chunk_encoder_ignores_trailing_padding() -> None:
    torch.manual_seed(0)
    enc = ConvChunkEncoder(emb_dim=5, filters=4, width=3)
    emb = torch.randn(2, 3, 4, 5)
    mask = torch.tensor(
        [[[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], [[1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 0, 0]]], dtype=torch.bool
    )
    emb = emb * mask.unsqueeze(-1)
    out = enc(mask.long(), mask, emb)
    longer = torch.cat([emb, torch.zeros(2, 3, 6, 5)], 2)
    out2 = enc(mask.long(), torch.cat([mask, torch.zeros(2, 3, 6, dtype=torch.bool)], 2), longer)
    torch.testing.assert_close(out, out2)
    assert torch.all(out[1, 1] == 0)  # an empty chunk
    # a 1-word chunk (shorter than the filter) still gets a real vector
    assert out[0, 2].abs().sum() > 0


def test_masked_softmax_has_no_nans_for_empty_rows() -> None:
    scores = torch.randn(2, 3, requires_grad=True)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    p = masked_softmax(scores, mask)
    torch.testing.assert_close(p.sum(1), torch.tensor([1.0, 0.0]))
    assert p[0, 1] == 0
    p.sum().backward()
    assert torch.isfinite(scores.grad).all()
