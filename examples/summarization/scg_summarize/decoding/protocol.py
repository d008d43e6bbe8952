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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

import torch

__all__ = [
    "EXTRA_KEYS",
    "Extras",
    "StepDecoder",
    "StepResult",
    "check_step_result",
]

S = TypeVar("S")

Extras = Mapping[str, torch.Tensor]
StepResult = tuple[torch.Tensor, Any, Extras]

#: The conventional ``extras`` keys understood by the metrics and the figures.
EXTRA_KEYS: tuple[str, ...] = ("coarse_attn", "chunk_read", "word_attn")


@runtime_checkable
class StepDecoder(Protocol[S]):
    """A model seen one decoding step at a time (see the module docstring)."""

    def init_state(self, batch: Mapping[str, Any]) -> S:
        """Encode ``batch`` (``src``/``src_mask`` ``(B, M, N)``); returns ``B`` rows."""
        ...

    def step(self, state: S, prev_tokens: torch.Tensor) -> tuple[torch.Tensor, S, Extras]:
        """Next-word log-probabilities ``(R, V)``, the new state and extras per row."""
        ...

    def reorder(self, state: S, indices: torch.Tensor) -> S:
        """The rows ``indices`` of ``state`` (any length, repeats allowed)."""
        ...


def check_step_result(result: Any, rows: int, where: str = "step()") -> StepResult:
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
