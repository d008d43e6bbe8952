"""Training objectives: maximum likelihood for soft attention, an scg surrogate for C2F, and the
registry of objectives (``train.objective``) with the sequence-level ones of
:mod:`.self_critical`.

================  ============================================================================
``auto``          the family's ``default_objective`` when it names one (MAL: ``mal``), else the
                  C2F surrogate for hard attention (with +ALTERNATE's soft minibatches),
                  ``mle`` otherwise: the behaviour of every configuration before the registry
``mle``           Σ_t nll_t (teacher forcing; soft attention)
``c2f_reinforce`` the C2F surrogate below (+ALTERNATE included)
``self_critical`` Paulus et al. (2018) / Rennie et al. (2017): :mod:`.self_critical`
``mixed``         γ L_rl + (1 − γ) L_ml with γ = ``train.rl_weight`` (L_ml: ``auto``)
``mal``           L_s + L_NLL of Li et al.'s MAL (:mod:`.mal_objective`)
================  ============================================================================

Each objective returns a :class:`StepResult` whose ``terms`` (e.g. ``ml_loss``, ``rl_loss``,
``reward``, ``greedy_reward``) the trainer averages and writes to the metrics per log window.

Soft models (STANDARD, Model 1, HIER, and C2F's soft +ALTERNATE minibatches) minimize the NLL
Σ_t nll_t by backpropagation; no graph is built.

C2F (Ling & Rush 2017, Section 4.4.1) makes the decoder's per-step NLL the cost of step t,

    c_t = nll_t = −log p(y_{t+1} | y_≤t, x) = −r_t,

one ``scg.cost(c_t, name="nll", step=t, baseline=ema)`` per step, inside an ``scg.Graph``
whose stochastic nodes are the coarse draws ℓ_t (``name="coarse", step=t``, one node of shape
(B, k) per step). ``graph.surrogate_loss(discount=γ, score_scale=λ)`` then gives, per example,

    L = Σ_t c_t  +  λ Σ_t log p(ℓ_t | ·) · stop_grad(A_t),   A_t = (c_t − b_t) + γ A_{t+1},

so one cost per step does both jobs: its pathwise gradient trains the decoder, encoder and the
fine attention (the NLL), and, since ℓ_t influences every later step (through the context, the LSTM
state and input feeding) and no earlier one, it is the reward-to-go of the draws, minus the EMA
baseline b_t of step t (β = 0.1, subtracted before discounting as in the paper).

That relation is declared, not tracked: the graph's structure is ``scg.Declared()``, whose causal rule
(a node at step t influences the costs of steps ≥ t, each example its own) is exactly it, so no
operation of the model is watched (a tracked graph made a small model's minibatch 1.37x as long:
``benchmarks/c2f_objective_structure.py``). Without input feeding (``model.input_feed = false``) the
draw ℓ_t reaches only step t's output (the LSTM state does not read the context), so
`c2f_structure` declares ``same_step`` instead: the causal rule there credited ℓ_t with the later
steps' costs too, unbiased but with a higher variance than the tracked graph.
``tests/summarization/train/test_c2f_structure.py`` checks the declaration against tracking with
``scg.testing.check_structure`` (one to three draws per step, padded steps, ±POS, BOW, +COPY, no
input feeding; the trainer's objectives as it runs them) and the estimator's mean against the
exact gradient.
λ = ``train.reward_scale`` is passed as scg's ``score_scale``; the NLL is not scaled.

Padding: beyond an example's last target word its cost is set to the baseline's current value
b_t, so that c_t − b_t = 0 there: finished examples neither reward nor punish any draw (their
draws after the end get no gradient at all). These constants add nothing to the gradient; the
reported NLL is computed from the real positions only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

import scg

from ..data.batching import Batch
from ..models.common.attention import Mode
from ..models.family import SummarizerOutput

__all__ = [
    "COARSE",
    "COST",
    "OBJECTIVES",
    "Objective",
    "StepResult",
    "build_objective",
    "c2f_objective",
    "c2f_program",
    "c2f_structure",
    "mle_objective",
    "objective_names",
    "register_objective",
    "same_step",
]

COARSE = "coarse"  #: the name of C2F's stochastic nodes (set in the attention)
COST = "nll"  #: the name of the per-step cost nodes


@dataclass
class StepResult:
    """A minibatch's loss (to backpropagate) and what to log, as tensors on the step's device:
    the trainer reads them to the host once per step, with the gradient norm (`read`).

    Attributes:
        loss: the scaled surrogate (C2F) or NLL (soft), divided by the normalizer.
        nll: Σ NLL over real target tokens (0-dim, detached).
        tokens: the number of real target tokens (0-dim).
        output: the model's teacher-forced output.
        graph: the scg graph (C2F sample minibatches) or None.
        soft: whether the minibatch used soft attention.
        terms: per-term values to report (0-dim, detached), e.g. ``ml_loss`` and ``rl_loss`` of a
            mixture.
    """

    loss: torch.Tensor
    nll: torch.Tensor
    tokens: torch.Tensor
    output: Any
    graph: Any = None
    soft: bool = True
    terms: dict[str, torch.Tensor] = field(default_factory=dict)

    def read(self, norm: torch.Tensor | None = None) -> StepValues:
        """The loss, the NLL, the token count, the gradient norm (None: not clipped) and the terms
        as numbers, in one host read (one wait for the device per step, not one per value)."""
        names = list(self.terms)
        parts = [self.loss, self.nll, self.tokens, *(self.terms[k] for k in names)]
        if norm is not None:
            parts.append(norm)
        device = self.loss.device
        numbers = torch.stack([p.detach().to(device=device, dtype=torch.float64).reshape(()) for p in parts]).tolist()
        return StepValues(
            loss=numbers[0],
            nll=numbers[1],
            tokens=int(numbers[2]),
            soft=self.soft,
            terms=dict(zip(names, numbers[3 : 3 + len(names)])),
            norm=numbers[-1] if norm is not None else None,
        )


@dataclass(kw_only=True, slots=True)
class StepValues:
    """A training step's logged values, on the host (`StepResult.read`)."""

    loss: float
    nll: float  # Σ NLL over real target tokens
    tokens: int
    soft: bool
    terms: dict[str, float]
    norm: float | None  # the gradient norm before clipping (None: not clipped)


