"""The C2F and self-critical objectives declare their graphs' structure (``scg.Declared()``, the causal
rule) instead of tracking it: the declaration must credit every (draw, cost) pair as tracking does.

``scg.testing.check_structure`` compares the two on the objective's own graph body
(``c2f_program``): one draw per step and two (+MULTI2), targets of different lengths (padded steps),
on the PyTorch reference and (one case) on the Triton kernels under the interpreter. It reports a
declaration that credits less than tracking (a biased one), as the twin at the end shows, and the
surrogates of the two graphs have the same gradient. The self-critical program (word draws, C2F's
chunk draws, one terminal reward declared with ``scg.influenced_by(per_element=True)``) is checked on
two rows of different documents, for both families it trains.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest
import torch
from scg_summarize.kernels import forced
from scg_summarize.train.objective import c2f_objective, c2f_program
from scg_summarize.train.reward import reference_ids
from scg_summarize.train.self_critical import greedy_rewards, sampled_program

import scg

from ..models_helpers import make_batch, make_model
from .test_self_critical import tiny_batch, tiny_model


def _program(multi: int, seed: int = 0) -> Any:
    model = make_model("c2f", seed=seed, multi=multi)
    batch = make_batch(B=3, T=6, seed=seed)  # targets of 6, 4 and 3 tokens: padded steps
    baseline = scg.baselines.EMA(0.1, init=0.5)
    return lambda: c2f_program(model, batch, baseline)


@pytest.mark.parametrize("multi", [1, 2])
def test_the_declared_structure_is_what_tracking_finds(multi: int) -> None:
    with forced("reference"):
        scg.testing.check_structure(_program(multi), scg.Declared(), runs=2)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")
@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the Triton kernels on CPU tensors")
def test_the_declared_structure_holds_on_the_kernels() -> None:
    # the draws are KernelDraws nodes and the context comes from the custom ops (declared row-wise)
    with forced("triton"):
        scg.testing.check_structure(_program(2), scg.Declared())


def test_a_declaration_that_credits_less_is_reported_as_biased() -> None:
    same_step_only = scg.Declared(influences=lambda v, node: v.step == node.step)
    with forced("reference"), pytest.raises(AssertionError, match="BIASED"):
        scg.testing.check_structure(_program(1), same_step_only)


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


@pytest.mark.parametrize("family", ["paulus", "c2f"])
def test_the_self_critical_declaration_is_what_tracking_finds(family: str) -> None:
    model = tiny_model(family)
    batch = tiny_batch(M=2, rows=2)
    batch.src[1, 0, 0] = 5  # two different documents: the rows' rewards differ
    refs = reference_ids(batch.tgt, batch.tgt_mask)
    with forced("reference"):
        greedy_cost = -greedy_rewards(model, batch, refs, max_len=3)
        program = lambda: sampled_program(model, batch, refs, greedy_cost, max_len=3)  # noqa: E731
        scg.testing.check_structure(program, scg.Declared(), runs=3)
