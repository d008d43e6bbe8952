"""Training objectives: maximum likelihood for soft attention, an scg surrogate for C2F.

Soft models (STANDARD, Model 1, HIER, and C2F's soft +ALTERNATE minibatches) minimize the NLL
Σ_t nll_t by backpropagation; no graph is built.

C2F (Ling & Rush 2017, Section 4.4.1) makes the decoder's per-step NLL the cost of step t,

    c_t = nll_t = −log p(y_{t+1} | y_≤t, x) = −r_t,

one ``scg.cost(c_t, name="nll", step=t, baseline=ema)`` per step, inside an ``scg.Graph``
whose stochastic nodes are the coarse draws ℓ_t (``name="coarse", step=t``, one node of shape
(B, k) per step). ``graph.surrogate_loss(discount=γ, score_scale=λ)`` then gives, per example,

    L = Σ_t c_t  +  λ Σ_t log p(ℓ_t | ·) · stop_grad(A_t),   A_t = (c_t − b_t) + γ A_{t+1},

so one cost per step does both jobs: its pathwise gradient trains the decoder, encoder and the
fine attention (the NLL), and, through scg's influence tracking (ℓ_t influences every later
step through the context, the LSTM state and input feeding), it is the reward-to-go of the draws,
minus the EMA baseline b_t of step t (β = 0.1, subtracted before discounting as in the paper).
λ = ``train.reward_scale`` is passed as scg's ``score_scale``; the NLL is not scaled.

Padding: beyond an example's last target word its cost is set to the baseline's current value
b_t, so that c_t − b_t = 0 there: finished examples neither reward nor punish any draw (their
draws after the end get no gradient at all). These constants add nothing to the gradient; the
reported NLL is computed from the real positions only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import scg

from ..models.summarizer import SummarizerOutput

__all__ = ["COARSE", "COST", "StepResult", "c2f_objective", "mle_objective"]

COARSE = "coarse"  #: the name of C2F's stochastic nodes (set in the attention)
COST = "nll"  #: the name of the per-step cost nodes


@dataclass
class StepResult:
    """A minibatch's loss (to backpropagate) and what to log.

    Attributes:
        loss: the scaled surrogate (C2F) or NLL (soft), divided by the normalizer.
        nll: Σ NLL over real target tokens (a float).
        tokens: the number of real target tokens.
        output: the model's teacher-forced output.
        graph: the scg graph (C2F sample minibatches) or None.
        soft: whether the minibatch used soft attention.
    """

    loss: torch.Tensor
    nll: float
    tokens: int
    output: SummarizerOutput
    graph: Any = None
    soft: bool = True


def _call(model: nn.Module, batch: dict[str, Any], mode: str) -> SummarizerOutput:
    out: SummarizerOutput = model(batch["src"], batch["src_mask"], batch["tgt"], batch["tgt_mask"], mode=mode)
    return out


def mle_objective(model: nn.Module, batch: dict[str, Any], normalizer: float, mode: str = "soft") -> StepResult:
    """Σ_t nll_t / normalizer (soft attention: plain backpropagation)."""
    out = _call(model, batch, mode)
    total = out.total_nll()
    return StepResult(total / normalizer, float(total.detach()), out.tokens(), out, None, True)


def c2f_objective(model: nn.Module, batch: dict[str, Any], normalizer: float, baseline: scg.baselines.EMA,
                  discount: float, reward_scale: float) -> StepResult:
    """The C2F surrogate (see the module docstring), divided by ``normalizer``."""
    with scg.Graph() as graph:
        out = _call(model, batch, "sample")
        for t, nll_t in enumerate(out.step_nll):  # (B,) each
            real = out.step_mask[:, t]
            fill = torch.as_tensor(baseline.value(COST, t), dtype=nll_t.dtype, device=nll_t.device)
            scg.cost(torch.where(real, nll_t, fill), name=COST, step=t, baseline=baseline)
    surrogate = graph.surrogate_loss(discount=discount, score_scale=reward_scale)
    total = out.total_nll().detach()
    return StepResult(surrogate / normalizer, float(total), out.tokens(), out, graph, False)
