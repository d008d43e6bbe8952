"""The copying generator (``model.copy``): a normalized mixture that matches a brute-force sum,
survives padding, trains through scg's C2F surrogate, and decodes through the step protocol."""

from __future__ import annotations

import math

import pytest
import torch
from scg_summarize.models import C2FConfig
from scg_summarize.models.common.generator import CopyGenerator, copy_distribution

import scg

from ..models_helpers import V, make_batch, make_model, pad_batch

CASES = [("standard", {}), ("model1", {}), ("hier", {}), ("c2f", {}), ("c2f", {"multi": 2, "test_k": 2})]


def _steps(model, batch, mode):
    """Decoder steps by hand: yields (log p (B, V), attention, memory) for each target step."""
    memory, final = model.encode(batch.src, batch.src_mask)
    state = model.init_state(memory, final)
    y_in = model.tgt_embedding(batch.tgt[:, :-1])
    for t in range(y_in.shape[1]):
        out, state, att = model.decoder.step(state, y_in[:, t], memory, t, mode)
        yield model.step_log_probs(out, att, memory), att, memory, out


@pytest.mark.parametrize(("attention", "options"), CASES)
def test_step_distribution_is_normalized_and_matches_brute_force(attention: str, options: dict) -> None:
    model = make_model(attention, copy=True, **options).eval()
    batch = make_batch(B=3, M=4, N=6)
    gen = model.generator
    assert isinstance(gen, CopyGenerator) and model.copies
    with torch.no_grad():
        for logp, att, memory, out in _steps(model, batch, "greedy"):
            torch.testing.assert_close(logp.exp().sum(1), torch.ones(3, dtype=logp.dtype))
            g = torch.sigmoid(gen.gate_logit(out, att)).squeeze(1)  # (B,)
            p_vocab = torch.softmax(gen.proj(out), dim=1)  # (B, V)
            for b in range(3):  # p(w) = g p_vocab(w) + (1 - g) Σ over read words equal to w of α
                expected = g[b] * p_vocab[b].clone()
                chunks = range(memory.ids.shape[1]) if att.selected is None else att.selected[b].tolist()
                for slot, i in enumerate(chunks):
                    for j in range(memory.ids.shape[2]):
                        w = int(memory.ids[b, i, j])
                        expected[w] += (1 - g[b]) * att.read_weights[b, slot, j]
                torch.testing.assert_close(logp[b].exp(), expected, rtol=1e-5, atol=1e-7)


def test_copy_mass_lands_only_on_read_source_words() -> None:
    model = make_model("c2f", copy=True).eval()
    batch = make_batch(B=2, M=4, N=6)
    with torch.no_grad():
        _, att, memory, _ = next(_steps(model, batch, "greedy"))
        dist = copy_distribution(att, memory, V)  # (B, V)
        torch.testing.assert_close(dist.sum(1), torch.ones(2))
        for b in range(2):
            chunk = int(att.selected[b, 0])
            read_ids = set(memory.ids[b, chunk][memory.word_mask[b, chunk]].tolist())
            assert set(torch.nonzero(dist[b]).flatten().tolist()) <= read_ids


@pytest.mark.parametrize(("attention", "options"), CASES)
def test_teacher_forcing_equals_stepwise_nll_and_ignores_padding(attention: str, options: dict) -> None:
    model = make_model(attention, copy=True, **options).eval()
    batch = make_batch(B=3, M=4, N=6)
    with torch.no_grad():
        out = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="greedy")
        y = batch.tgt[:, 1:]
        for t, (logp, *_) in enumerate(_steps(model, batch, "greedy")):
            expected = -logp.gather(1, y[:, t : t + 1]).squeeze(1) * batch.tgt_mask[:, t + 1]
            torch.testing.assert_close(out.step_nll[t], expected)
        padded = pad_batch(batch, extra_chunks=2, extra_words=3)
        out2 = model(padded.src, padded.src_mask, padded.tgt, padded.tgt_mask, mode="greedy")
        torch.testing.assert_close(torch.stack(out2.step_nll), torch.stack(out.step_nll), rtol=1e-5, atol=1e-6)


def test_copy_lowers_the_nll_of_a_source_word_the_vocabulary_half_never_predicts() -> None:
    model = make_model("standard", copy=True).eval()
    batch = make_batch(B=1, M=2, N=4, T=3)
    word = int(batch.src[0, 0, 0])
    with torch.no_grad():
        model.generator.proj.bias[word] = -50.0  # the softmax half gives `word` ~e^-50
        model.generator.gate.bias.fill_(0.0)
        logp, att, memory, _ = next(_steps(model, batch, "greedy"))
    assert float(logp[0, word]) > -10.0  # copied: (1 - g) α mass, far above e^-50
    assert math.isfinite(float(logp.min()))


def test_c2f_copy_trains_through_the_surrogate_with_finite_gradients() -> None:
    model = make_model("c2f", copy=True, multi=2)
    batch = make_batch(B=3, M=4, N=6)
    torch.manual_seed(3)
    with scg.Graph() as graph:
        out = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="sample")
        for t, nll in enumerate(out.step_nll):
            scg.cost(nll, name="nll", step=t)
    # the draw of step t influences the cost of step t (through the context and the copy half)
    coarse = [n for n in graph.stochastic_nodes if n.name == "coarse"]
    assert coarse and all(
        graph.influences(node, c)
        for node in coarse
        for c in graph.cost_nodes
        if c.step is not None and node.step is not None and c.step == node.step
    )
    graph.surrogate_loss().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert all(torch.isfinite(g).all() for g in grads)
    assert float(model.decoder.attention.w_chunk.weight.grad.abs().sum()) > 0  # score-function term
    assert float(model.generator.gate.weight.grad.abs().sum()) > 0


def test_config_rejects_a_non_boolean_copy() -> None:
    with pytest.raises(ValueError, match=r"model\.copy"):
        C2FConfig(vocab_size=V, copy="yes")  # type: ignore[arg-type]


def test_checkpoints_from_before_generator_modules_still_load() -> None:
    model = make_model("hier")
    state = model.state_dict()
    old = {("generator." + k.split(".")[-1] if k.startswith("generator.proj.") else k): v for k, v in state.items()}
    assert "generator.weight" in old and "generator.proj.weight" not in old
    fresh = make_model("hier", seed=1)
    fresh.load_state_dict(old)
    torch.testing.assert_close(fresh.generator.proj.weight, model.generator.proj.weight)
