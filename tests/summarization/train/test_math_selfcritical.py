"""The self-critical gradient's maths, checked against quantities the test computes itself (issue 30).

With cost c = −r(yˢ) and the greedy baseline b = −r(ŷ), the surrogate of ``self_critical_objective``
must have, for the sampled batch, exactly the gradient

    (1/B) Σ_b (r(ŷ_b) − r(yˢ_b)) ∇ log p(yˢ_b)                       (Paulus et al. eq. 15)

with r(ŷ) from the test's own greedy rerun and r(yˢ) from the sampled words: this pins the sign of
the baseline, the sign of the cost, that the baseline is the greedy (argmax) run and the 1/B.
Averaged over many rows of one example it must point along −∇E[r], computed by exact enumeration
of every summary of a tiny vocabulary from a program written here (cost −r, no baseline), not by
the code under test (reward_enumeration.py, checked against ``scg.testing.exact_gradient`` in
test_self_critical.py); the tolerance is 5 standard errors of the per-row projections. The mixed
objective is γ L_rl + (1 − γ) L_ml with each part computed separately, and a greedy cost that
carries a gradient gives no gradient through the baseline.
"""

from __future__ import annotations

import math
import warnings
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from scg_summarize.data import Batch
from scg_summarize.models.paulus.config import PaulusConfig
from scg_summarize.models.registry import build_model
from scg_summarize.train.objective import mle_objective
from scg_summarize.train.reward import reference_ids, rouge_f1
from scg_summarize.train.self_critical import _mixed, self_critical_objective

import scg
import scg.testing

from ..models_helpers import tiny_c2f_config
from .reward_enumeration import reward_gradient_by_enumeration

V = 6  # <pad> <unk> <s> </s> and two words
MAX_LEN = 2


def _model(family: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if family == "paulus":
        config = PaulusConfig(vocab_size=V, emb_dim=3, hidden=4, enc_layers=1, dropout=0.0, init_range=0.5)
    else:  # C2F + self-critical: a chunk node and a word node per step
        config = tiny_c2f_config(V, emb_dim=3, hidden=4)
    return build_model(config).double().eval()


def _batch(rows: int, family: str) -> Batch:
    src = torch.tensor([[[4, 5, 4]] * (2 if family == "c2f" else 1)] * rows)
    tgt = torch.tensor([[2, 5, 4, 3]] * rows)
    return Batch(src=src, src_mask=src != 0, tgt=tgt, tgt_mask=torch.ones_like(tgt, dtype=torch.bool))


def _rewards(rollout: Any, refs: list[list[int]]) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.InfluenceLostWarning)
        return rouge_f1(rollout.sequences(), refs).double()


def _rollout(model: torch.nn.Module, batch: Batch) -> Any:
    return model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, task="rollout", max_len=MAX_LEN)


def _params(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p for p in model.parameters() if p.requires_grad]


def _flat(grads: tuple[torch.Tensor | None, ...], params: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in zip(params, grads)])


def _sample_log_probs(graph: scg.Graph, rows: int) -> torch.Tensor:
    """log p of each row's whole sampled run (every word node, and C2F's chunk nodes)."""
    nodes = graph.stochastic_nodes
    assert nodes
    return torch.stack([n.log_prob.reshape(rows, -1).sum(1) for n in nodes]).sum(0)


@pytest.mark.parametrize("family", ["paulus", "c2f"])
def test_gradient_is_the_greedy_baselined_score_of_each_sample(family: str) -> None:
    rows = 64
    model = _model(family)
    batch = _batch(rows, family)
    refs = reference_ids(batch.tgt, batch.tgt_mask)
    with torch.no_grad(), scg.Graph(intervene=scg.estimators.greedy):
        greedy = _rewards(_rollout(model, batch), refs)  # r(ŷ): the argmax run, every row the same
    torch.manual_seed(3)
    result = self_critical_objective(model, batch, float(rows), max_len=MAX_LEN)
    sampled = _rewards(result.output, refs)  # r(yˢ)
    assert float(sampled.std()) > 0.05  # the rows differ: signs and scale are visible
    log_p = _sample_log_probs(result.graph, rows)
    by_hand = ((greedy - sampled) * log_p).sum() / rows
    params = _params(model)
    got = _flat(torch.autograd.grad(result.loss, params, retain_graph=True, allow_unused=True), params)
    want = _flat(torch.autograd.grad(by_hand, params, allow_unused=True), params)
    assert float(want.abs().max()) > 1e-3
    assert float((got - want).abs().max()) <= 1e-9 * float(want.abs().max())


