"""The ``mal`` training objective: L = L_s + L_NLL (Li, Bing, Wei & Lam, eq. 19-21).

With ``train.normalize = "batch"`` (the MAL configurations) the loss of a minibatch of B
documents is

    (1/B) Σ_b [ L_s(b) + L_NLL(b) ],   L_s(b) = −(1/m_b) Σ_j [r_j log r̂_j + (1 − r_j) log(1 − r̂_j)],
                                       L_NLL(b) = −Σ_t log p(y_t | y_<t, X),

eq. (21) averaged over the batch (``tokens`` divides by the target tokens instead). Each term is
reported per log window (``train`` lines of ``metrics.jsonl``): ``loss_s`` (L_s per document),
``nll_loss`` (L_NLL per document), ``entropy_s`` / ``entropy_u`` (mean normalized entropies of
a^s and a^u, 1 = uniform: the near-uniform attentions of the literal eq. 8 and 12) and
``label_rate`` (source words labelled salient). Rows without +SuAtt have L_s = 0, so the
objective serves all four rows of the paper's Table 1; ``train.objective = "auto"`` picks it for
the ``mal`` family.
"""

from __future__ import annotations

from typing import Any

import torch

from ..data.batching import Batch
from ..models.mal.model import MALTeacherOutput
from .objective import Objective, StepResult, register_objective

__all__ = ["mal_objective"]


def mal_objective(net: Any, batch: Batch, normalizer: float) -> StepResult:
    """(Σ_b L_s(b) + Σ L_NLL) / ``normalizer`` with every term in ``terms``."""
    out = net(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="soft", lengths=batch.lengths)
    if not isinstance(out, MALTeacherOutput) or out.loss_s is None:
        raise ValueError(
            f"train.objective = 'mal' needs a model of the 'mal' family (model.family = 'mal'); "
            f"its teacher-forced output is a {type(out).__name__}"
        )
    loss_s = out.loss_s
    total = out.total_nll()
    docs = float(loss_s.shape[0])
    loss = (loss_s.sum() + total) / normalizer
    terms = {"loss_s": loss_s.detach().mean(), "nll_loss": total.detach() / max(docs, 1.0)}
    for name, value in (("entropy_s", out.entropy_s), ("entropy_u", out.entropy_u), ("label_rate", out.label_rate)):
        if value is not None:
            terms[name] = torch.as_tensor(value)
    return StepResult(loss, total.detach(), out.tokens(), out, None, True, terms)


@register_objective("mal")
def _mal(trainer: Any) -> Objective:
    if trainer.model.default_objective != "mal":
        raise ValueError("train.objective = 'mal' needs model.family = 'mal'")

    return lambda batch, normalizer: mal_objective(trainer.net, batch, normalizer)
