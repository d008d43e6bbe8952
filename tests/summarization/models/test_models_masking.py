"""Padding never changes outputs: extra padding chunks, longer chunks, padded targets."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from scg_summarize.data import SourceLengths
from scg_summarize.models import ConvChunkEncoder, FlatWordEncoder, PaulusConfig, build_model
from scg_summarize.models.common.attention import masked_softmax

from ..models_helpers import V, make_batch, make_model, pad_batch

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


@pytest.mark.parametrize(("attention", "options"), CASES)
def test_the_word_encoders_run_the_steps_the_source_lengths_bound_and_give_the_same_outputs(
    attention: str, options: dict
) -> None:
    """Given the batch's `SourceLengths` (any bounds at least the longest source, at most the
    width), the word encoder's LSTMs run that many steps over the chunks up to the last one
    holding words (all of them at once for a flat encoder), and every output is the one of the
    encoders that read the lengths from the mask (None) over every chunk."""
    model = make_model(attention, **options).eval()
    batch = pad_batch(make_batch(B=3, M=4, N=6), extra_chunks=3, extra_words=5)  # (B, 7, 11)
    _, M, N = batch.src.shape
    B = batch.size
    flat = isinstance(model.word_encoder, FlatWordEncoder)
    runs: list[tuple[int, int]] = []  # (sequences, steps) of each LSTM call
    model.word_encoder.layers[0].register_forward_pre_hook(lambda module, args: runs.append(args[0].shape[:2]))
    exact = SourceLengths.of(batch.src_mask)
    bounds = [exact, exact.rounded_up(M, N), SourceLengths(document=M * N, chunk=N, chunks=M)]
    assert len({b.document if flat else b.chunk for b in bounds}) == 3  # (three different step counts)
    assert exact.chunks < M  # (the padding chunks are skipped)

    def run(b: SourceLengths) -> tuple[int, int]:
        return (B, b.document) if flat else (B * b.chunks, b.chunk)

    with torch.no_grad():
        base, out = _nll(model, batch)
        assert runs == [(B, exact.document) if flat else (B * M, exact.chunk)]  # (read from the mask)
        for bound in bounds:
            runs.clear()
            got = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="greedy", lengths=bound)
            assert runs == [run(bound)]
            torch.testing.assert_close(torch.stack(got.step_nll, 1), base, rtol=1e-5, atol=1e-6)
            for a, b in zip(out.attention, got.attention):
                torch.testing.assert_close(b.chunk_probs, a.chunk_probs, rtol=1e-5, atol=1e-6)
        short = replace(exact, document=exact.document - 1, chunk=exact.chunk - 1)  # (not a bound: cuts a source)
        with pytest.raises(ValueError, match=r"the batch.s lengths SourceLengths\(document=\d+, .* do not bound its"):
            model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="greedy", lengths=short)
        fewer = replace(exact, chunks=exact.chunks - 1)  # (a chunk with words left out)
        with pytest.raises(RuntimeError, match=r"the batch.s lengths .* do not bound its chunks: a later one holds"):
            model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="greedy", lengths=fewer)


def test_the_paulus_encoder_takes_the_source_lengths_too() -> None:
    """The bidirectional flat encoder of Paulus et al.: the same outputs under a bound."""
    model = build_model(PaulusConfig(vocab_size=V, emb_dim=8, hidden=8, dropout=0.0)).eval()
    batch = pad_batch(make_batch(B=3, M=4, N=6), extra_chunks=2)
    with torch.no_grad():
        base = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask)
        for bound in (SourceLengths.of(batch.src_mask), SourceLengths(document=48, chunk=6, chunks=6)):
            got = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, lengths=bound)
            torch.testing.assert_close(torch.stack(got.step_nll, 1), torch.stack(base.step_nll, 1))


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
