"""Paulus et al. (2018)'s parts against brute-force formulas, and its state through beam search."""

from __future__ import annotations

import torch
from scg_summarize.data import SourceBatch
from scg_summarize.decode_options import DecodeOptions
from scg_summarize.decoding.adapters import ModelStepDecoder
from scg_summarize.decoding.beam import beam_search
from scg_summarize.models.paulus.model import IntraDecoderAttention, TemporalAttention
from scg_summarize.models.registry import build_model

from .test_models_zoo import batch, paulus_config


def brute_temporal(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """α^e_ti straight from the paper's formula (exp, no log space), float64. scores (T, B, L)."""
    T = scores.shape[0]
    out = []
    e = scores.double().exp()
    for t in range(T):
        prime = e[t] if t == 0 else e[t] / e[:t].sum(0)  # (B, L)
        prime = prime * mask
        out.append(prime / prime.sum(1, keepdim=True))
    return torch.stack(out)


def test_intra_temporal_attention_matches_the_formula_and_does_not_overflow() -> None:
    torch.manual_seed(0)
    B, L, H, T = 3, 7, 5, 6
    att = TemporalAttention(H, H, temporal=True).double()
    words = torch.randn(B, L, H, dtype=torch.double)
    mask = torch.ones(B, L, dtype=torch.bool)
    mask[1, 4:] = False
    hs = torch.randn(T, B, H, dtype=torch.double)
    log_sum = None
    alphas, contexts, scores = [], [], []
    for t in range(T):
        alpha, ctx, log_sum = att(words, mask, hs[t], log_sum)
        alphas.append(alpha)
        contexts.append(ctx)
        scores.append(torch.einsum("blh,bh->bl", words, att.w_attn(hs[t])))
    expected = brute_temporal(torch.stack(scores), mask)
    assert torch.allclose(torch.stack(alphas), expected, atol=1e-12)
    assert torch.allclose(torch.stack(contexts), torch.einsum("tbl,blh->tbh", expected, words), atol=1e-12)
    assert float(torch.stack(alphas).detach()[:, 1, 4:].abs().max()) == 0.0  # padding gets nothing
    # scores in the 1000s: exp overflows in the formula, the log-space version stays a distribution
    big = words * 400.0
    assert not torch.isfinite(brute_temporal(torch.einsum("blh,bh->bl", big, att.w_attn(hs[0] * 10))[None], mask)).all()
    log_sum = None
    for t in range(T):
        alpha, _, log_sum = att(big, mask, hs[t] * 10, log_sum)
        assert torch.isfinite(alpha).all() and torch.allclose(alpha.sum(1), torch.ones(B, dtype=torch.double))


def test_plain_bilinear_attention_is_a_softmax() -> None:
    torch.manual_seed(1)
    att = TemporalAttention(4, 6, temporal=False).double()
    words, h = torch.randn(2, 5, 6, dtype=torch.double), torch.randn(2, 4, dtype=torch.double)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    alpha, ctx, state = att(words, mask, h, None)
    e = torch.stack([torch.stack([h[b] @ att.w_attn.weight.T @ words[b, i] for i in range(5)]) for b in range(2)])
    expected = torch.where(mask, e, torch.tensor(float("-inf"), dtype=torch.double)).softmax(1)
    assert state is None and torch.allclose(alpha, expected, atol=1e-12)
    assert torch.allclose(ctx, torch.einsum("bl,blh->bh", expected, words), atol=1e-12)


def test_intra_decoder_attention_matches_a_loop_and_starts_at_zero() -> None:
    torch.manual_seed(2)
    att = IntraDecoderAttention(4).double()
    h = torch.randn(3, 4, dtype=torch.double)
    assert torch.equal(att(None, h), torch.zeros_like(h))  # c^d_1 = 0
    assert torch.equal(att(h.new_zeros(3, 0, 4), h), torch.zeros_like(h))
    past = torch.randn(3, 5, 4, dtype=torch.double)
    got = att(past, h)
    for b in range(3):
        e = torch.stack([h[b] @ att.w_attn.weight.T @ past[b, j] for j in range(5)])
        assert torch.allclose(got[b], (e.softmax(0).unsqueeze(1) * past[b]).sum(0), atol=1e-12)


def _score(model: torch.nn.Module, b: dict[str, torch.Tensor], example: int, tokens: list[int]) -> float:
    """log p(tokens, </s> | example) by teacher forcing one example alone (corpus ids)."""
    decoder = ModelStepDecoder(model)
    one = slice(example, example + 1)
    state = decoder.init_state(SourceBatch(src=b.src[one], src_mask=b.src_mask[one]))
    prev, total = 2, 0.0
    for word in [*tokens, 3]:
        log_probs, state, _ = decoder.step(state, torch.tensor([prev]))
        total += float(log_probs[0, word])
        prev = word
    return total


def test_temporal_state_survives_beam_reordering() -> None:
    """Every beam hypothesis's score equals its log-probability recomputed alone, which holds only
    if the intra-temporal sums and the past decoder states followed their hypotheses through the
    beam's reorderings (a shuffled state gives other numbers)."""
    torch.manual_seed(3)
    model = build_model(paulus_config()).eval()
    with torch.no_grad():  # peaked attentions: the temporal penalty changes the distributions a lot
        model.decoder.attention.w_attn.weight.mul_(8.0)
        model.generator.switch.bias.fill_(1.0)
    b = batch(B=3, T=4, seed=5)
    options = DecodeOptions(beam_size=4, max_len=6, n_best=4, length_penalty=0.0)
    found = beam_search(ModelStepDecoder(model), b, options)
    checked = 0
    for example, hyps in enumerate(found):
        for hyp in hyps:
            assert abs(hyp.log_prob - _score(model, b, example, hyp.tokens)) < 1e-4 * (1 + abs(hyp.log_prob))
            checked += 1
    assert checked >= 6
