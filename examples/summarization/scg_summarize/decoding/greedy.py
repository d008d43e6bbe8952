"""Greedy search: the most probable next word at every step, with the same constraints as beam
search (lengths, ``<unk>`` handling, n-gram blocking).

Rows that produced ``</s>`` are dropped from the decoder state, so the batch shrinks as
summaries finish. With the same options, the result equals beam search with ``beam_size=1``.
"""

from __future__ import annotations

from typing import Any

import torch

from ..data.batching import SourceBatch
from ..decode_options import DecodeOptions, Hypothesis
from .beam import batch_size_of
from .blocking import SpecialIds, apply_constraints
from .protocol import StepDecoder, check_step_output, request_extras

__all__ = ["greedy_search"]


def greedy_search(
    decoder: StepDecoder[Any],
    batch: SourceBatch,
    options: DecodeOptions,
    special: SpecialIds | None = None,
) -> list[list[Hypothesis]]:
    """Decode every example of ``batch`` greedily; one hypothesis per example (as a 1-list,
    like :func:`~scg_summarize.decoding.beam.beam_search`)."""
    if not isinstance(options, DecodeOptions):
        raise TypeError(f"greedy_search(options=...): expected a DecodeOptions, got {type(options).__name__}")
    special = special or SpecialIds()
    request_extras(decoder, options.extras)
    n_examples = batch_size_of(batch)
    device = batch.src.device
    state = decoder.init_state(batch)
    alive = torch.arange(n_examples, device=device)
    prev = torch.full((n_examples,), special.bos, dtype=torch.long, device=device)
    history = torch.zeros(n_examples, 0, dtype=torch.long, device=device)
    totals = torch.zeros(n_examples, device=device)
    extras_hist: dict[str, torch.Tensor] | None = None
    results: list[list[Hypothesis]] = [[] for _ in range(n_examples)]

    for length in range(options.max_len + 1):
        rows = len(alive)
        log_probs, state, extras = check_step_output(decoder.step(state, prev), rows, "decoder.step()")
        if options.extras and extras_hist is None:
            extras_hist = {
                key: value.new_zeros((rows, 0, *value.shape[1:])) for key, value in extras.items() if options.wants(key)
            }
        log_probs = apply_constraints(log_probs.float(), history, options, special)
        best, token = log_probs.max(dim=1)
        token = torch.where(torch.isneginf(best), torch.full_like(token, special.eos), token)
        totals = totals + best
        history = torch.cat([history, token.unsqueeze(1)], dim=1)
        if extras_hist is not None:
            extras_hist = {k: torch.cat([v, extras[k].unsqueeze(1)], dim=1) for k, v in extras_hist.items()}
        done = token == special.eos
        for row in done.nonzero(as_tuple=True)[0].tolist():
            total = float(totals[row])
            hyp_extras = {k: v[row].cpu() for k, v in extras_hist.items()} if extras_hist is not None else {}
            words = history[row, :-1].tolist()
            results[int(alive[row])] = [Hypothesis(words, total, options.normalize(total, length), hyp_extras)]
        keep = (~done).nonzero(as_tuple=True)[0]
        if len(keep) == 0:
            break
        if len(keep) < rows:
            state = decoder.reorder(state, keep)
            alive, history, totals = alive[keep], history[keep], totals[keep]
            if extras_hist is not None:
                extras_hist = {k: v[keep] for k, v in extras_hist.items()}
        prev = token[keep]
    return results
