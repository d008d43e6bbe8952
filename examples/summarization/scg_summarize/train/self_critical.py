"""Self-critical policy gradient on scg (Rennie et al. 2017; Paulus, Xiong & Socher 2018, Section 3.2).

The model generates a summary yˢ by sampling one word per step, each an scg stochastic node
(:func:`scg_summarize.models.common.rollout.rollout`), and the sequence-level reward r(yˢ) (ROUGE-L F1
against the reference, :mod:`.reward`) enters as *one terminal cost node* c = −r(yˢ). Its
baseline is the reward of the model's own greedy output ŷ, computed by rerunning the same
program under ``scg.Graph(intervene=scg.estimators.greedy)`` (every draw replaced by its argmax)
and passed as ``scg.baselines.SelfCritical``. ``Graph.surrogate_loss`` then has the gradient

    ∇L_rl = (r(ŷ) − r(yˢ)) Σ_t ∇ log p(yˢ_t | yˢ_<t, x)          (Paulus et al. eq. 15),

an unbiased estimate of ∇E[−r(y)] since r(ŷ) does not depend on the sampled run (Theorem 2 of
Schulman et al. 2015). The reward is computed in Python from the word ids, so the program tells
scg what it depends on with ``scg.influenced_by(cost, *draws, per_element=True)`` (row b's reward
depends on row b's words only); without that declaration scg would see no path from the draws to
the cost and give no score term.

Both graphs are built with ``scg.Declared()`` (nothing the model computes is tracked): its causal rule
credits every draw with the terminal cost (a cost without a step is influenced by every node) and each
row with its own row's reward, which is what tracking finds with ``influenced_by(..., per_element=True)``
(``tests/summarization/train/test_c2f_structure.py`` checks it, C2F's chunk draws included).

With hard attention (C2F, ``model.attention = "c2f"``) the chunk choices of every step are
stochastic nodes of the same graph: two kinds of node, chunks and words, credited with the same
terminal reward and the same self-critical baseline (the greedy rerun takes the argmax chunk too,
as at test time). That is the "C2F + self-critical RL" configuration (``C2F+SCST``).

The **mixed objective** (Paulus et al. eq. 16) is L = γ L_rl + (1 − γ) L_ml with γ =
``train.rl_weight`` (0.9984), L_ml the teacher-forced objective (``auto``: NLL, or C2F's surrogate).
Both terms are per-sequence sums divided by the batch size.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

import scg

from ..data.batching import Batch
from .objective import Objective, StepResult, _auto, register_objective
from .reward import reference_ids, rouge_f1

__all__ = ["REWARD", "greedy_rewards", "sampled_program", "self_critical_objective"]

REWARD = "reward"  #: the name of the terminal cost node


def _rollout(net: Any, batch: Batch, max_len: int) -> Any:
    return net(
        batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, task="rollout", max_len=max_len, lengths=batch.lengths
    )


def greedy_rewards(
    net: Any, batch: Batch, refs: list[list[int]], max_len: int = 0, metric: str = "rougeL"
) -> torch.Tensor:
    """r(ŷ) ``(B,)``: the reward of the greedy rerun (every node at its mode, no gradient)."""
    with torch.no_grad(), scg.Graph(structure=scg.Declared(), intervene=scg.estimators.greedy):
        greedy = _rollout(net, batch, max_len)
    return rouge_f1(greedy.sequences(), refs, metric)


def sampled_program(
    net: Any,
    batch: Batch,
    refs: list[list[int]],
    greedy_cost: torch.Tensor,
    max_len: int = 0,
    metric: str = "rougeL",
) -> tuple[Any, torch.Tensor]:
    """The sampled run inside the caller's graph: the word nodes, then one terminal cost
    c = −r(yˢ) with baseline ``SelfCritical(greedy_cost)`` (greedy_cost = −r(ŷ)). Returns the
    rollout and r(yˢ) ``(B,)``."""
    sampled = _rollout(net, batch, max_len)
    with warnings.catch_warnings():  # the escape is declared just below with scg.influenced_by
        warnings.simplefilter("ignore", scg.InfluenceLostWarning)
        reward = rouge_f1(sampled.sequences(), refs, metric)  # (B,)
    dtype, device = sampled.attention[0].context.dtype, sampled.tokens.device
    # per_element: row b's reward is computed from row b's words only, so each sequence is credited
    # with its own reward (eq. 15), not the batch's sum (whole-plate credit: unbiased, but its
    # variance grows with the batch size)
    cost = scg.influenced_by((-reward).to(dtype=dtype, device=device), *sampled.draws, per_element=True)
    baseline = scg.baselines.SelfCritical(greedy_cost.to(dtype=dtype, device=device))
    scg.cost(cost, name=REWARD, baseline=baseline)
    return sampled, reward


def self_critical_objective(
    net: Any,
    batch: Batch,
    normalizer: float,
    *,
    max_len: int = 0,
    metric: str = "rougeL",
    structure: scg.Declared | None = None,
) -> StepResult:
    """The self-critical surrogate of the module docstring, divided by ``normalizer``.

    Args:
        net: the model (or its DDP wrapper): ``net(..., task="rollout", max_len=...)``.
        batch: a training batch (``src``, ``src_mask``, ``tgt``, ``tgt_mask``).
        normalizer: the loss divisor (the batch size).
        max_len: words generated at most (0: the batch's longest reference, ``</s>`` included).
        metric: the reward, ``rougeL`` (the paper), ``rouge1`` or ``rouge2``.
        structure: the sampled graph's declared structure (a trainer passes the same one at every
            step, so that its credit plans are reused); None: a new ``scg.Declared()``.
    """
    refs = reference_ids(batch.tgt, batch.tgt_mask)
    greedy_reward = greedy_rewards(net, batch, refs, max_len, metric)  # (B,)
    with scg.Graph(structure=scg.Declared() if structure is None else structure) as graph:
        sampled, reward = sampled_program(net, batch, refs, -greedy_reward, max_len, metric)
    surrogate = graph.surrogate_loss()
    terms = {
        "reward": reward.mean().detach(),
        "greedy_reward": greedy_reward.mean().detach(),
        "sample_len": sampled.lengths.float().mean(),
    }
    zero = surrogate.new_zeros(())  # (no NLL, no tokens: the reward is the objective's)
    return StepResult(surrogate / normalizer, zero, zero, sampled, graph, False, terms)


@register_objective("self_critical")
def _self_critical(trainer: Any) -> Objective:
    tc = trainer.config.train
    structure = scg.Declared()  # the trainer's: its plans are reused from step to step

    def run(batch: Batch, normalizer: float) -> StepResult:
        batch_size = float(batch.src.shape[0])
        result = self_critical_objective(
            trainer.net, batch, batch_size, max_len=tc.rollout_len, metric=tc.reward, structure=structure
        )
        result.terms["rl_loss"] = result.loss.detach()
        return result

    return run


@register_objective("mixed")
def _mixed(trainer: Any) -> Objective:
    tc = trainer.config.train
    ml, rl = _auto(trainer), _self_critical(trainer)
    gamma = tc.rl_weight

    def run(batch: Batch, normalizer: float) -> StepResult:
        batch_size = float(batch.src.shape[0])
        m = ml(batch, batch_size)  # per-sequence sums / B, as the paper's L_ml
        r = rl(batch, batch_size)
        loss = gamma * r.loss + (1.0 - gamma) * m.loss
        terms = {**m.terms, **r.terms, "ml_loss": m.loss.detach(), "rl_loss": r.loss.detach()}
        return StepResult(loss, m.nll, m.tokens, m.output, r.graph, m.soft, terms)

    return run
