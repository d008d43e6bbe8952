"""The C2F and self-critical objectives declare their graphs' structure (``c2f_structure``: the causal
rule, or ``same_step`` without input feeding; ``scg.Declared()`` for self-critical) instead of
tracking it: the declaration must credit every (draw, cost) pair as tracking does.

``scg.testing.check_structure`` compares the two on the objective's own graph body
(``c2f_program``) for each C2F option that changes the sampled graph: one to three draws per step
(+MULTI2/3), ±POS, BOW chunks, +COPY, no input feeding, targets of different lengths (padded
steps), on the PyTorch reference and (one case) on the Triton kernels under the interpreter. It
reports a declaration that credits less than tracking (a biased one), as the twin shows, and the
surrogates of the two graphs have the same gradient. The trainer's registered objectives
(``c2f_reinforce`` with and without +ALTERNATE, ``self_critical``, ``mixed``) are run as a trainer runs
them and their graphs' credit compared with a tracked twin of the same draws. On a tiny instance the
declared estimator's mean (γ = 1, λ = 1) is the exact gradient, and the same-step twin's is not. The
self-critical program (word draws, C2F's chunk draws, one terminal reward declared with
``scg.influenced_by(per_element=True)``) is checked on two rows of different documents, for every
family it trains (Paulus, C2F ±MULTI2 +COPY, STANDARD+COPY, ABS, MAL).

(Before ``c2f_structure``, a C2F model without input feeding was declared with the causal rule too:
each draw credited with the later steps' costs, which it does not influence: unbiased, with a higher
variance than tracking.)
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from scg_summarize.kernels import forced
from scg_summarize.models import C2FSummarizer
from scg_summarize.models.registry import build_model
from scg_summarize.train.config_loading import load_config
from scg_summarize.train.objective import OBJECTIVES, c2f_objective, c2f_program, c2f_structure, same_step
from scg_summarize.train.reward import reference_ids
from scg_summarize.train.self_critical import greedy_rewards, sampled_program

import scg
import scg.testing

from ..models_helpers import make_batch, make_model, tiny_c2f_config
from .test_self_critical import V, tiny_batch, tiny_model

#: the C2F options that change the sampled graph (the others act before the first draw)
OPTIONS: dict[str, dict[str, Any]] = {
    "k1": {"multi": 1},
    "MULTI2": {"multi": 2},
    "MULTI3": {"multi": 3},
    "POS+MULTI2": {"multi": 2, "pos": True},
    "BOW": {"chunk_encoder": "bow"},
    "COPY+MULTI2": {"multi": 2, "copy": True},
    "no-input-feed": {"input_feed": False},
    "no-input-feed+MULTI2+COPY": {"input_feed": False, "multi": 2, "copy": True},
}


def _model(multi: int = 1, seed: int = 0, **options: Any) -> C2FSummarizer:
    return make_model("c2f", seed=seed, multi=multi, **options)


def _program(model: C2FSummarizer, seed: int = 0) -> Any:
    batch = make_batch(B=3, T=6, seed=seed)  # targets of 6, 4 and 3 tokens: padded steps
    baseline = scg.baselines.EMA(0.1, init=0.5)
    return lambda: c2f_program(model, batch, baseline)


@pytest.mark.parametrize("options", list(OPTIONS.values()), ids=list(OPTIONS))
def test_the_declared_structure_is_what_tracking_finds(options: dict[str, Any]) -> None:
    model = _model(**options)
    with forced("reference"):
        scg.testing.check_structure(_program(model), c2f_structure(model), runs=2)


def test_without_input_feeding_the_causal_rule_credits_more_than_tracking() -> None:
    # what c2f_structure replaced: unbiased (exact=False passes), but the later steps' costs
    # were added to each draw's score as noise
    model = _model(input_feed=False)
    with forced("reference"):
        scg.testing.check_structure(_program(model), scg.Declared(), exact=False)
        with pytest.raises(AssertionError, match="higher variance"):
            scg.testing.check_structure(_program(model), scg.Declared())


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")
@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the Triton kernels on CPU tensors")
def test_the_declared_structure_holds_on_the_kernels() -> None:
    # the draws are KernelDraws nodes and the context comes from the custom ops (declared row-wise)
    with forced("triton"):
        scg.testing.check_structure(_program(_model(2)), scg.Declared())


def test_a_declaration_that_credits_less_is_reported_as_biased() -> None:
    with forced("reference"), pytest.raises(AssertionError, match="BIASED"):
        scg.testing.check_structure(_program(_model(1)), scg.Declared(influences=same_step))


def test_the_declared_and_tracked_surrogates_have_one_gradient() -> None:
    model = make_model("c2f", seed=1, multi=2).double()
    batch = make_batch(B=3, T=6, seed=1)
    params = [p for p in model.parameters() if p.requires_grad]

    def grads(loss: torch.Tensor) -> torch.Tensor:
        return torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)])

    with forced("reference"):
        torch.manual_seed(5)
        declared = c2f_objective(model, batch, 3.0, scg.baselines.EMA(0.1, init=0.5), 0.5, 0.3).loss
        torch.manual_seed(5)
        with scg.Graph() as tracked:  # the same draws, tracked
            c2f_program(model, batch, scg.baselines.EMA(0.1, init=0.5))
        by_tracking = tracked.surrogate_loss(discount=0.5, score_scale=0.3) / 3.0
    want = grads(by_tracking)
    torch.testing.assert_close(grads(declared), want, rtol=1e-12, atol=1e-12)
    assert float(want.abs().max()) > 0


# --------------------------------------------------------------------- the trainer's objectives
def _trainer(model: C2FSummarizer, alternate: float = 0.0) -> Any:
    train = SimpleNamespace(discount=0.5, reward_scale=0.3, rl_weight=0.5, rollout_len=3, reward="rougeL")
    return SimpleNamespace(
        net=model,
        model=model,
        baseline=scg.baselines.EMA(0.1, init=0.5),
        config=SimpleNamespace(train=train),
        _soft_minibatch=lambda: alternate >= 1.0,  # +ALTERNATE's coin, fixed: soft at 1, else sampled
    )


def _tracked_twin(objective: str, model: C2FSummarizer, batch: Any, seed: int) -> scg.Graph:
    """The graph ``objective``'s step builds, with the same draws (seed), tracked."""
    torch.manual_seed(seed)
    if objective == "mixed":  # its ML term (the C2F surrogate) draws first
        with scg.Graph(structure=scg.Declared()):
            c2f_program(model, batch, scg.baselines.EMA(0.1, init=0.5))
    if objective in ("mixed", "self_critical"):
        refs = reference_ids(batch.tgt, batch.tgt_mask)
        greedy_cost = -greedy_rewards(model, batch, refs, max_len=3)
        with scg.Graph() as tracked:
            sampled_program(model, batch, refs, greedy_cost, max_len=3)
    else:
        with scg.Graph() as tracked:
            c2f_program(model, batch, scg.baselines.EMA(0.1, init=0.5))
    tracked.surrogate_loss()
    return tracked


