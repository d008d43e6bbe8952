"""The step-decoder protocol: the only thing search needs from a model.

Beam search, greedy search, teacher-forced scoring (perplexity) and the attention metrics all
drive a model through three methods, so they work for every model (STANDARD, MODEL1, HIER,
C2F) and can be tested with tiny hand-written decoders. A *row* is one partial hypothesis;
the search decides which rows exist, the model only maps rows to next-word distributions.

``init_state(batch) -> state``
    Encode the batch once. ``batch`` is the dict built by
    :func:`scg_summarize.data.collate_examples` (only ``src`` ``(B, M, N)`` and ``src_mask``
    are guaranteed; ``tgt`` may be absent when summarizing raw text). The state has one row
    per example, ``B`` rows.

``step(state, prev_tokens) -> (log_probs, new_state, extras)``
    ``prev_tokens`` is a long tensor ``(R,)`` with the previous word of every row (``<s>`` at
    the first step). ``log_probs`` is ``(R, V)``: normalized log-probabilities of the next word
    (``-inf`` allowed). ``extras`` maps names to tensors whose first dimension is ``R`` (see
    below); return ``{}`` when there is nothing to show. ``step`` must not modify ``state`` in
    place (the search may keep the old state).

``reorder(state, indices) -> state``
    Select rows: row ``i`` of the result is row ``indices[i]`` of ``state``. ``indices`` is a
    long tensor of any length ``R'``, values in ``[0, R)``, repeats allowed. The search uses it
    to expand ``B`` rows into ``B * beam`` rows (``indices = arange(B).repeat_interleave(beam)``),
    to follow surviving beams, and to drop finished examples. Encoder outputs need not be
    copied: keep them per example and keep a row -> example index in the state, composing it
    with ``indices`` (``state.example = state.example[indices]``).

Conventional ``extras`` (all optional; first dimension ``R``):

=================  ======================  ==================================================
key                shape                   meaning
=================  ======================  ==================================================
``coarse_attn``    float ``(R, M)``        the coarse (chunk) attention distribution; rows
                                           sum to 1 over real chunks
``chunk_read``     bool ``(R, M)``         chunks whose words were read at this step (the
                                           hard choice: argmax, or top-k for +MULTI); absent
                                           for soft attention (every chunk is read)
``word_attn``      float ``(R, M, N)``     the word attention over source positions
                                           (zero outside the chunks read)
=================  ======================  ==================================================

Hard attention at test time (the argmax of the coarse attention, or its top k for +MULTI) is
the model's business: the loader builds the decoder with ``coarse_topk`` (see
:mod:`scg_summarize.decoding.loading`).

Optional: ``request_extras(names)``
    Which extras the caller records (``"*"``: all), so that a model can skip the costly ones
    (:class:`~scg_summarize.decoding.adapters.ModelStepDecoder` computes ``word_attn`` only when
    asked). Beam search, greedy search and teacher forcing call it (:func:`request_extras`) with
    the extras they record before their first step.

Optional: ``offered_extras``
    The names of the extras the steps return (a tuple attribute or property). A request for
    another name is then refused before the first step, where a decoder that declares none has
    it recorded nowhere; and a caller can ask for the ones a model has (:func:`offered_extras`:
    evaluation's attention metrics, ``summarize --attention``). The project's decoders declare it.

Optional: the top-k step (:class:`TopKStepDecoder`)
    ``step_topk(state, prev_tokens, k) -> (TopK, new_state, extras)`` is ``step`` that returns
    only the ``k`` most probable next words of every row, best first: ``values`` ``(R, k')``
    (log-probabilities normalized over the whole vocabulary) and ``indices`` ``(R, k')`` with
    ``k' = min(k, V)``. A model whose distribution is ``log_softmax(W h + b)`` computes it with
    one fused projection + log-softmax + top-k (``scg_summarize.kernels.logsoftmax_topk``), never
    writing the ``(R, V)`` log-probabilities; any other model can take the top k of its full
    distribution (:func:`topk_of`). ``fused_topk`` (a bool attribute or property) says whether
    ``step_topk`` is the cheaper call, i.e. whether the search should use it by default.
    Beam search with the top-k step gives the same hypotheses as with ``step`` (it asks for
    enough words that the constraints cannot empty the candidates, see
    :func:`~scg_summarize.decoding.beam.beam_search`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

import torch

from ..data.batching import SourceBatch

__all__ = [
    "EXTRAS_OPTION",
    "Extras",
    "StepDecoder",
    "StepOutput",
    "TopK",
    "TopKStepDecoder",
    "check_step_output",
    "check_topk_result",
    "offered_extras",
    "offers_topk",
    "request_extras",
    "topk_of",
]

S = TypeVar("S")

Extras = Mapping[str, torch.Tensor]
#: how the searches' messages name the extras they were asked to record
EXTRAS_OPTION = "DecodeOptions.extras (--extras)"
StepOutput = tuple[torch.Tensor, Any, Extras]


@runtime_checkable
class StepDecoder(Protocol[S]):
    """A model seen one decoding step at a time (see the module docstring)."""

    def init_state(self, batch: SourceBatch) -> S:
        """Encode ``batch`` (``src``/``src_mask`` ``(B, M, N)``); returns ``B`` rows."""
        ...

    def step(self, state: S, prev_tokens: torch.Tensor) -> tuple[torch.Tensor, S, Extras]:
        """Next-word log-probabilities ``(R, V)``, the new state and extras per row."""
        ...

    def reorder(self, state: S, indices: torch.Tensor) -> S:
        """The rows ``indices`` of ``state`` (any length, repeats allowed)."""
        ...


@dataclass(frozen=True)
class TopK:
    """The ``k'`` most probable next words of every row, best first.

    Attributes:
        values: float ``(R, k')``: log p(w | row), normalized over the whole vocabulary.
        indices: long ``(R, k')``: the words.
    """

    values: torch.Tensor
    indices: torch.Tensor


@runtime_checkable
class TopKStepDecoder(StepDecoder[S], Protocol[S]):
    """A :class:`StepDecoder` that also offers the top-k step (see the module docstring)."""

    fused_topk: bool

    def step_topk(self, state: S, prev_tokens: torch.Tensor, k: int) -> tuple[TopK, S, Extras]:
        """The ``min(k, V)`` best next words per row, the new state and extras per row."""
        ...


def request_extras(decoder: object, names: Iterable[str], where: str = EXTRAS_OPTION) -> None:
    """Tell ``decoder`` which extras will be recorded, through its optional ``request_extras(names)``
    hook (``"*"``: all; a model may skip computing the others, e.g. ``word_attn``); nothing for a
    decoder without the hook. The searches and teacher forcing call it before their first step.

    Raises ``ValueError`` naming ``where`` (the request, for the message) when ``decoder`` declares
    ``offered_extras`` and a name (``"*"`` aside) is not among them: a misspelt or unsupported name
    would otherwise be recorded nowhere, without a word."""
    names = tuple(names)
    offered = getattr(decoder, "offered_extras", None)
    if offered is not None:
        missing = [name for name in names if name != "*" and name not in offered]
        if missing:
            raise ValueError(
                f"{where} asks for {', '.join(map(repr, missing))}, which the model's steps do not return "
                f"(they return: {', '.join(offered) or 'no extras'})"
            )
    hook = getattr(decoder, "request_extras", None)
    if callable(hook):
        hook(names)


def offered_extras(decoder: object, wanted: Iterable[str]) -> tuple[str, ...]:
    """The names of ``wanted`` that ``decoder`` declares in its optional ``offered_extras`` (all
    of ``wanted`` for a decoder that declares none: it returns the ones it has), for a caller that
    records extras where a model has them (evaluation's attention metrics, ``summarize --attention``)."""
    offered = getattr(decoder, "offered_extras", None)
    if offered is None:
        return tuple(wanted)
    return tuple(name for name in wanted if name in offered)


def offers_topk(decoder: object) -> bool:
    """Whether ``decoder`` has a ``step_topk`` method (the optional top-k step)."""
    return callable(getattr(decoder, "step_topk", None))


def topk_of(log_probs: torch.Tensor, k: int) -> TopK:
    """The top-k step of a full ``(R, V)`` distribution: ``torch.topk`` of the log-probabilities."""
    top = log_probs.topk(min(k, log_probs.shape[1]), dim=1)
    return TopK(top.values, top.indices)


def check_topk_result(result: Any, rows: int, k: int, where: str = "step_topk()") -> tuple[TopK, Any, Extras]:
    """Validate what a decoder's ``step_topk`` returned (as :func:`check_step_output`)."""
    if not isinstance(result, tuple) or len(result) != 3 or not isinstance(result[0], TopK):
        raise TypeError(f"{where} must return (TopK, state, extras), got {type(result).__name__}")
    top, state, extras = result
    for name, value in (("values", top.values), ("indices", top.indices)):
        if not isinstance(value, torch.Tensor) or value.dim() != 2 or value.shape[0] != rows:
            raise ValueError(f"{where}: TopK.{name} must be a tensor ({rows}, k), got {_shape(value)}")
    if top.values.shape != top.indices.shape or not 1 <= top.values.shape[1] <= k:
        raise ValueError(
            f"{where}: TopK values {tuple(top.values.shape)} and indices {tuple(top.indices.shape)} "
            f"must have the same shape with 1..{k} columns"
        )
    _, _, extras = check_step_output((top.values, state, extras), rows, where)
    return top, state, extras


def check_step_output(result: Any, rows: int, where: str = "step()") -> StepOutput:
    """Validate what a decoder's ``step`` returned; raises ``TypeError``/``ValueError`` naming
    the problem (so a broken model fails with a clear message, not deep inside the search)."""
    if not isinstance(result, tuple) or len(result) != 3:
        raise TypeError(f"{where} must return (log_probs, state, extras), got {type(result).__name__}")
    log_probs, state, extras = result
    if not isinstance(log_probs, torch.Tensor) or log_probs.dim() != 2:
        raise ValueError(f"{where}: log_probs must be a 2-d tensor (rows, vocab), got {_shape(log_probs)}")
    if log_probs.shape[0] != rows:
        raise ValueError(f"{where}: log_probs has {log_probs.shape[0]} rows, expected {rows}")
    if extras is None:
        extras = {}
    if not isinstance(extras, Mapping):
        raise TypeError(f"{where}: extras must be a mapping of tensors, got {type(extras).__name__}")
    for key, value in extras.items():
        if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != rows:
            raise ValueError(f"{where}: extras[{key!r}] must be a tensor with {rows} rows, got {_shape(value)}")
    return log_probs, state, extras


def _shape(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor of shape {tuple(value.shape)}"
    return type(value).__name__