def _call(model: nn.Module, batch: Batch, mode: Mode) -> SummarizerOutput:
    out: SummarizerOutput = model(
        batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode=mode, lengths=batch.lengths
    )
    return out


def mle_objective(model: nn.Module, batch: Batch, normalizer: float, mode: Mode = "soft") -> StepResult:
    """Σ_t nll_t / normalizer (soft attention: plain backpropagation)."""
    out = _call(model, batch, mode)
    total = out.total_nll()
    return StepResult(total / normalizer, total.detach(), out.tokens(), out, None, True)


def c2f_program(model: nn.Module, batch: Batch, baseline: scg.baselines.EMA) -> SummarizerOutput:
    """The C2F graph's nodes, to run inside an open ``scg.Graph``: the model's sampled forward (its
    ``coarse`` nodes) and one ``nll`` cost per step, padded steps at the baseline's value."""
    out = _call(model, batch, "sample")
    for t, nll_t in enumerate(out.step_nll):  # (B,) each
        real = out.step_mask[:, t]
        fill = baseline.value(COST, t).to(dtype=nll_t.dtype, device=nll_t.device)  # b_t: no host read
        scg.cost(torch.where(real, nll_t, fill), name=COST, step=t, baseline=baseline)
    return out


def same_step(v: Any, node: Any) -> bool:
    """C2F's relation without input feeding: the draw of step t influences the cost of step t only
    (either without a step: influenced, as the causal rule)."""
    return bool(v.step is None or node.step is None or v.step == node.step)


def c2f_structure(model: nn.Module) -> scg.Declared:
    """The declared structure of ``model``'s C2F graph (`c2f_program`; ``model`` may be DDP-wrapped):
    the causal rule (ℓ_t influences the costs of steps ≥ t, through input feeding), or `same_step`
    for a decoder without input feeding."""
    inner = getattr(model, "module", model)
    feeds = getattr(getattr(inner, "decoder", None), "input_feed", True)
    return scg.Declared() if feeds else scg.Declared(influences=same_step)


def c2f_objective(
    model: nn.Module,
    batch: Batch,
    normalizer: float,
    baseline: scg.baselines.EMA,
    discount: float,
    reward_scale: float,
    structure: scg.Declared | None = None,
    check_finite: bool = True,
) -> StepResult:
    """The C2F surrogate (see the module docstring), divided by ``normalizer``.

    ``structure``: the declared structure to build the graph with (a trainer passes the same one at
    every step, so that its credit plans are made once per step count); None: a new
    ``c2f_structure(model)``.
    ``check_finite``: scg's refusal of a non-finite cost (`scg.Graph.surrogate_loss`, two host
    reads); the trainer, which checks the loss in its one read per step, passes False.
    """
    with scg.Graph(structure=c2f_structure(model) if structure is None else structure) as graph:
        out = c2f_program(model, batch, baseline)
    surrogate = graph.surrogate_loss(discount=discount, score_scale=reward_scale, check_finite=check_finite)
    total = out.total_nll().detach()
    return StepResult(surrogate / normalizer, total, out.tokens(), out, graph, False)