def test_averaged_gradient_points_along_the_exact_reward_gradient() -> None:
    """E[(r(ŷ) − r(yˢ)) ∇log p(yˢ)] = −∇E[r]: the mean over 1500 rows, projected on the exact
    direction, is |∇E[r]| within 5 standard errors (a cost of +r would give −|∇E[r]|)."""
    model = _model("paulus")
    params = _params(model)
    # ∇E[−r] by enumerating every summary in one batched run, without baseline or objective code
    exact = _flat(
        tuple(reward_gradient_by_enumeration(model, lambda rows: _batch(rows, "paulus"), params, max_len=MAX_LEN)),
        params,
    )
    direction = exact / exact.norm()
    rows = 1500
    batch = _batch(rows, "paulus")
    torch.manual_seed(11)
    result = self_critical_objective(model, batch, float(rows), max_len=MAX_LEN)
    got = _flat(torch.autograd.grad(result.loss, params, retain_graph=True, allow_unused=True), params)
    # per-row projections s_b = (r̂ − r_b) ∇log p_b · d, through one double-backward
    refs = reference_ids(batch.tgt, batch.tgt_mask)
    with torch.no_grad(), scg.Graph(intervene=scg.estimators.greedy):
        greedy = _rewards(_rollout(model, batch), refs)
    weights = (greedy - _rewards(result.output, refs)).detach()
    u = torch.zeros(rows, dtype=torch.float64, requires_grad=True)
    log_p = _sample_log_probs(result.graph, rows)
    g_u = _flat(torch.autograd.grad((u * log_p).sum(), params, create_graph=True, allow_unused=True), params)
    (jd,) = torch.autograd.grad((g_u * direction).sum(), u)
    s = weights * jd
    assert float((got * direction).sum()) == pytest.approx(float(s.mean()), rel=1e-8)  # the same estimate
    se = float(s.std()) / math.sqrt(rows)
    norm = float(exact.norm())
    assert norm > 10 * se, (norm, se)  # a sign error would land >= 20 standard errors away
    assert abs(float(s.mean()) - norm) <= 5 * se, (float(s.mean()), norm, se)


def test_mixed_objective_is_gamma_rl_plus_one_minus_gamma_ml() -> None:
    gamma = 0.9
    model = _model("paulus")
    batch = _batch(8, "paulus")
    trainer = SimpleNamespace(
        config=SimpleNamespace(train=SimpleNamespace(rl_weight=gamma, rollout_len=MAX_LEN, reward="rougeL")),
        net=model,
        model=model,
    )
    torch.manual_seed(5)
    mixed = _mixed(trainer)(batch, 8.0)  # type: ignore[arg-type]
    ml = mle_objective(model, batch, 8.0).loss
    torch.manual_seed(5)  # the teacher-forced part draws nothing: the same samples as in the mixture
    rl = self_critical_objective(model, batch, 8.0, max_len=MAX_LEN).loss
    params = _params(model)
    both = (gamma * rl + (1.0 - gamma) * ml, (1.0 - gamma) * rl + gamma * ml)
    grads = [
        _flat(torch.autograd.grad(x, params, retain_graph=True, allow_unused=True), params) for x in (mixed.loss, *both)
    ]
    assert float(mixed.loss.detach()) == pytest.approx(float(both[0].detach()), rel=1e-10)
    assert torch.allclose(grads[0], grads[1], atol=1e-10)
    assert float((grads[1] - grads[2]).abs().max()) > 1e-3  # the swapped weights are distinguishable


def test_greedy_cost_with_a_gradient_passes_none_through_the_baseline() -> None:
    """The SelfCritical baseline is a constant of the surrogate: ∂/∂φ of a greedy cost built from
    φ is 0 and the θ gradient is (c − b) ∇log p(x)."""
    theta = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    phi = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    with scg.Graph() as graph:
        x = scg.sample(torch.distributions.Bernoulli(logits=theta.expand(4)), name="x")
        greedy = phi * torch.ones(4, dtype=torch.float64)
        scg.cost(2.0 * x + 1.0, name="c", baseline=scg.baselines.SelfCritical(greedy))
    g_theta, g_phi = torch.autograd.grad(graph.surrogate_loss(), [theta, phi], allow_unused=True)
    assert g_phi is None or float(g_phi) == 0.0
    p = torch.sigmoid(theta.detach())
    score = x.detach() - p  # ∂/∂θ log Bernoulli(x; σ(θ))
    want = ((2.0 * x.detach() + 1.0 - 0.7) * score).sum()
    assert float(g_theta) == pytest.approx(float(want), rel=1e-12)