@pytest.mark.parametrize("input_feed", [True, False])
@pytest.mark.parametrize("objective", ["c2f_reinforce", "self_critical", "mixed"])
def test_each_training_step_is_credited_as_tracking_credits_it(objective: str, input_feed: bool) -> None:
    """The trainer's objective (``OBJECTIVES[name](trainer)``, its structure made once and reused)
    over batches of two shapes: the credit of the graph it builds (mixed: its RL graph) is the
    tracked twin's, pair for pair. +ALTERNATE's sampled minibatches are these; its soft ones build
    no graph."""
    model = _model(multi=2, input_feed=input_feed)
    run = OBJECTIVES[objective](_trainer(model, alternate=0.5))
    with forced("reference"):
        for seed, (B, T) in enumerate([(3, 6), (2, 4), (3, 6)]):
            batch = make_batch(B=B, T=T, seed=seed)
            torch.manual_seed(seed)
            graph = run(batch, float(B)).graph
            tracked = _tracked_twin(objective, model, batch, seed)
            assert [n.describe() for n in graph.nodes] == [n.describe() for n in tracked.nodes]
            assert graph.credit_pairs == tracked.credit_pairs, (objective, seed)


def test_an_alternate_soft_minibatch_builds_no_graph() -> None:
    model = _model(multi=2)
    result = OBJECTIVES["c2f_reinforce"](_trainer(model, alternate=1.0))(make_batch(B=3, T=6), 3.0)
    assert result.graph is None and result.soft


