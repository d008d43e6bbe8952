"""∇E[−r] of one example by exact enumeration in one batched run: the reference gradient of the
self-critical tests (test_self_critical.py checks it against ``scg.testing.exact_gradient``, which
runs the program once per joint value and prefix: ~15 times the CPU for Paulus, ~100 for C2F)."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Sequence

import torch
from scg_summarize.data import Batch
from scg_summarize.train.reward import reference_ids, rouge_f1
from torch.distributions import Distribution

import scg


def reward_gradient_by_enumeration(
    model: torch.nn.Module, batch: Callable[[int], Batch], params: Sequence[torch.Tensor], *, max_len: int
) -> list[torch.Tensor]:
    """∇E[−r] of one row (``batch(rows)``: the example on ``rows`` rows) with respect to ``params``.

    Row j of one run is forced, through the graph's ``intervene`` hook, along the j-th joint value
    of the nodes (the nodes and their numbers of values read from a first run forced to value 0,
    which ends no summary early); E[−r] = Σ_j p(row j)·(−r_j) with p from the nodes'
    distributions. Rows that drew ``</s>`` are forced on, at probability 0 unless the value is the
    point mass's, so every joint value is counted once. Parameters that no draw depends on get a
    zero gradient."""
    one = batch(1)
    sizes: list[int] = []

    def record(name: str, step: int | None, dist: Distribution, shape: torch.Size) -> torch.Tensor:
        sizes.append(dist.logits.shape[-1])  # type: ignore[attr-defined]  # Categorical nodes
        return torch.zeros(shape + dist.batch_shape, dtype=torch.long)

    with scg.Graph(intervene=record, warn_on_escape=False):
        model(one.src, one.src_mask, one.tgt, one.tgt_mask, task="rollout", max_len=max_len)
    joint = torch.tensor(list(itertools.product(*(range(size) for size in sizes))))  # (R, nodes)
    rows = len(joint)
    many = batch(rows)
    log_p: list[torch.Tensor] = []

    def force(name: str, step: int | None, dist: Distribution, shape: torch.Size) -> torch.Tensor:
        value = joint[:, len(log_p)].reshape(rows, *[1] * (len(dist.batch_shape) - 1)).expand(dist.batch_shape)
        log_p.append(dist.log_prob(value).reshape(rows, -1).sum(1))
        return value

    with scg.Graph(intervene=force, warn_on_escape=False):
        sampled = model(many.src, many.src_mask, many.tgt, many.tgt_mask, task="rollout", max_len=max_len)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", scg.InfluenceLostWarning)
            reward = rouge_f1(sampled.sequences(), reference_ids(many.tgt, many.tgt_mask)).to(torch.double)
    assert len(log_p) == len(sizes), "the forced run drew other nodes than the unforced one"
    expected = (torch.stack(log_p).sum(0).exp() * -reward).sum()
    grads = torch.autograd.grad(expected, list(params), allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]
