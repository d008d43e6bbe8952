"""ABS (Rush et al. 2015): each encoder and the NNLM against a brute-force Python loop."""

from __future__ import annotations

import math

import pytest
import torch
from scg_summarize.data import SourceBatch
from scg_summarize.data.chunking import pack_words
from scg_summarize.decoding import ModelStepDecoder
from scg_summarize.models.abs.config import AbsFamilyConfig
from scg_summarize.models.abs.encoders import AttentionEncoder, BowEncoder, ConvEncoder, NoEncoder
from scg_summarize.models.abs.family import AbsSummarizer
from scg_summarize.models.abs.nnlm import EMBEDDING_STD, AbsModel, context_windows

H, D, C, VX, VY = 6, 4, 3, 17, 13


def _inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    gen = torch.Generator().manual_seed(seed)
    lengths = [9, 4, 1, 12]
    m = max(lengths)
    src = torch.zeros(len(lengths), m, dtype=torch.long)
    for b, n in enumerate(lengths):
        src[b, :n] = torch.randint(4, VX, (n,), generator=gen)
    return src, src != 0, lengths


def _ctx(rows: int, steps: int, seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(2, VY, (rows, steps, C), generator=gen)


def _nnlm(encoder: str, init_std: float) -> AbsModel:
    """The NNLM with V_x = VX, V_y = VY and its embeddings drawn N(0, ``init_std``²)."""
    config = AbsFamilyConfig(vocab_size=VX, abs_tgt_vocab=VY, abs_encoder=encoder, emb_dim=D, hidden=H, abs_context=C)
    model = AbsModel(config)
    with torch.no_grad():
        for table in model.embeddings():
            table.weight.mul_(init_std / EMBEDDING_STD)
    return model


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_bow_encoder_is_the_mean_input_embedding() -> None:
    torch.manual_seed(0)
    enc = BowEncoder(VX, H)
    src, mask, lengths = _inputs()
    ctx = _ctx(len(lengths), 2)
    out, attn = enc.read(enc.memory(src, mask), torch.arange(len(lengths)), ctx)
    assert attn is None and out.shape == (len(lengths), 2, H)
    for b, n in enumerate(lengths):
        expected = sum(enc.embed.weight[int(src[b, j])] for j in range(n)) / n
        for t in range(2):
            _close(out[b, t], expected)


def _conv_brute(enc: ConvEncoder, words: list[int]) -> torch.Tensor:
    q = enc.window
    x = [enc.embed.weight[w] for w in words]
    for conv in enc.convs:
        y = []
        for i in range(len(x)):
            total = conv.bias.clone()
            for k in range(2 * q + 1):
                j = i + k - q
                if 0 <= j < len(x):
                    total = total + conv.weight[:, :, k] @ x[j]
            y.append(total)
        x = [torch.tanh(torch.maximum(y[i], y[i + 1]) if i + 1 < len(y) else y[i]) for i in range(0, len(y), 2)]
    return torch.stack(x).max(0).values


def test_conv_encoder_matches_a_loop_over_layers_positions_and_taps() -> None:
    torch.manual_seed(1)
    enc = ConvEncoder(VX, H, layers=3, window=2)
    src, mask, lengths = _inputs(2)
    out, _ = enc.read(enc.memory(src, mask), torch.tensor([3, 0, 1, 2, 0]), _ctx(5, 1))
    for r, b in enumerate([3, 0, 1, 2, 0]):
        _close(out[r, 0], _conv_brute(enc, src[b, : lengths[b]].tolist()))


def test_conv_encoder_ignores_trailing_padding() -> None:
    torch.manual_seed(2)
    enc = ConvEncoder(VX, H)
    src, mask, _ = _inputs(3)
    wide = torch.nn.functional.pad(src, (0, 7))
    a = enc.memory(src, mask).tensors["summary"]
    b = enc.memory(wide, wide != 0).tensors["summary"]
    _close(a, b)


def test_attention_encoder_matches_a_loop() -> None:
    torch.manual_seed(3)
    q = 2
    enc = AttentionEncoder(VX, VY, H, D, C, window=q)
    src, mask, lengths = _inputs(4)
    example = torch.tensor([0, 1, 2, 3, 3, 0])
    ctx = _ctx(len(example), 3, seed=5)
    out, attn = enc.read(enc.memory(src, mask), example, ctx)
    assert attn is not None
    F, G, P = enc.embed.weight, enc.context_embed.weight, enc.align.weight
    for r, b in enumerate(example.tolist()):
        n = lengths[b]
        xt = [F[int(src[b, j])] for j in range(n)]
        for t in range(3):
            query = P @ torch.cat([G[int(w)] for w in ctx[r, t]])
            scores = torch.stack([x @ query for x in xt])
            p = torch.softmax(scores, 0)
            xbar = [
                sum((xt[k] for k in range(j - q, j + q + 1) if 0 <= k < n), torch.zeros(H)) / (2 * q + 1)
                for j in range(n)
            ]
            _close(attn[r, t, :n], p)
            assert float(attn[r, t, n:].detach().abs().sum()) == 0.0
            _close(out[r, t], sum(p[j] * xbar[j] for j in range(n)))


def test_no_encoder_is_zero() -> None:
    enc = NoEncoder(H)
    src, mask, _ = _inputs()
    out, attn = enc.read(enc.memory(src, mask), torch.arange(4), _ctx(4, 2))
    assert attn is None and out.shape == (4, 2, H) and float(out.abs().sum()) == 0.0


def test_context_windows_pad_with_bos() -> None:
    tgt = torch.tensor([[2, 7, 8, 9, 3, 0]])
    win = context_windows(tgt, 3, bos=2)
    assert win.shape == (1, 5, 3)
    assert win[0].tolist() == [[2, 2, 2], [2, 2, 7], [2, 7, 8], [7, 8, 9], [8, 9, 3]]


@pytest.mark.parametrize("encoder", ["none", "bow", "conv", "attention"])
def test_nnlm_scores_match_the_formula(encoder: str) -> None:
    torch.manual_seed(4)
    model = _nnlm(encoder, init_std=0.5)
    src, mask, lengths = _inputs(6)
    tgt = torch.tensor([[2, 5, 6, 7, 3], [2, 8, 3, 0, 0], [2, 9, 9, 10, 3], [2, 3, 0, 0, 0]])
    log_probs = model(src, mask, tgt).detach()  # (B, T - 1, V)
    memory = model.encode(src, mask)
    ctx = context_windows(tgt, C, 2)
    enc, _ = model.encoder.read(memory, torch.arange(4), ctx)
    for b in range(4):
        for t in range(tgt.shape[1] - 1):
            y = torch.cat([model.embed.weight[int(w)] for w in ctx[b, t]])
            h = torch.tanh(model.hidden_layer.weight @ y + model.hidden_layer.bias)
            scores = model.out_lm.weight @ h + model.out_lm.bias
            if model.out_enc is not None:
                scores = scores + model.out_enc.weight @ enc[b, t] + model.out_enc.bias
            _close(log_probs[b, t], torch.log_softmax(scores, 0))
    nll, count = model.nll(src, mask, tgt)
    assert count == 4 + 2 + 4 + 1
    expected = -sum(float(log_probs[b, t, tgt[b, t + 1]]) for b in range(4) for t in range(4) if tgt[b, t + 1] != 0)
    assert math.isclose(float(nll.detach()), expected, rel_tol=1e-5)


def test_renormalize_embeddings_caps_row_norms() -> None:
    torch.manual_seed(5)
    model = _nnlm("attention", init_std=1.0)
    changed = model.renormalize_embeddings(0.5)
    assert changed > 0
    for emb in model.embeddings():
        assert float(emb.weight.detach().norm(dim=1).max()) <= 0.5 + 1e-5


def test_the_step_decoder_equals_teacher_forcing_and_maps_attention_to_the_grid() -> None:
    """The family through the one step adapter: the NNLM's teacher-forced distributions over the
    title vocabulary (−inf beyond it), rows following their examples, the attention on the grid."""
    torch.manual_seed(6)
    config = AbsFamilyConfig(
        vocab_size=VX, emb_dim=D, hidden=H, abs_context=C, abs_encoder="attention", abs_tgt_vocab=VY
    )
    family = AbsSummarizer(config)
    grid = torch.tensor([[[5, 6, 0], [7, 9, 0]], [[8, 0, 0], [11, 12, 13]]])
    batch = SourceBatch(src=grid, src_mask=grid != 0)
    words, wmask, _ = pack_words(grid, grid != 0)
    tgt = torch.tensor([[2, 5, 6, 7, 3], [2, 8, 9, 10, 3]])
    expected = family.abs.eval()(words, wmask, tgt)  # (the corpus ids are the model's: prefixes of V)
    dec = ModelStepDecoder(family)
    dec.request_extras(["word_attn"])
    state = dec.init_state(batch)
    state = dec.reorder(state, torch.tensor([1, 0]))  # rows follow their examples
    for t in range(4):
        log_probs, state, extras = dec.step(state, tgt[[1, 0], t])
        _close(log_probs[:, :VY], expected[[1, 0], t])
        assert bool(torch.isneginf(log_probs[:, VY:]).all())  # beyond the title vocabulary
        attn = extras["word_attn"]
        assert attn.shape == (2, 2, 3)
        _close(attn.sum((1, 2)), torch.ones(2))
        assert float(attn[0][grid[1] == 0].sum()) == 0.0 and float(attn[1][grid[0] == 0].sum()) == 0.0
    assert state.dec.window[0].tolist() == [8, 9, 10]