# ----------------------------------------------------------------------------- the registry
#: ``objective(batch, normalizer) -> StepResult``, bound to a trainer by its factory
Objective = Callable[[Batch, float], StepResult]
#: name -> ``factory(trainer) -> Objective``; the trainer provides ``net`` (the module to call,
#: DDP-wrapped or not), ``model``, ``baseline`` (the EMA), ``config`` and ``_soft_minibatch()``.
ObjectiveFactory = Callable[[Any], Objective]
OBJECTIVES: dict[str, ObjectiveFactory] = {}


def register_objective(name: str) -> Callable[[ObjectiveFactory], ObjectiveFactory]:
    """A decorator registering an objective factory under ``name``."""

    def add(f: ObjectiveFactory) -> ObjectiveFactory:
        if name in OBJECTIVES and OBJECTIVES[name] is not f:
            raise ValueError(f"objective {name!r} is already registered")
        OBJECTIVES[name] = f
        return f

    return add


def objective_names() -> list[str]:
    """The registered objectives (the built-in sequence-level ones included)."""
    from . import mal_objective, self_critical  # noqa: F401  (register mal, self_critical and mixed)

    return sorted(OBJECTIVES)


def build_objective(name: str, trainer: Any) -> Objective:
    """The objective ``train.objective = name`` bound to ``trainer``."""
    if name not in objective_names():
        raise ValueError(f"train.objective must be one of {objective_names()}, got {name!r}")
    return OBJECTIVES[name](trainer)


def _with_terms(result: StepResult, prefix: str) -> StepResult:
    result.terms.setdefault(f"{prefix}_loss", result.loss.detach())
    return result


@register_objective("mle")
def _mle(trainer: Any) -> Objective:
    return lambda batch, normalizer: _with_terms(mle_objective(trainer.net, batch, normalizer, mode="soft"), "ml")


@register_objective("c2f_reinforce")
def _c2f(trainer: Any) -> Objective:
    if not trainer.model.hard:
        raise ValueError("train.objective = 'c2f_reinforce' needs hard attention (model.attention = 'c2f')")
    tc = trainer.config.train

    structure = c2f_structure(trainer.model)  # the trainer's: its plans are reused from step to step

    def run(batch: Batch, normalizer: float) -> StepResult:
        if trainer._soft_minibatch():  # +ALTERNATE
            return _with_terms(mle_objective(trainer.net, batch, normalizer, mode="soft"), "ml")
        result = c2f_objective(
            trainer.net, batch, normalizer, trainer.baseline, tc.discount, tc.reward_scale, structure, False
        )  # (the trainer refuses a non-finite loss in its one host read per step)
        return _with_terms(result, "ml")

    return run


def resolved_objective(name: str, model: Any) -> str:
    """The objective ``train.objective = name`` trains ``model`` with: ``auto`` is the family's
    ``default_objective`` when it names one (MAL: ``mal``), else ``c2f_reinforce`` for hard
    attention and ``mle`` for soft."""
    if name != "auto":
        return name
    own: str | None = model.default_objective  # a family's own loss (MAL: L_s + L_NLL)
    if own is not None:
        return own
    return "c2f_reinforce" if model.hard else "mle"


#: the training options only some objectives read: one given another value for a run whose
#: objective does not read it would change nothing, without a word
READ_ONLY_BY: dict[str, tuple[str, ...]] = {"reward_scale": ("c2f_reinforce",), "discount": ("c2f_reinforce",)}


def trained_objectives(name: str, model: Any) -> tuple[str, ...]:
    """The objectives a run with ``train.objective = name`` trains ``model`` with: the resolved one
    (`resolved_objective`), and for ``mixed`` its maximum-likelihood term's too (``auto``'s: the C2F
    surrogate for hard attention, which reads ``discount`` and ``reward_scale``)."""
    resolved = resolved_objective(name, model)
    return (resolved, resolved_objective("auto", model)) if resolved == "mixed" else (resolved,)


def unread_options(train: Any, objectives: tuple[str, ...]) -> list[str]:
    """The `READ_ONLY_BY` options of ``train`` (a `TrainConfig`) away from their defaults that none
    of ``objectives`` (`trained_objectives`) reads, one line each."""
    defaults = type(train)()
    return [
        f"train.{key} = {getattr(train, key)!r} is read by the {' or '.join(readers)} objective only, and this "
        f"run trains with {' and '.join(map(repr, objectives))}; leave it out"
        for key, readers in READ_ONLY_BY.items()
        if not set(objectives) & set(readers) and getattr(train, key) != getattr(defaults, key)
    ]


@register_objective("auto")
def _auto(trainer: Any) -> Objective:
    return build_objective(resolved_objective("auto", trainer.model), trainer)
