"""Batched beam search over any :class:`~scg_summarize.decoding.protocol.StepDecoder`.

Every example keeps ``K`` live hypotheses (rows of the decoder state). At each step the
``K * V`` one-word extensions are ranked by total log-probability; the best ``2K`` are scanned
in order, an extension ending in ``</s>`` becomes a finished hypothesis (ranked with length
normalization) and the first ``K`` others become the new live hypotheses. At the first step only
one live hypothesis exists per example, so no duplicates are produced.

An example is finished when it holds ``n_best`` finished hypotheses and no live one can still
beat them: with log-probabilities <= 0 a live hypothesis of total ``s`` can at best reach
``s / (max_len + 1) ** alpha`` (``s`` itself without normalization), so the answer is the best
one the beam can find, not a heuristic cut. Finished examples are dropped from the decoder
state (``reorder`` with fewer rows), so long batches do not pay for short summaries. A decoder
whose step scores are not log-probabilities but may exceed them by at most ``b >= 0`` per step
(ABS+'s positive feature bonuses) says so with a ``max_step_bonus = b`` attribute; the bound then
adds ``b`` for every step still to come (:func:`_bound`), so the early stop stays exact.

Hypothesis recombination (``DecodeOptions.recombine``, for decoders with a ``markov_window`` C):
the candidates are scanned best first and one whose last C words equal those of a live
hypothesis already kept is dropped; ``K (K + 1)`` candidates are scanned so that ``K`` distinct
ones are found whenever they exist (each window gets at most one candidate per parent row).

The top-k step: a decoder that offers ``step_topk`` (see :mod:`~.protocol`) can give only its
``C`` best words per row instead of all ``V`` log-probabilities (for the summarizer: one fused
projection + log-softmax + top-k, ``scg_summarize.kernels.logsoftmax_topk``). The search then asks
for ``C = 2K + b`` words, rounded up to a power of two (few kernel variants), where ``b``
(:func:`~.blocking.banned_count_bound`) bounds the words the constraints can ban in a row. The
best ``2K`` extensions of an example are among its rows' best ``2K`` allowed words, and a row's
best ``C`` words hold at least ``2K`` allowed ones (or all its finite ones), so the ranking,
hence every hypothesis, is the same as with the full distribution. The full ``step`` is still
used where the candidates do not suffice: at ``max_len`` (only ``</s>`` is allowed), when
``C >= V`` or ``C > MAX_TOPK``, and for a row left with no allowed candidate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..data.batching import SourceBatch
from ..decode_options import DecodeOptions, Hypothesis
from .blocking import SpecialIds, apply_constraints, banned_count_bound, constrain_candidates
from .protocol import StepDecoder, check_step_output, check_topk_result, offers_topk, request_extras

__all__ = ["MAX_TOPK", "batch_size_of", "beam_search", "markov_window", "use_topk_step"]

NEG_INF = float("-inf")

#: The most candidate words per row the top-k step asks for (beyond it the full step runs).
MAX_TOPK = 128


def batch_size_of(batch: SourceBatch) -> int:
    """The number of examples in ``batch`` (from ``src``), with a clear error otherwise."""
    if batch.src.dim() < 2:
        raise ValueError(f"batch.src must be a tensor (B, M, N) of source ids, got shape {tuple(batch.src.shape)}")
    return batch.size


class _Finished:
    """The finished hypotheses of one example, best first, at most ``capacity``."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.items: list[Hypothesis] = []

    def add(self, hyp: Hypothesis) -> None:
        self.items.append(hyp)
        self.items.sort(key=lambda h: h.score, reverse=True)
        del self.items[self.capacity :]

    def threshold(self, n: int) -> float:
        """The score a live hypothesis must beat to enter the top ``n`` (-inf if fewer)."""
        return self.items[n - 1].score if len(self.items) >= n else NEG_INF


def _bound(raw: float, length: int, options: DecodeOptions, bonus: float = 0.0) -> float:
    """The best normalized score any extension of a live hypothesis of ``length`` words and total
    ``raw`` could still reach, when every step adds at most ``bonus`` (>= 0; 0 for log-probabilities).

    Ending after ``L`` words (``length <= L <= max_len``) adds ``L - length + 1`` steps (``</s>``
    included), so the total is at most ``top = raw + bonus (max_len - length + 1)``; divided by
    ``(L + 1) ** alpha``, that is largest at ``L = length`` when ``top >= 0`` and at ``L = max_len``
    when ``top < 0``.
    """
    top = raw + bonus * max(options.max_len - length + 1, 0)
    if options.length_penalty == 0:
        return top
    return options.normalize(top, length if top >= 0 else options.max_len)


