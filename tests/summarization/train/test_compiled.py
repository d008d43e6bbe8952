"""``train.compile``: the training objective compiled whole with ``torch.compile(fullgraph=True)``.

The C2F objective (sampled forward, one cost per step with the EMA baseline, scg's declared
surrogate) is captured whole and computes what the eager objective does: the loss, every gradient
and the EMA's state, bit for bit with dynamo's eager backend and the same draws; a trainer with
``train.compile`` takes the eager trainer's steps exactly, its batches padded to a few target
lengths (``data.pad_targets``); what cannot be compiled is refused naming the option.

Two things stood in the way: dynamo refuses ``nn.LSTM`` unless ``torch._dynamo.config.allow_rnn``
(experimental in torch 2.13; `scg_summarize.train.compiled` sets it for the objective's calls), and
the word encoder read its longest chunk to the host to skip the all-padding tail (a data-dependent
integer dynamo cannot trace, and a host read a CUDA graph capture cannot make); inside a
compilation or a capture the encoder runs over the whole width instead (the same states).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from scg_summarize.kernels.backend import forced
from scg_summarize.train import Trainer, load_config
from scg_summarize.train.objective import c2f_objective
from scg_summarize.train.schema import ConfigError
from torch._dynamo.utils import counters

import scg

from ..models_helpers import make_batch, make_model


def test_the_c2f_objective_compiles_whole_and_equals_the_eager_one() -> None:
    model = make_model("c2f", multi=2)
    batch = make_batch(B=3, T=6)
    params = [p for p in model.parameters() if p.requires_grad]
    emas = {"eager": scg.baselines.EMA(0.1), "compiled": scg.baselines.EMA(0.1)}
    structures = {"eager": scg.Declared(), "compiled": scg.Declared()}

    def objective(which: str) -> torch.Tensor:
        result = c2f_objective(model, batch, 3.0, emas[which], 0.5, 0.3, structures[which], False)
        return result.loss

    def run(fn: object, seed: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
        torch.manual_seed(seed)
        loss = fn()  # type: ignore[operator]
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        return loss.detach(), [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]

    torch._dynamo.reset()
    with forced("reference"), torch._dynamo.config.patch(allow_rnn=True):
        compiled = torch.compile(lambda: objective("compiled"), fullgraph=True, backend="eager")
        for seed in range(3):  # (the EMA's averages move from step to step: its state is compared too)
            loss, grads = run(lambda: objective("eager"), seed)
            c_loss, c_grads = run(compiled, seed)
            assert torch.equal(loss, c_loss)
            assert all(torch.equal(a, b) for a, b in zip(grads, c_grads))
            assert any(bool(g.abs().sum() > 0) for g in grads)
            steps = batch.tgt.shape[1] - 1
            for t in range(steps):
                assert torch.equal(emas["eager"].value("nll", t), emas["compiled"].value("nll", t))
    torch._dynamo.reset()


@pytest.mark.parametrize("name", ["tiny-C2F", "tiny-STANDARD", "tiny-ABS"])
def test_a_compiling_trainer_takes_the_eager_trainers_steps(name: str, synthetic_corpus: Path, tmp_path: Path) -> None:
    """Three steps with ``train.compile = 'eager'`` (dynamo's trace, run by the eager backend)
    against three eager steps from the same seed: the same losses, NLLs, token counts, gradient
    norms and parameters after them (to rounding); the targets padded to multiples of 8
    (``data.pad_targets``)."""
    runs = {}
    counters.clear()
    for backend in ("", "eager"):
        options = ["train.epochs=1", "train.max_steps_per_epoch=3", "data.pad_targets=8", f"train.compile='{backend}'"]
        trainer = Trainer(load_config(name, options), synthetic_corpus, tmp_path / (backend or "plain"), quiet=True)
        try:
            batches = iter(trainer.loader)
            steps = [trainer.train_step(next(batches)) for _ in range(3)]
            params = [p.detach().clone() for p in trainer.model.parameters()]
        finally:
            trainer.close()
        runs[backend] = ([(v.loss, v.nll, v.tokens, v.norm) for v in steps], params)
    graphs = counters["stats"]["unique_graphs"]  # (the compiled run's; the eager run traces nothing)
    torch._dynamo.reset()
    lengths = {8 * -(-int(b.tgt.shape[1]) // 8) for b in _first_batches(name, synthetic_corpus, tmp_path, 3)}
    assert 1 <= graphs <= 2 * len(lengths)  # a forward and a backward graph per padded length at most
    (plain, p0), (compiled, p1) = runs[""], runs["eager"]
    # (the compiled backward is AOTAutograd's: its sums may round differently, ~1e-7 after 3 steps)
    for a, b in zip(plain, compiled, strict=True):  # (the norm is None where nothing is clipped: ABS)
        assert (a[3] is None) == (b[3] is None)
        assert pytest.approx([x for x in a if x is not None], rel=1e-6) == [x for x in b if x is not None]
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(p0, p1))
    assert all(nll > 0 and tokens > 0 for _, nll, tokens, _ in plain)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["train.compile='inductor'", "train.objective='self_critical'"], "train.compile needs train.objective in"),
        (["train.compile='eager'", "train.alternate=0.5"], "and no +ALTERNATE"),
        (["train.compile='tvm'"], "train.compile: expected one of '', 'inductor', 'aot_eager', 'eager'"),
        (["data.pad_targets=-1"], "data.pad_targets: expected an integer >= 0"),
    ],
)
def test_what_cannot_be_compiled_is_refused_naming_the_option(options: list[str], words: str) -> None:
    with pytest.raises((ValueError, ConfigError), match=words.replace("+", "\\+")):
        load_config("tiny-C2F", options)


def _first_batches(name: str, corpus: Path, tmp_path: Path, n: int) -> list:  # type: ignore[type-arg]
    """The first ``n`` training batches of a fresh trainer of ``name`` (the same seed, the same order)."""
    options = ["train.epochs=1", f"train.max_steps_per_epoch={n}"]
    trainer = Trainer(load_config(name, options), corpus, tmp_path / "batches", quiet=True)
    try:
        batches = iter(trainer.loader)
        return [next(batches) for _ in range(n)]
    finally:
        trainer.close()


@pytest.mark.parametrize("option", ["train.compile='eager'", "train.cuda_graph=true"])
def test_a_family_whose_step_reads_from_the_device_is_refused_naming_why(
    option: str, synthetic_corpus: Path, tmp_path: Path
) -> None:
    """Paulus's extended vocabulary is counted on the host (`SummarizerFamily.untraceable`): refused
    when the trainer is built (it was a dynamo error from inside the model's first step)."""
    options = [option, "data.pad_targets=8", "train.epochs=1", "train.max_steps_per_epoch=1"]
    config = load_config("tiny-PAULUS-ML", options)
    name = option.split("=")[0]
    with pytest.raises(ValueError, match=rf"{name}: the 'paulus' family's step cannot be traced .*torch.unique"):
        Trainer(config, synthetic_corpus, tmp_path / "run", quiet=True)


def test_a_family_with_its_own_objective_is_refused_when_the_trainer_is_built(
    synthetic_corpus: Path, tmp_path: Path
) -> None:
    options = ["train.compile='eager'", "train.objective='auto'", "train.epochs=1", "train.max_steps_per_epoch=1"]
    config = load_config("tiny-MAL", options)
    with pytest.raises(ValueError, match="train.compile: the 'mal' family trains with its own objective 'mal'"):
        Trainer(config, synthetic_corpus, tmp_path / "run", quiet=True)
