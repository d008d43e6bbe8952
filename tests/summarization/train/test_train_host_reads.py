"""A training step waits for the device once, not once per decoder step.

On a GPU every host read (``.item()``, ``float(t)``, ``bool(t)``, ``t.tolist()``) stalls the host
until the device has run everything queued so far, so a step with one read per decoder step
cannot queue its launches ahead of the device. `Trainer.train_step` reads the loss, the NLL, the
token count, the gradient norm and the objective's terms in one ``tolist()`` after the backward
pass (`StepResult.read`), and makes no other: the word encoders trim their LSTMs to the batch's
`SourceLengths`, counted on the host when it was collated. The C2F padding fill is the EMA's value as a tensor
(`scg.baselines.EMA.value`), and scg's own finiteness reads are left to the trainer's check.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from _host_reads import count_syncs
from scg_summarize.train import Trainer, load_config
from scg_summarize.train.objective import StepResult
from scg_summarize.train.step import TrainingDiverged

ONE_EPOCH = ["train.max_steps_per_epoch=4", "train.epochs=1"]


def _trainer(name: str, data: Path, out: Path, *overrides: str) -> Trainer:
    return Trainer(load_config(name, [*ONE_EPOCH, *overrides]), data, out, quiet=True, log=lambda line: None)


@pytest.mark.parametrize("name", ["tiny-C2F", "tiny-STANDARD"])
def test_a_training_step_reads_the_host_once(synthetic_corpus: Path, tmp_path: Path, name: str) -> None:
    # (SGD, the paper's optimizer: Adam reads its step counters with .item(), but torch keeps them
    # on the host unless the optimizer is capturable, so those reads wait for nothing)
    trainer = _trainer(name, synthetic_corpus, tmp_path / "run", "train.optimizer='sgd'")
    try:
        batches = iter(trainer.loader)
        trainer.train_step(next(batches))  # (the first step makes the EMA's rows and the credit plans)
        batch = next(batches)
        steps = int(batch.tgt.shape[1]) - 1  # decoder steps: a read per step would be this many more
        assert steps >= 5
        with count_syncs() as calls:
            values = trainer.train_step(batch)
        assert calls == ["tolist"]  # the step's values, in one read
        assert values.tokens == int(batch.tgt_mask[:, 1:].sum())
        assert math.isfinite(values.loss) and values.norm is not None and math.isfinite(values.norm)
    finally:
        trainer.close()


def test_a_non_finite_loss_stops_the_run_before_the_optimizer_step(synthetic_corpus: Path, tmp_path: Path) -> None:
    """The loss is checked after the backward pass (in the step's one read), and the parameters
    are never stepped with the non-finite gradients it gave."""
    trainer = _trainer("tiny-C2F", synthetic_corpus, tmp_path / "run")
    try:
        own = trainer.objective

        def poisoned(batch, normalizer):  # type: ignore[no-untyped-def]
            result = own(batch, normalizer)
            return StepResult(
                result.loss * math.nan, result.nll, result.tokens, result.output, result.graph, result.soft
            )

        trainer.objective = poisoned
        before = [p.detach().clone() for p in trainer.model.parameters()]
        with pytest.raises(TrainingDiverged, match=r"the training loss became non-finite at step 1"):
            trainer.train_step(next(iter(trainer.loader)))
        assert all(torch.equal(a, p) for a, p in zip(before, trainer.model.parameters()))
        assert trainer.counters.step == 0
    finally:
        trainer.close()