def markov_window(decoder: object) -> int:
    """C of a decoder whose state is its last C words (recombination is exact for it); raises
    ``TypeError`` for any other decoder."""
    window = getattr(decoder, "markov_window", None)
    if not isinstance(window, int) or window < 1:
        raise TypeError(
            f"DecodeOptions.recombine needs a decoder with a positive integer markov_window (the "
            f"number of last words its state depends on); {type(decoder).__name__} has {window!r}"
        )
    return window


def _gather_extras(
    history: dict[str, torch.Tensor], current: Mapping[str, torch.Tensor], row: int
) -> dict[str, torch.Tensor]:
    return {k: torch.cat([history[k][row], current[k][row].unsqueeze(0)]).cpu() for k in history}


def use_topk_step(decoder: object, topk: bool | None) -> bool:
    """Whether beam search drives ``decoder`` through its top-k step: ``topk`` if given (True
    needs a ``step_topk``), else when the decoder offers it and says it is the cheaper call
    (``fused_topk``)."""
    if topk is None:
        return offers_topk(decoder) and bool(getattr(decoder, "fused_topk", False))
    if topk and not offers_topk(decoder):
        raise TypeError(f"beam_search(topk=True): {type(decoder).__name__} has no step_topk")
    return topk


def _candidates(
    decoder: StepDecoder[Any],
    state: Any,
    prev: torch.Tensor,
    history: torch.Tensor,
    options: DecodeOptions,
    special: SpecialIds,
    topk: bool,
) -> tuple[torch.Tensor, torch.Tensor | None, Any, Mapping[str, torch.Tensor]]:
    """One decoder step: the constrained log-probabilities of every row's candidate words.

    Returns ``(values (R, C), words (R, C) or None, new_state, extras)``; ``words`` is None when
    the candidates are the whole vocabulary (column = word id).
    """
    rows = prev.shape[0]
    length = history.shape[1]
    if topk and length < options.max_len:
        want = 2 * options.beam_size + banned_count_bound(history, options, special)
        width = 1 << (want - 1).bit_length()  # a power of two >= want
        vocab = getattr(decoder, "vocab_size", None)
        if width <= MAX_TOPK and (vocab is None or width < int(vocab)):
            top, new_state, extras = check_topk_result(
                decoder.step_topk(state, prev, width),  # type: ignore[attr-defined]
                rows,
                width,
                "decoder.step_topk()",
            )
            values = constrain_candidates(top.values.float(), top.indices, history, options, special)
            if not bool(torch.isneginf(values).all(dim=1).any()):
                return values, top.indices, new_state, extras
            # a row with no allowed candidate: redo the step in full (</s> fallback of apply_constraints)
    log_probs, new_state, extras = check_step_output(decoder.step(state, prev), rows, "decoder.step()")
    return apply_constraints(log_probs.float(), history, options, special), None, new_state, extras


