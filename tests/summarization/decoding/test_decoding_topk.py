"""Beam search through the decoders' top-k step gives the same hypotheses as through the full step;
C2F decoding indexes the encoder states per hypothesis instead of copying them."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
import torch
from scg_summarize.data import SourceBatch
from scg_summarize.decoding import DecodeOptions, SpecialIds, apply_constraints, beam_search
from scg_summarize.decoding.adapters import ModelStepDecoder
from scg_summarize.decoding.beam import use_topk_step
from scg_summarize.decoding.blocking import banned_count_bound, constrain_candidates

from ..eval_support import UNCONSTRAINED
from ..kernel_support import backend, builtins_scanned_once, one_thread  # noqa: F401  (one_thread: a fixture)
from ..models_helpers import make_batch, make_model
from ..toy_decoders import PrefixTableDecoder, ToyCoarseToFine

pytestmark = pytest.mark.usefixtures("one_thread", "builtins_scanned_once")
HAS_TRITON = importlib.util.find_spec("triton") is not None

#: Plain options, and every constraint at once (min length, <unk> banned, bigram blocking, 2-best).
OPTIONS = [
    DecodeOptions(beam_size=3, max_len=8, **UNCONSTRAINED),
    DecodeOptions(beam_size=4, max_len=10, min_len=3, no_repeat_ngram=2, unk="forbid", n_best=2),
]


def summary(hyps: list[list[Any]]) -> list[list[tuple[list[int], float, float]]]:
    return [[(h.tokens, h.log_prob, h.score) for h in example] for example in hyps]


class Counting:
    """A decoder wrapper that counts ``step`` and ``step_topk`` calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = {"step": 0, "step_topk": 0}
        self.vocab_size = inner.vocab_size
        self.fused_topk = False

    def init_state(self, batch: SourceBatch) -> Any:
        return self.inner.init_state(batch)

    def step(self, state: Any, prev: torch.Tensor) -> Any:
        self.calls["step"] += 1
        return self.inner.step(state, prev)

    def step_topk(self, state: Any, prev: torch.Tensor, k: int) -> Any:
        self.calls["step_topk"] += 1
        return self.inner.step_topk(state, prev, k)

    def reorder(self, state: Any, indices: torch.Tensor) -> Any:
        return self.inner.reorder(state, indices)


def tiny_model(attention: str, eos_bias: float = 2.0, copy: bool = False) -> Any:
    """A random model whose distributions vary with the input (init_range 1) and end early enough."""
    options: dict[str, Any] = {"multi": 2, "test_k": 2} if attention == "c2f" else {}
    if copy:
        options["copy"] = True
    model = make_model(attention, init_range=1.0, **options)
    with torch.no_grad():  # make </s> likely enough that hypotheses end at different lengths
        model.generator.proj.bias[SpecialIds().eos] += eos_bias
    return model.eval()


@pytest.mark.parametrize("attention", ["c2f", "hier", "standard"])
@pytest.mark.parametrize("options", OPTIONS)
def test_topk_step_gives_the_same_beams_on_the_model(attention: str, options: DecodeOptions) -> None:
    batch = make_batch(B=3, M=4, N=6, T=5)
    decoder = Counting(ModelStepDecoder(tiny_model(attention)))
    full = beam_search(decoder, batch, options, topk=False)
    assert decoder.calls["step_topk"] == 0
    fused = beam_search(decoder, batch, options, topk=True)
    assert decoder.calls["step_topk"] > 0  # the top-k step ran (the full one only at max_len)
    assert summary(fused) == summary(full)  # tokens and scores, bit for bit on the CPU reference
    assert any(len(h.tokens) < options.max_len for example in full for h in example)  # </s> from the top k


@pytest.mark.parametrize("options", OPTIONS)
def test_topk_step_gives_the_same_beams_on_the_toy_decoder(options: DecodeOptions) -> None:
    batch = make_batch(B=3, M=4, N=6, T=5)
    toy = Counting(ToyCoarseToFine(40, coarse_topk=2, seed=3))
    full = beam_search(toy, batch, options, topk=False)
    fused = beam_search(toy, batch, options, topk=True)
    assert toy.calls["step_topk"] > 0
    assert summary(fused) == summary(full)


def test_a_row_without_allowed_candidates_falls_back_to_the_full_step() -> None:
    # Only </s>, <unk> (banned) and two words have mass; after 5 words bigram blocking and min_len ban every
    # finite word, so
    # apply_constraints' </s> fallback applies -- the top-k step must notice and run the full step.
    class Sparse(PrefixTableDecoder):
        def log_probs(self, example: int, prefix: tuple[int, ...]) -> torch.Tensor:
            out = super().log_probs(example, prefix).double()
            out[torch.arange(self.vocab_size) > 5] = -torch.inf
            return torch.log_softmax(out, 0).float()

    options = DecodeOptions(beam_size=2, max_len=9, min_len=8, no_repeat_ngram=2, length_penalty=0.0, unk="forbid")
    batch = SourceBatch(src=torch.zeros(2, 1, 1, dtype=torch.long), src_mask=torch.ones(2, 1, 1, dtype=torch.bool))
    decoder = Counting(Sparse(40, seed=1))
    full = beam_search(decoder, batch, options, topk=False)
    calls = dict(decoder.calls)
    fused = beam_search(decoder, batch, options, topk=True)
    assert summary(fused) == summary(full)
    assert decoder.calls["step_topk"] > 0 and decoder.calls["step"] > calls["step"]  # the fallback ran
    assert all(len(h.tokens) < options.min_len for example in full for h in example)  # </s> was forced


