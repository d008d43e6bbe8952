"""Model selection by a configurable validation metric (``train.select_metric``).

Perplexity (the default, from :func:`.evaluate.evaluate_nll`) is lower-is-better; ROUGE-1/2/L
F1 (×100) of greedy summaries of the first ``train.select_examples`` validation examples,
computed on word ids (:mod:`.reward`), is higher-is-better. Paulus et al. (2018) select their
RL and mixed models by validation ROUGE-L, where perplexity says little (RL does not minimize
it). :func:`selection_value` turns either into a number to *minimize*, which is what the
trainer's ``best.pt`` test and :class:`~.optim.PlateauDecay` compare.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..data import SummarizationDataset
from ..models.family import SummarizerFamily
from .config import Config
from .data import batch_to, make_loader
from .reward import METRICS, reference_ids, rouge_f1

__all__ = ["selection_value", "validation_rouge"]


@torch.no_grad()
def validation_rouge(
    model: SummarizerFamily[Any, Any],
    dataset: SummarizationDataset,
    config: Config,
    device: torch.device,
    n_examples: int,
    progress: Callable[[int], None] | None = None,
) -> dict[str, float]:
    """ROUGE-1/2/L F1 ×100 of greedy summaries of the first ``n_examples`` examples (ids);
    ``progress`` is called with the examples of every decoded batch."""
    from ..decode_options import DecodeOptions
    from ..decoding.adapters import ModelStepDecoder
    from ..decoding.greedy import greedy_search

    was_training = model.training
    decoder = ModelStepDecoder(model)
    options = DecodeOptions(greedy=True, max_len=config.eval.decode.max_len)
    hyps: list[list[int]] = []
    refs: list[list[int]] = []
    try:
        for batch in make_loader(dataset, config, train=False):
            batch = batch_to(batch, device, config)
            found = greedy_search(decoder, batch, options)
            for result, ref in zip(found, reference_ids(batch.tgt, batch.tgt_mask)):
                hyps.append(result[0].tokens if result else [])
                refs.append(ref)
            if progress is not None:
                progress(len(found))
            if len(hyps) >= n_examples:
                break
    finally:
        model.train(was_training)
    hyps, refs = hyps[:n_examples], refs[:n_examples]
    return {name: 100.0 * float(rouge_f1(hyps, refs, name).mean()) for name in METRICS}


def selection_value(metrics: dict[str, Any], metric: str) -> float:
    """The number to minimize: perplexity, or −ROUGE."""
    if metric not in metrics:
        raise KeyError(f"train.select_metric {metric!r} is not among the validation metrics {sorted(metrics)}")
    value = float(metrics[metric])
    return value if metric == "ppl" else -value
