"""Free-running decoding in training: the model generates its own summary, one scg node per word.

Sequence-level objectives (self-critical RL, :mod:`scg_summarize.train.objectives`) need the
model's *own* output ŷ, not the reference. :func:`rollout` runs any model family through its
step interface (``model.step(state, prev_tokens, memory, t, mode) -> (log_probs, state, att)``)
and draws every word as a stochastic node of the enclosing ``scg.Graph``,

    y_t ~ p(· | y_<t, x),      y_t = scg.sample(Categorical(logits=log p_t), name="token", step=t),

so that scg finds what each draw influences (the later steps through the embedding lookup,
the terminal reward through ``scg.influenced_by``, see the objective). Rows that have produced
``</s>`` draw from a point mass on ``<pad>`` from then on: log p = 0 exactly, no gradient and no
influence on anything, so a finished summary contributes Σ_{t ≤ |ŷ|} log p(y_t) as in Paulus et
al. (2018, eq. 15). Greedy decoding is the same call under
``scg.Graph(intervene=scg.estimators.greedy)`` (every draw replaced by its argmax, the coarse
draws of C2F included), which is the self-critical baseline's run.

Models call it from their ``forward(..., task="rollout")`` so that under DDP the rollout goes
through the wrapped module and gradients are synchronised.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.distributions import Categorical

import scg

from .attention import Mode

__all__ = ["TOKEN", "Rollout", "rollout"]

TOKEN = "token"  #: the name of the word nodes


@dataclass
class Rollout:
    """A generated batch of summaries.

    Attributes:
        tokens: ``(B, L)`` the words in the *corpus* id space (copied out-of-vocabulary words
            as their corpus ids), ``<pad>`` after ``</s>``; ``</s>`` itself is kept.
        lengths: ``(B,)`` words before ``</s>`` (L when none was produced).
        draws: the L word nodes' values ``(B,)`` each, in the model's output space.
        attention: each step's attention output.
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    draws: list[torch.Tensor]
    attention: list[Any] = field(default_factory=list)

    def sequences(self) -> list[list[int]]:
        """Each example's words before ``</s>`` (Python lists of corpus ids). Inside a graph this
        leaves tensor land: declare what is computed from it with ``scg.influenced_by(value,
        *self.draws)`` (scg warns otherwise)."""
        rows = self.tokens.tolist()
        return [row[:n] for row, n in zip(rows, self.lengths.tolist())]


def rollout(
    model: Any,
    memory: Any,
    state: Any,
    max_len: int,
    *,
    bos: int = 2,
    eos: int = 3,
    pad: int = 0,
    name: str = TOKEN,
    mode: Mode = "sample",
) -> Rollout:
    """Generate up to ``max_len`` words per example from ``state`` (see the module docstring).

    Args:
        model: a model family (``step``, ``corpus_ids``).
        memory: its encoded batch; state: its initial decoder state.
        max_len: the most words generated (``</s>`` included).
        bos, eos, pad: special ids.
        name: the word nodes' name.
        mode: the attention mode for hard-attention families (``sample`` creates their nodes too).
    """
    if max_len < 1:
        raise ValueError(f"rollout: max_len must be positive, got {max_len}")
    B = memory.words.shape[0]
    device = memory.words.device
    prev = torch.full((B,), bos, dtype=torch.long, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    lengths = torch.full((B,), max_len, dtype=torch.long, device=device)
    draws: list[torch.Tensor] = []
    atts: list[Any] = []
    point_mass: torch.Tensor | None = None
    for t in range(max_len):
        log_probs, state, att = model.step(state, prev, memory, t, mode)  # (B, V')
        if point_mass is None:  # (made from the shape alone: a copy of row 0 would carry row 0's draws to all)
            floor = torch.finfo(log_probs.dtype).min
            point_mass = torch.full((1, log_probs.shape[1]), floor, dtype=log_probs.dtype, device=device)
            point_mass[0, pad] = 0.0  # (1, V')
        logits = torch.where(done.unsqueeze(1), point_mass, log_probs)  # (B, V')
        y = scg.sample(Categorical(logits=logits), name=name, step=t)  # (B,)
        draws.append(y)
        atts.append(att)
        ended = (y == eos) & ~done
        lengths = torch.where(ended, torch.full_like(lengths, t), lengths)
        done = done | ended
        prev = y
        with warnings.catch_warnings():  # harmless escape: finished rows only draw point masses
            warnings.simplefilter("ignore", scg.InfluenceLostWarning)
            if bool(done.all()):
                break
    compact = torch.stack(draws, dim=1)  # (B, L)
    tokens = model.corpus_ids(compact, memory)
    return Rollout(tokens, lengths, draws, atts)
