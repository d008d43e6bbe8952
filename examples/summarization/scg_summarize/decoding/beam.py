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
state (``reorder`` with fewer rows), so long batches do not pay for short summaries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .blocking import SpecialIds, apply_constraints
from .options import DecodeOptions, Hypothesis
from .protocol import StepDecoder, check_step_result

__all__ = ["batch_size_of", "beam_search"]

NEG_INF = float("-inf")


def batch_size_of(batch: Mapping[str, Any]) -> int:
    """The number of examples in ``batch`` (from ``src``), with a clear error otherwise."""
    src = batch.get("src")
    if not isinstance(src, torch.Tensor) or src.dim() < 2:
        raise ValueError("batch['src'] must be a tensor (B, M, N) of source ids")
    return int(src.shape[0])


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


def _bound(raw: float, length: int, options: DecodeOptions) -> float:
    """The best normalized score any extension of a live hypothesis could still reach."""
    if options.length_penalty == 0:
        return raw
    return max(options.normalize(raw, length), options.normalize(raw, options.max_len))


def _gather_extras(
    history: dict[str, torch.Tensor], current: Mapping[str, torch.Tensor], row: int
) -> dict[str, torch.Tensor]:
    return {k: torch.cat([history[k][row], current[k][row].unsqueeze(0)]).cpu() for k in history}


def beam_search(
    decoder: StepDecoder[Any],
    batch: Mapping[str, Any],
    options: DecodeOptions,
    special: SpecialIds | None = None,
) -> list[list[Hypothesis]]:
    """Decode every example of ``batch`` with beam search.

    Args:
        decoder: the model (see :mod:`~scg_summarize.decoding.protocol`).
        batch: a collated batch (``src``, ``src_mask``...).
        options: beam size, lengths, normalization, blocking, ``<unk>`` handling.
        special: special token ids (default: the data pipeline's).

    Returns:
        For each example, its ``options.n_best`` best finished hypotheses, best first.
    """
    special = special or SpecialIds()
    k = options.beam_size
    n_examples = batch_size_of(batch)
    finished = [_Finished(max(k, options.n_best)) for _ in range(n_examples)]
    state = decoder.init_state(batch)
    alive = list(range(n_examples))  # example of each group of K rows
    state = decoder.reorder(state, torch.arange(n_examples).repeat_interleave(k))
    device = batch["src"].device
    scores = torch.full((n_examples, k), NEG_INF, device=device)
    scores[:, 0] = 0.0
    history = torch.zeros(n_examples * k, 0, dtype=torch.long, device=device)
    prev = torch.full((n_examples * k,), special.bos, dtype=torch.long, device=device)
    extras_hist: dict[str, torch.Tensor] | None = None

    for length in range(options.max_len + 1):
        rows = len(alive) * k
        log_probs, state, extras = check_step_result(decoder.step(state, prev), rows, "decoder.step()")
        if options.extras and extras_hist is None:
            extras_hist = {
                key: value.new_zeros((rows, 0, *value.shape[1:])) for key, value in extras.items() if options.wants(key)
            }
        log_probs = apply_constraints(log_probs.float(), history, options, special)
        vocab = log_probs.shape[1]
        candidates = (scores.reshape(rows, 1) + log_probs).reshape(len(alive), k * vocab)
        top_scores, top_index = candidates.topk(min(2 * k, k * vocab), dim=1)
        top_beam = (top_index // vocab).tolist()
        top_token = (top_index % vocab).tolist()
        top_list = top_scores.tolist()

        keep_groups: list[int] = []
        parents: list[int] = []
        tokens: list[int] = []
        new_scores: list[float] = []
        for group, example in enumerate(alive):
            live: list[tuple[float, int, int]] = []
            for score, beam, token in zip(top_list[group], top_beam[group], top_token[group]):
                if score == NEG_INF or len(live) == k:
                    break
                row = group * k + beam
                if token == special.eos:
                    hyp_extras = _gather_extras(extras_hist, extras, row) if extras_hist is not None else {}
                    words = history[row].tolist()
                    finished[example].add(Hypothesis(words, score, options.normalize(score, length), hyp_extras))
                else:
                    live.append((score, row, token))
            best_live = live[0][0] if live else NEG_INF
            target = finished[example].threshold(options.n_best)
            if not live or (target > NEG_INF and _bound(best_live, length + 1, options) <= target):
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
