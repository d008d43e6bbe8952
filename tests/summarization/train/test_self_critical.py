"""Self-critical RL on scg: the surrogate's gradient is unbiased (against exact enumeration with
``scg.testing`` of E[−r], written without the objective's code) for the Paulus family and for
C2F + self-critical (chunk and word nodes), and the test catches the biased estimator of a
program whose baseline depends on the sampled draws (a "greedy" baseline computed from the
sampled summary itself). Also: the reward on ids and the objective's reported terms."""

from __future__ import annotations

import warnings

import pytest
import torch
from scg_summarize.data import Batch
from scg_summarize.models import C2FConfig, PaulusConfig
from scg_summarize.models.registry import build_model
from scg_summarize.train.reward import lcs_length, reference_ids, rouge_f1, rouge_l_f1, rouge_n_f1
from scg_summarize.train.self_critical import greedy_rewards, sampled_program, self_critical_objective

import scg
import scg.testing

V = 6  # <pad> <unk> <s> </s> and two words: 6 outcomes per draw


def tiny_batch(M: int = 1) -> Batch:
    src = torch.tensor([[[4, 5, 4]] * M])
    tgt = torch.tensor([[2, 5, 4, 3]])
    return Batch(src=src, src_mask=src != 0, tgt=tgt, tgt_mask=torch.ones_like(tgt, dtype=torch.bool))


def tiny_model(family: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if family == "paulus":
        config = PaulusConfig(vocab_size=V, emb_dim=3, hidden=4, enc_layers=1, dropout=0.0, init_range=0.5)
    else:  # C2F: a chunk node and a word node per step
        config = C2FConfig(
            vocab_size=V,
            attention="c2f",
            num_chunks=2,
            emb_dim=3,
            hidden=4,
            enc_layers=1,
            dec_layers=1,
            conv_filters=3,
            conv_width=2,
            dropout=0.0,
            init_range=0.5,
        )
    return build_model(config).double()


def _program(model: torch.nn.Module, batch: Batch):
    refs = reference_ids(batch.tgt, batch.tgt_mask)
    greedy_cost = -greedy_rewards(model, batch, refs, max_len=2)

    def program() -> None:
        sampled_program(model, batch, refs, greedy_cost, max_len=2)

    return program


def _reward_program(model: torch.nn.Module, batch: Batch):
    """E[−r] written here, without the objective's code (no baseline): the reference the estimates
    of ``sampled_program`` are compared with, so a sign error there does not cancel."""
    refs = reference_ids(batch.tgt, batch.tgt_mask)

    def program() -> None:
        sampled = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, task="rollout", max_len=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", scg.InfluenceLostWarning)
            reward = rouge_f1(sampled.sequences(), refs).to(torch.double)
        scg.cost(scg.influenced_by(-reward, *sampled.draws))

    return program


def _biased_program(model: torch.nn.Module, batch: Batch):
    """The bug of scoring the "greedy" baseline on the sampled summary: b = −0.5 r(yˢ) depends on
    the draws (computed in Python, so scg cannot see it), E[∇] is half the true gradient."""
    refs = reference_ids(batch.tgt, batch.tgt_mask)

    def program() -> None:
        sampled = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, task="rollout", max_len=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", scg.InfluenceLostWarning)
            reward = rouge_f1(sampled.sequences(), refs).to(torch.double)
        scg.cost(scg.influenced_by(-reward, *sampled.draws), baseline=scg.baselines.SelfCritical(-0.5 * reward))

    return program


def _params(model: torch.nn.Module) -> list[torch.Tensor]:
    # the output side and the attention (every draw's distribution depends on them)
    return [p for n, p in model.named_parameters() if n.startswith(("generator", "decoder"))]


@pytest.mark.parametrize("family", ["paulus", "c2f"])
def test_self_critical_gradient_is_unbiased(family: str) -> None:
    model = tiny_model(family)
    batch = tiny_batch(M=2 if family == "c2f" else 1)
    program = _program(model, batch)
    params = _params(model)
    grads = scg.testing.exact_gradient(_reward_program(model, batch), params)
    exact = torch.cat([g.reshape(-1) for g in grads])
    assert float(exact.abs().max()) > 1e-3  # the reward depends on the parameters: not a vacuous test
    # float64 throughout: coordinates whose estimates barely vary are compared at 1e-10, not 1e-6
    # n=200: the sample size at which test_the_gradient_test_catches_a_baseline_that_depends_on_the_sample
    # shows the check catching a biased twin (issue 28: the default suite within 90 s of CPU)
    report = scg.testing.check_unbiased(program, params, n=200, seed=1, atol=1e-10, exact=grads)
    assert report.passed, str(report)


def test_the_gradient_test_catches_a_baseline_that_depends_on_the_sample() -> None:
    model = tiny_model("paulus")
    program = _biased_program(model, tiny_batch())
    report = scg.testing.check_unbiased(program, _params(model), n=200, seed=1, atol=1e-10)
    assert not report.passed


def test_the_objective_reports_rewards_and_its_graph_has_both_kinds_of_node() -> None:
    model = tiny_model("c2f")
    batch = tiny_batch(M=2)
    result = self_critical_objective(model, batch, 1.0, max_len=3)
    assert set(result.terms) >= {"reward", "greedy_reward", "sample_len"}
    names = {node.name for node in result.graph.stochastic_nodes}
    assert names == {"coarse", "token"}
    result.loss.backward()
    assert all(p.grad is not None for p in _params(model))


def test_rouge_on_ids() -> None:
    assert lcs_length([1, 2, 3, 4], [2, 4, 3]) == 2
    assert rouge_l_f1([1, 2, 3], [1, 2, 3]) == 1.0 and rouge_l_f1([], [1]) == 0.0
    assert rouge_l_f1([1, 9], [1, 2, 3]) == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    assert rouge_n_f1([1, 2, 1, 2], [1, 2, 3], 2) == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))
    assert rouge_f1([[1, 2]], [[1, 2]], "rouge1").tolist() == [1.0]
    with pytest.raises(ValueError, match="unknown ROUGE metric"):
        rouge_f1([[1]], [[1]], "bleu")
    tgt = torch.tensor([[2, 7, 8, 3, 0], [2, 9, 3, 0, 0]])
    assert reference_ids(tgt, tgt != 0) == [[7, 8], [9]]
