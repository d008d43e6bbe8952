"""Self-critical RL on scg: the surrogate's gradient is unbiased (against the exact gradient of
E[−r], written without the objective's code) for the Paulus family and for C2F + self-critical
(chunk and word nodes), and the test catches the biased estimator of a program whose baseline
depends on the sampled draws (a "greedy" baseline computed from the sampled summary itself).
Also: the reward on ids and the objective's reported terms.

The estimates are vectorised through the batch: one run on ``ROWS`` copies of the example gives
the sum of ``ROWS`` independent estimates (each row is credited with its own reward,
``per_element``), so ``GROUPS`` runs give ``GROUPS`` estimates of ``ROWS`` × the exact gradient.
The exact gradient is vectorised the same way: one run whose rows are forced, through the
graph's ``intervene`` hook, along every joint value of the nodes (reward_enumeration.py), checked
against ``scg.testing.exact_gradient``'s enumeration (one run per joint value and prefix: ~100
times the CPU for C2F)."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import pytest
import torch
from scg_summarize.data import Batch
from scg_summarize.models import C2FConfig, PaulusConfig
from scg_summarize.models.registry import build_model
from scg_summarize.train.reward import lcs_length, reference_ids, rouge_f1, rouge_l_f1, rouge_n_f1
from scg_summarize.train.self_critical import greedy_rewards, sampled_program, self_critical_objective

import scg
import scg.testing

from .reward_enumeration import reward_gradient_by_enumeration

V = 6  # <pad> <unk> <s> </s> and two words: 6 outcomes per draw
Program = Callable[[], None]
ROWS, GROUPS = 16, 25  # 400 draws: the twin is caught at |z| = 12.7 (200 one-row runs: 7)


def tiny_batch(M: int = 1, rows: int = 1) -> Batch:
    """One document of ``M`` chunks and its reference, repeated on ``rows`` rows."""
    src = torch.tensor([[[4, 5, 4]] * M] * rows)
    tgt = torch.tensor([[2, 5, 4, 3]] * rows)
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
    the draws (computed in Python, so scg cannot see it), E[∇] is half the true gradient. Otherwise
    as :func:`sampled_program` (each row credited with its own reward)."""
    refs = reference_ids(batch.tgt, batch.tgt_mask)

    def program() -> None:
        sampled = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, task="rollout", max_len=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", scg.InfluenceLostWarning)
            reward = rouge_f1(sampled.sequences(), refs).to(torch.double)
        cost = scg.influenced_by(-reward, *sampled.draws, per_element=True)
        scg.cost(cost, baseline=scg.baselines.SelfCritical(-0.5 * reward))

    return program


def _params(model: torch.nn.Module) -> list[torch.Tensor]:
    # the output side and the attention (every draw's distribution depends on them)
    return [p for n, p in model.named_parameters() if n.startswith(("generator", "decoder"))]


@functools.cache
def _exact(family: str) -> list[torch.Tensor]:
    """∇E[−r] of one row by enumeration in one batched run (`reward_gradient_by_enumeration`)."""
    model = tiny_model(family)
    return reward_gradient_by_enumeration(
        model, functools.partial(tiny_batch, _chunks(family)), _params(model), max_len=2
    )


def _enumerated(family: str) -> list[torch.Tensor]:
    """∇E[−r] of one row by ``scg.testing``'s enumeration (one run per joint value and prefix)."""
    model = tiny_model(family)
    return scg.testing.exact_gradient(_reward_program(model, tiny_batch(M=_chunks(family))), _params(model))


def test_the_batched_enumeration_is_scg_testings_exact_gradient() -> None:
    for got, want in zip(_exact("paulus"), _enumerated("paulus"), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-15)


@pytest.mark.slow  # ~5 s of CPU; the same enumerator is checked on Paulus's word nodes by the test above
def test_the_batched_enumeration_is_scg_testings_exact_gradient_on_c2f() -> None:
    for got, want in zip(_exact("c2f"), _enumerated("c2f"), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-15)


def _chunks(family: str) -> int:
    return 2 if family == "c2f" else 1


def _check(family: str, make_program: Callable[[torch.nn.Module, Batch], Program]) -> scg.testing.UnbiasedReport:
    """``GROUPS`` estimates, each the sum of ``ROWS`` independent ones (one run on ``ROWS`` rows),
    against ``ROWS`` × the exact gradient of one row; float64 throughout: coordinates whose
    estimates barely vary are compared at 1e-10, not 1e-6."""
    model = tiny_model(family)
    program = make_program(model, tiny_batch(M=_chunks(family), rows=ROWS))
    exact = [ROWS * g for g in _exact(family)]
    return scg.testing.check_unbiased(program, _params(model), n=GROUPS, seed=1, atol=1e-10, exact=exact)


@pytest.mark.parametrize("family", ["paulus", "c2f"])
def test_self_critical_gradient_is_unbiased(family: str) -> None:
    exact = torch.cat([g.reshape(-1) for g in _exact(family)])
    assert float(exact.abs().max()) > 1e-3  # the reward depends on the parameters: not a vacuous test
    report = _check(family, _program)
    assert report.passed, str(report)


def test_the_gradient_test_catches_a_baseline_that_depends_on_the_sample() -> None:
    report = _check("paulus", _biased_program)
    assert not report.passed, str(report)


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
