"""``train.cuda_graph`` on a real CUDA device (skipped without one; run by ``bash scripts/gpu_check.sh
tests``): the replayed steps against an eager trainer's on the same batches, where
``test_captured.py`` can only make torch.cuda's calls inert on the CPU.

What only a device shows: the graphs of two batch shapes share one memory pool and are replayed in
data order, not in capture order; the captured backward writes the gradient tensors the optimizer
reads; C2F's sampled chunks (torch's generator under capture) and its checks made on the device
(``torch._assert_async``) replay as they ran eagerly."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from scg_summarize.data import Batch
from scg_summarize.train import Trainer, load_config
from scg_summarize.train.objective import StepValues

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

# (SGD, whose update is linear in the gradient: Adam's first steps move every parameter by about its
# learning rate in the direction of its gradient's sign, so a float32 rounding difference in a gradient
# near zero could move a parameter by up to 2 x lr either way; under SGD it moves it by lr times itself)
OVERRIDES = ["data.pad_targets=64", "train.epochs=1", "train.device='cuda'", "train.optimizer='sgd'", "train.lr=0.1"]
ATOL = 1e-5  # on the parameters after 7 SGD steps: >= 10x the float32 rounding of lr x the gradients' sums


def _run(
    corpus: Path, out: Path, name: str, graphed: bool, order: list[Batch]
) -> tuple[list[StepValues], list[torch.Tensor], list[torch.Tensor]]:
    """The steps of a trainer on ``order``, and its parameters before and after them (on the host)."""
    config = load_config(name, OVERRIDES + (["train.cuda_graph=true"] if graphed else []))
    trainer = Trainer(config, corpus, out, quiet=True, log=lambda line: None)
    try:
        before = [p.detach().cpu() for p in trainer.model.parameters()]
        values = [trainer.train_step(b) for b in order]
        if graphed:
            assert trainer.captured is not None and len(trainer.captured.graphs) == 2
        return values, before, [p.detach().cpu() for p in trainer.model.parameters()]
    finally:
        trainer.close()


@pytest.mark.parametrize("name", ["tiny-C2F", "tiny-STANDARD"])
def test_graphs_of_two_shapes_in_one_pool_replay_the_eager_steps(
    synthetic_corpus: Path, tmp_path: Path, name: str
) -> None:
    """A full batch and a batch one row smaller, in the order A A B B A B A: A runs eagerly, is then
    captured (graph 1), B likewise (graph 2, in graph 1's pool), then each graph is replayed after
    the other's. Every step's values and the final parameters equal the eager trainer's on the same
    batches (to float32 rounding of the device's reductions: relative 1e-5 on the values, `ATOL` on
    the parameters after 7 SGD steps, which moved them by more than 100 x `ATOL`)."""
    config = load_config(name, OVERRIDES)
    probe = Trainer(config, synthetic_corpus, tmp_path / "probe", quiet=True, log=lambda line: None)
    try:
        full = next(iter(probe.loader))
    finally:
        probe.close()
    small = full.rows(slice(0, full.size - 1))
    order = [full, full, small, small, full, small, full]
    want, start, want_params = _run(synthetic_corpus, tmp_path / "eager", name, False, order)
    got, _, got_params = _run(synthetic_corpus, tmp_path / "graphed", name, True, order)
    moved = max(float((w - s).abs().max()) for w, s in zip(want_params, start, strict=True))
    assert moved > 100 * ATOL  # (a replay that left the gradients unread would fail the comparison below)
    for i, (w, g) in enumerate(zip(want, got)):
        assert g.tokens == w.tokens, i
        assert g.loss == pytest.approx(w.loss, rel=1e-5), i
        assert g.nll == pytest.approx(w.nll, rel=1e-5), i
        assert (g.norm is None) == (w.norm is None), i
        if w.norm is not None:
            assert g.norm == pytest.approx(w.norm, rel=1e-5), i
    for w, g in zip(want_params, got_params, strict=True):
        torch.testing.assert_close(g, w, rtol=0.0, atol=ATOL)