# ------------------------------------------------------------------ the estimator's mean, exactly
def _tiny_c2f_program(input_feed: bool) -> tuple[Any, C2FSummarizer]:
    """Two examples of two real chunks, two real steps each: 2^4 joint draws."""
    torch.manual_seed(3)
    model = C2FSummarizer(replace(tiny_c2f_config(8, 3, 4), input_feed=input_feed)).double()
    src = torch.tensor([[[4, 5, 6], [7, 4, 0]], [[5, 5, 0], [6, 7, 4]]])
    tgt = torch.tensor([[2, 7, 3], [2, 6, 3]])
    batch = replace(make_batch(B=2, M=2, N=3, T=3), src=src, src_mask=src != 0, tgt=tgt, tgt_mask=tgt != 0)

    def program() -> None:
        with forced("reference"):
            c2f_program(model, batch, scg.baselines.EMA(0.1, init=0.5))  # b = 0.5 in every run

    return program, model


@pytest.mark.parametrize("input_feed", [True, False])
def test_the_declared_estimator_has_the_exact_gradient_as_its_mean(input_feed: bool) -> None:
    """E[∇ surrogate] under ``c2f_structure`` (γ = 1, λ = 1: Algorithm 1 itself) is ∇E[Σ_t c_t]; with
    input feeding the same-step declaration's mean is not (it drops the draws' later costs)."""
    program, model = _tiny_c2f_program(input_feed)
    params = [p for p in model.parameters() if p.requires_grad]

    def mean(structure: scg.Declared, **surrogate: float) -> torch.Tensor:
        got = scg.testing.expected_estimate(
            program, params, graph_kwargs={"structure": structure}, surrogate_kwargs=surrogate
        )
        return torch.cat([g.flatten() for g in got])

    exact = torch.cat([g.flatten() for g in scg.testing.exact_gradient(program, params)])
    structure = c2f_structure(model)
    torch.testing.assert_close(mean(structure, discount=1.0, score_scale=1.0), exact, rtol=1e-9, atol=1e-12)
    score = float((mean(structure, discount=1.0, score_scale=0.0) - exact).abs().max())
    assert score > 1e-5  # the draws' score terms are part of it: not a vacuous check
    if input_feed:
        same = float((mean(scg.Declared(influences=same_step), discount=1.0, score_scale=1.0) - exact).abs().max())
        assert same > 1e-8  # biased: caught at rtol 1e-9


FAMILIES = ["paulus", "c2f", "tiny-C2F+MULTI2+COPY", "tiny-STANDARD+COPY", "ABS", "MAL"]


def _family_model(family: str) -> torch.nn.Module:
    if family in ("paulus", "c2f"):
        return tiny_model(family)
    torch.manual_seed(0)
    small = [] if family.startswith("tiny-") else ["model.emb_dim=4", "model.hidden=4"]
    model = build_model(load_config(family, [f"model.vocab_size={V}", *small]).model).double()
    if hasattr(model, "content"):  # MAL: which words are content words
        model.content[4::2] = True
    return model


@pytest.mark.parametrize("family", FAMILIES)
def test_the_self_critical_declaration_is_what_tracking_finds(family: str) -> None:
    model = _family_model(family)
    batch = tiny_batch(M=2, rows=2)
    batch.src[1, 0, 0] = 5  # two different documents: the rows' rewards differ
    refs = reference_ids(batch.tgt, batch.tgt_mask)
    with forced("reference"):
        greedy_cost = -greedy_rewards(model, batch, refs, max_len=3)
        program = lambda: sampled_program(model, batch, refs, greedy_cost, max_len=3)  # noqa: E731
        scg.testing.check_structure(program, scg.Declared(), runs=3)