def beam_search(
    decoder: StepDecoder[Any],
    batch: SourceBatch,
    options: DecodeOptions,
    special: SpecialIds | None = None,
    topk: bool | None = None,
) -> list[list[Hypothesis]]:
    """Decode every example of ``batch`` with beam search.

    Args:
        decoder: the model (see :mod:`~scg_summarize.decoding.protocol`).
        batch: a collated batch (``src``, ``src_mask``...).
        options: beam size, lengths, normalization, blocking, ``<unk>`` handling.
        special: special token ids (default: the data pipeline's).
        topk: use the decoder's top-k step (True), its full step (False), or decide by
            :func:`use_topk_step` (None: the top-k step when the decoder says it is fused).
            The hypotheses are the same either way (see the module docstring).

    Returns:
        For each example, its ``options.n_best`` best finished hypotheses, best first.
    """
    if not isinstance(options, DecodeOptions):
        raise TypeError(f"beam_search(options=...): expected a DecodeOptions, got {type(options).__name__}")
    special = special or SpecialIds()
    vocab = getattr(decoder, "vocab_size", None)
    if vocab is not None:  # (the top-k step never indexes a full distribution with them: see apply_constraints)
        special.check_vocab(int(vocab))
    request_extras(decoder, options.extras)
    k = options.beam_size
    n_examples = batch_size_of(batch)
    finished = [_Finished(max(k, options.n_best)) for _ in range(n_examples)]
    state = decoder.init_state(batch)
    alive = list(range(n_examples))  # example of each group of K rows
    device = batch.src.device
    state = decoder.reorder(state, torch.arange(n_examples, device=device).repeat_interleave(k))
    scores = torch.full((n_examples, k), NEG_INF, device=device)
    scores[:, 0] = 0.0
    history = torch.zeros(n_examples * k, 0, dtype=torch.long, device=device)
    prev = torch.full((n_examples * k,), special.bos, dtype=torch.long, device=device)
    extras_hist: dict[str, torch.Tensor] | None = None
    window = markov_window(decoder) if options.recombine else 0
    fused = use_topk_step(decoder, topk) and not window  # the top-k step's candidates assume 2K are scanned
    bonus = float(getattr(decoder, "max_step_bonus", 0.0))
    if not bonus >= 0.0:
        raise ValueError(f"{type(decoder).__name__}.max_step_bonus must be >= 0, got {bonus!r}")
    scan = k * (k + 1) if window else 2 * k

    for length in range(options.max_len + 1):
        rows = len(alive) * k
        values, cand_words, state, extras = _candidates(decoder, state, prev, history, options, special, fused)
        if options.extras and extras_hist is None:
            extras_hist = {
                key: value.new_zeros((rows, 0, *value.shape[1:])) for key, value in extras.items() if options.wants(key)
            }
        width = values.shape[1]  # V, or the C candidates of the top-k step
        candidates = (scores.reshape(rows, 1) + values).reshape(len(alive), k * width)
        top_scores, top_index = candidates.topk(min(scan, k * width), dim=1)
        top_beam = (top_index // width).tolist()
        if cand_words is None:
            top_token = (top_index % width).tolist()
        else:
            top_token = cand_words.reshape(len(alive), k * width).gather(1, top_index).tolist()
        top_list = top_scores.tolist()
        tails = history[:, history.shape[1] - min(window - 1, history.shape[1]) :].tolist() if window else []

        keep_groups: list[int] = []
        parents: list[int] = []
        tokens: list[int] = []
        new_scores: list[float] = []
        for group, example in enumerate(alive):
            live: list[tuple[float, int, int]] = []
            seen: set[tuple[int, ...]] = set()
            for score, beam, token in zip(top_list[group], top_beam[group], top_token[group]):
                if score == NEG_INF or len(live) == k:
                    break
                row = group * k + beam
                if window and token != special.eos:
                    key = (*tails[row], token)
                    if key in seen:
                        continue  # recombined into a better hypothesis with the same last C words
                    seen.add(key)
                if token == special.eos:
                    hyp_extras = _gather_extras(extras_hist, extras, row) if extras_hist is not None else {}
                    words = history[row].tolist()
                    finished[example].add(Hypothesis(words, score, options.normalize(score, length), hyp_extras))
                else:
                    live.append((score, row, token))
            best_live = live[0][0] if live else NEG_INF
            target = finished[example].threshold(options.n_best)
            if not live or (target > NEG_INF and _bound(best_live, length + 1, options, bonus) <= target):
                continue  # this example is done
            while len(live) < k:  # pad with dead beams
                live.append((NEG_INF, live[0][1], live[0][2]))
            keep_groups.append(example)
            for score, row, token in live:
                parents.append(row)
                tokens.append(token)
                new_scores.append(score)

        if not keep_groups:
            break
        index = torch.tensor(parents, dtype=torch.long, device=device)
        prev = torch.tensor(tokens, dtype=torch.long, device=device)
        state = decoder.reorder(state, index)
        history = torch.cat([history[index], prev.unsqueeze(1)], dim=1)
        if extras_hist is not None:
            extras_hist = {
                key: torch.cat([extras_hist[key][index], extras[key][index].unsqueeze(1)], dim=1) for key in extras_hist
            }
        scores = torch.tensor(new_scores, device=device).reshape(len(keep_groups), k)
        alive = keep_groups
    return [f.items[: options.n_best] for f in finished]