@pytest.mark.parametrize("seed", range(4))
def test_constrained_candidates_are_the_best_allowed_words(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    rows, vocab, t = 6, 30, 7
    log_probs = torch.log_softmax(torch.randn(rows, vocab, generator=gen) * 3, dim=1)
    history = torch.randint(4, 9, (rows, t), generator=gen)  # few distinct words: many repeated bigrams
    options = DecodeOptions(beam_size=2, max_len=20, min_len=t + 1, no_repeat_ngram=2, unk="forbid")
    special = SpecialIds()
    dense = apply_constraints(log_probs, history, options, special)
    width = 2 * options.beam_size + banned_count_bound(history, options, special)
    top = log_probs.topk(width, dim=1)
    sparse = constrain_candidates(top.values, top.indices, history, options, special)
    allowed = sparse.isfinite().sum(1)
    assert bool((allowed >= 2 * options.beam_size).all())  # the bound leaves enough words
    best = dense.topk(2 * options.beam_size, dim=1)
    for r in range(rows):
        mine = sparse[r].isfinite()
        assert set(top.indices[r][mine].tolist()) >= set(best.indices[r].tolist())
        torch.testing.assert_close(sparse[r][mine], dense[r, top.indices[r][mine]], rtol=0, atol=0)


def test_c2f_hypotheses_index_the_encoder_states() -> None:
    model = tiny_model("c2f")
    decoder = ModelStepDecoder(model)
    assert decoder.index_rows
    batch = make_batch(B=2, M=4, N=6, T=5)
    state = decoder.init_state(batch)
    state = decoder.reorder(state, torch.tensor([0, 0, 1, 1, 1]))
    assert state.memory.rows is not None
    assert state.memory.words is state.base.words  # the (B, M, N, H) states are shared, not copied
    decoder.request_extras(["*"])
    log_probs, _, extras = decoder.step(state, torch.full((5,), SpecialIds().bos))
    copied = ModelStepDecoder(model)
    copied.index_rows = False
    copied.request_extras(["*"])
    plain = copied.reorder(copied.init_state(batch), torch.tensor([0, 0, 1, 1, 1]))
    assert plain.memory.rows is None
    want, _, want_extras = copied.step(plain, torch.full((5,), SpecialIds().bos))
    assert torch.equal(log_probs, want)
    assert extras.keys() == want_extras.keys() and all(torch.equal(extras[k], want_extras[k]) for k in extras)


def test_copying_generators_get_the_full_distribution() -> None:
    model = tiny_model("c2f", copy=True)
    decoder = ModelStepDecoder(model)
    assert not decoder.index_rows and not decoder.fused_topk  # a copy reads the source ids per row
    batch = make_batch(B=2, M=4, N=6, T=5)
    options = OPTIONS[1]
    assert summary(beam_search(decoder, batch, options, topk=True)) == summary(
        beam_search(decoder, batch, options, topk=False)
    )


def test_the_default_follows_the_decoders_fused_flag() -> None:
    assert not use_topk_step(PrefixTableDecoder(10), None)  # offers it, but not fused
    assert use_topk_step(PrefixTableDecoder(10), True)

    class Fused(PrefixTableDecoder):
        fused_topk = True

    assert use_topk_step(Fused(10), None) and not use_topk_step(Fused(10), False)
    with backend("reference"):
        assert not ModelStepDecoder(tiny_model("c2f")).fused_topk  # CPU: the full step stays the default


@pytest.mark.skipif(not HAS_TRITON, reason="no triton")
def test_triton_beam_step_matches_the_reference() -> None:
    # SCG_KERNELS=triton on CPU tensors: the C2F attention and the fused top-k run in Triton's interpreter.
    from scg_summarize.kernels import ops, topk_op

    # one example (the interpreter runs a program per row): its two beams are rows of every kernel
    batch = make_batch(B=1, M=4, N=6, T=5)
    # a top-k step (coarse, fine and top-k kernels, two launches each: ~0.1 s of CPU a launch in the
    # interpreter), then the full step at max_len on the reordered beams (the coarse and fine kernels read
    # the encoder row through each beam's row index); both beams compared (the constraints on the top-k
    # step: test_math_beam.py)
    options = DecodeOptions(beam_size=2, max_len=1, n_best=2, no_repeat_ngram=0, min_len=0, unk="allow")
    model = tiny_model("c2f")
    with backend("reference"):
        want = beam_search(ModelStepDecoder(model), batch, options, topk=False)
    used: list[str] = []
    real = ops.triton_module

    def spy(name: str) -> Any:
        used.append(name)
        return real(name)  # type: ignore[arg-type]

    ops.triton_module = spy  # type: ignore[assignment]
    topk_op.triton_module = spy  # type: ignore[assignment]
    try:
        with backend("triton"):
            decoder = ModelStepDecoder(model)
            assert decoder.fused_topk
            got = beam_search(decoder, batch, options)
    finally:
        ops.triton_module = real
        topk_op.triton_module = real
    assert {"coarse", "fine", "topk"} <= set(used)
    assert [[h.tokens for h in ex] for ex in got] == [[h.tokens for h in ex] for ex in want]
    for ex_got, ex_want in zip(got, want):
        for a, b in zip(ex_got, ex_want):
            assert abs(a.log_prob - b.log_prob) < 1e-4
