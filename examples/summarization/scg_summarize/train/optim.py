"""The paper's optimization (Section 5): SGD, lr 1 (0.1 for the chunk encoder), gradients
renormalized to norm 5, lr halved every epoch once validation perplexity stops improving; and
ABS's (Rush et al. 2015, Section 7.3): SGD, lr 0.05 halved at every epoch that does not improve
(its max-norm renormalization of the embeddings after every epoch is the family's
``end_of_epoch``).

:func:`build_optimizer` makes two parameter groups (the chunk encoder's lr is scaled);
:class:`PlateauDecay` is the schedule, both variants (it has a ``state_dict`` for exact
resumption); :func:`clip_gradients` is the renormalization ``g ← g · min(1, 5 / ‖g‖)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from .config import TrainConfig

__all__ = ["PlateauDecay", "build_optimizer", "clip_gradients"]


def build_optimizer(model: nn.Module, chunk_params: list[nn.Parameter], config: TrainConfig) -> torch.optim.Optimizer:
    """SGD, Adam or Adadelta over ``model``'s trainable parameters; ``chunk_params`` get lr ×
    ``chunk_encoder_lr_scale``. Adadelta has the ρ = 0.95, ε = 10⁻⁶ of Zeiler (2012) and of Li et
    al.'s MAL (Section 3.4; torch's default ρ is 0.9); its lr (1 in Zeiler) scales the update."""
    chunk_ids = {id(p) for p in chunk_params}
    rest = [p for p in model.parameters() if p.requires_grad and id(p) not in chunk_ids]
    groups: list[dict[str, Any]] = [{"params": rest, "lr": config.lr, "name": "main"}]
    if chunk_params:
        groups.append(
            {"params": chunk_params, "lr": config.lr * config.chunk_encoder_lr_scale, "name": "chunk_encoder"}
        )
    if config.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=config.lr)
    if config.optimizer == "adadelta":
        return torch.optim.Adadelta(groups, lr=config.lr, rho=0.95, eps=1e-6)
    return torch.optim.Adam(groups, lr=config.lr)


def clip_gradients(parameters: Iterable[nn.Parameter], max_norm: float) -> torch.Tensor | None:
    """Renormalize the gradients to norm ``max_norm`` if larger; returns the norm before, a 0-dim
    tensor on the gradients' device (no host read), or None when nothing is clipped
    (``max_norm`` ≤ 0, or no gradients)."""
    params = [p for p in parameters if p.grad is not None]
    if max_norm <= 0 or not params:
        return None
    return torch.nn.utils.clip_grad_norm_(params, max_norm)


class PlateauDecay:
    """lr ← lr × ``decay`` at epoch ends, by the validation score (lower is better).

    Decay starts at the first epoch whose score is not better than the best so far (after
    ``patience`` more such epochs). With ``schedule="after_plateau"`` it then continues every
    epoch (seq2seq-attn's schedule, used by the paper); with ``"on_plateau"`` only the epochs that
    do not improve on the best decay (ABS's "halved when the validation log-likelihood does not
    improve").
    """

    def __init__(
        self, optimizer: torch.optim.Optimizer, decay: float = 0.5, patience: int = 0, schedule: str = "after_plateau"
    ) -> None:
        if schedule not in ("after_plateau", "on_plateau"):
            raise ValueError(f"PlateauDecay: schedule must be 'after_plateau' or 'on_plateau', got {schedule!r}")
        self.optimizer = optimizer
        self.decay = decay
        self.patience = patience
        self.schedule = schedule
        self.best = math.inf
        self.bad_epochs = 0
        self.decaying = False

    def step(self, metric: float) -> bool:
        """Record an epoch's validation perplexity; returns True when the lr was decayed."""
        improved = metric < self.best
        if improved:
            self.best = metric
        elif not self.decaying:
            self.bad_epochs += 1
            if self.bad_epochs > self.patience:
                self.decaying = True
        if self.decaying and self.decay != 1.0 and (self.schedule == "after_plateau" or not improved):
            for group in self.optimizer.param_groups:
                group["lr"] *= self.decay
            return True
        return False

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def state_dict(self) -> dict[str, Any]:
        return {
            "best": self.best,
            "bad_epochs": self.bad_epochs,
            "decaying": self.decaying,
            "decay": self.decay,
            "patience": self.patience,
            "schedule": self.schedule,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best = float(state["best"])
        self.bad_epochs = int(state["bad_epochs"])
        self.decaying = bool(state["decaying"])
        self.decay = float(state["decay"])
        self.patience = int(state["patience"])
        self.schedule = str(state.get("schedule", self.schedule))  # checkpoints before lr_schedule: the configured one
