"""``train.cuda_graph`` (`scg_summarize.train.captured`): what a captured step refuses, and its
plumbing on the CPU with torch.cuda's stream and graph calls made inert (a "capture" then runs the
step once, eagerly, and a replay does nothing). What a real capture does on a device is not tested
here: it needs a GPU (``bash scripts/gpu_check.sh graph``)."""

from __future__ import annotations

import functools
import gc
import weakref
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from scg_summarize.data import SourceLengths
from scg_summarize.train import Trainer, load_config
from scg_summarize.train.captured import CapturedStep, batch_shape, rounded
from torch.utils._python_dispatch import TorchDispatchMode

GRAPHED = ["train.cuda_graph=true", "data.pad_targets=64", "train.epochs=1", "train.max_steps_per_epoch=3"]


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("train.normalize='tokens'", "'tokens'"),
        ("train.alternate=0.5", "alternate = 0.5"),
        ("train.objective='self_critical'", "'self_critical'"),
        ("train.compile='eager'", "'eager'"),
    ],
)
def test_what_one_graph_cannot_replay_is_refused_when_the_configuration_is_read(override: str, named: str) -> None:
    with pytest.raises(ValueError, match="train.cuda_graph needs train.objective in") as err:
        load_config("tiny-C2F", [*GRAPHED, override])
    assert named in str(err.value)


def test_unpadded_targets_are_refused() -> None:
    with pytest.raises(ValueError, match=r"train.cuda_graph needs data.pad_targets > 0"):
        load_config("tiny-C2F", ["train.cuda_graph=true"])


def test_a_trainer_on_the_cpu_refuses_a_captured_step(synthetic_corpus: Path, tmp_path: Path) -> None:
    config = load_config("tiny-C2F", GRAPHED)
    with pytest.raises(
        ValueError, match=r"train.cuda_graph needs a CUDA device, got train.device = 'auto' \(resolved to cpu\)"
    ):
        Trainer(config, synthetic_corpus, tmp_path / "run", quiet=True, log=lambda line: None)


def test_the_family_s_own_objective_is_refused(synthetic_corpus: Path, tmp_path: Path) -> None:
    config = load_config("tiny-MAL", [*GRAPHED, "train.objective='auto'"])
    with pytest.raises(ValueError, match="train.cuda_graph: the 'mal' family trains with its own objective 'mal'"):
        Trainer(config, synthetic_corpus, tmp_path / "run", quiet=True, log=lambda line: None)


@pytest.fixture
def inert_cuda(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch.cuda's stream and graph calls as no-ops, recording what was asked: a capture runs its
    block eagerly once (recorded with the memory pool it was given), a replay does nothing."""
    calls: list[str] = []
    pools: list[object] = []

    class Inert:
        def wait_stream(self, other: object) -> None: ...

        def replay(self) -> None:
            calls.append("replay")

    def graph(g: object, pool: object = None) -> Any:
        calls.append("capture" if pool is None else f"capture in pool {pools.index(pool)}")
        return nullcontext()

    def pool_handle() -> object:
        pools.append(object())
        return pools[-1]

    def stream(s: object) -> Any:
        calls.append("side stream")
        return nullcontext()

    monkeypatch.setattr(torch.cuda, "Stream", Inert)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: Inert())
    monkeypatch.setattr(torch.cuda, "stream", stream)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Inert)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", pool_handle)
    return calls


def _trainer(corpus: Path, out: Path) -> Trainer:
    # (the CPU trainer refuses train.cuda_graph: the same padding, the step captured by hand)
    config = load_config("tiny-C2F", [o for o in GRAPHED if o != "train.cuda_graph=true"])
    return Trainer(config, corpus, out, quiet=True, log=lambda line: None)


def test_a_shape_runs_eagerly_then_is_captured_and_its_steps_are_the_eager_steps(
    synthetic_corpus: Path, tmp_path: Path, inert_cuda: list[str]
) -> None:
    """The first batch of a shape runs on a side stream, the second is captured and replayed
    (with inert calls: run once), with the gradients zeroed in place: both steps give the eager
    trainer's values and parameters bit for bit (the same seeds, the same batches). A third batch
    is copied into the captured inputs, and the gradient tensors are the same throughout."""
    eager = _trainer(synthetic_corpus, tmp_path / "eager")
    try:
        batches = [b for b, _ in zip(eager.loader, range(3))]
        want = []
        for b in batches[:2]:
            values = eager.train_step(b)
            want.append((values, [p.detach().clone() for p in eager.model.parameters()]))
    finally:
        eager.close()
    trainer = _trainer(synthetic_corpus, tmp_path / "graphed")
    try:
        step = trainer.captured = CapturedStep(functools.partial(trainer.forward_backward, keep_grads=True))
        grads = None
        for i, b in enumerate(batches[:2]):
            values = trainer.train_step(b)
            assert values == want[i][0]
            assert all(torch.equal(a, p) for a, p in zip(want[i][1], trainer.model.parameters()))
            ids = [id(p.grad) for p in trainer.model.parameters()]
            assert grads is None or ids == grads  # (zeroed in place, never freed)
            grads = ids
        assert inert_cuda == ["side stream", "capture in pool 0", "replay"]
        (captured,) = step.graphs.values()
        assert step.warm == {batch_shape(captured.inputs)}
        inputs = captured.inputs
        trainer.train_step(batches[2])
        assert inert_cuda[-1] == "replay" and inert_cuda.count("capture in pool 0") == 1
        padded, _ = trainer.step_inputs(batches[2])
        assert captured.inputs is inputs and torch.equal(inputs.tgt, padded.tgt) and torch.equal(inputs.src, padded.src)
        assert trainer.counters.step == 3
    finally:
        trainer.close()


def test_a_new_shape_warms_up_and_gets_a_graph_of_its_own(
    synthetic_corpus: Path, tmp_path: Path, inert_cuda: list[str]
) -> None:
    trainer = _trainer(synthetic_corpus, tmp_path / "run")
    try:
        step = trainer.captured = CapturedStep(functools.partial(trainer.forward_backward, keep_grads=True))
        batch = next(iter(trainer.loader))
        smaller = batch.rows(slice(0, batch.size - 1))  # (an epoch's last, smaller batch)
        for b in (batch, batch, smaller, smaller, batch):
            trainer.train_step(b)
        assert len(step.graphs) == 2 and len(step.warm) == 2
        pooled = "capture in pool 0"  # (every graph in the one pool: the memory of the largest step)
        assert inert_cuda == ["side stream", pooled, "replay", "side stream", pooled, "replay", "replay"]
    finally:
        trainer.close()


def test_closing_the_trainer_frees_its_graphs_without_a_garbage_collection(
    synthetic_corpus: Path, tmp_path: Path, inert_cuda: list[str]
) -> None:
    """The captured step and the trainer refer to each other; `Trainer.close` drops the step, so its
    graphs (and their memory pool) go with the last reference, not at a later collection."""
    trainer = _trainer(synthetic_corpus, tmp_path / "run")
    trainer.captured = CapturedStep(functools.partial(trainer.forward_backward, keep_grads=True))
    batch = next(iter(trainer.loader))
    for b in (batch, batch):
        trainer.train_step(b)
    assert len(trainer.captured.graphs) == 1
    captured = weakref.ref(trainer.captured)
    gc.disable()
    try:
        trainer.close()
        assert captured() is None
    finally:
        gc.enable()


def test_source_lengths_in_one_power_of_two_share_a_graph(
    synthetic_corpus: Path, tmp_path: Path, inert_cuda: list[str]
) -> None:
    """The word encoders' steps are part of a graph's shape: batches whose `SourceLengths` round
    up to the same powers of two replay one graph (run for the rounded steps); a longer bound is a
    shape of its own."""
    trainer = _trainer(synthetic_corpus, tmp_path / "run")
    try:
        step = trainer.captured = CapturedStep(functools.partial(trainer.forward_backward, keep_grads=True))
        full = next(iter(trainer.loader))
        _, M, N = full.src.shape
        words = torch.arange(N) < 3  # (the synthetic chunks are full: every chunk cut to 3 words)
        batch = replace(full, src=full.src * words, src_mask=full.src_mask & words)
        batch.lengths = SourceLengths.of(batch.src_mask)
        assert batch.lengths.chunk == 3
        same = replace(batch, lengths=replace(batch.lengths, chunk=4))  # (a bound in the same power of two)
        longer = replace(batch, lengths=replace(batch.lengths, chunk=5))
        for b in (batch, same, longer, longer):
            trainer.train_step(b)
        pooled = "capture in pool 0"
        assert inert_cuda == ["side stream", pooled, "replay", "side stream", pooled, "replay"]
        assert [key[1].chunk for key in step.graphs if key[1] is not None] == [4, 8]
    finally:
        trainer.close()


#: aten ops that wait for the device on CUDA (their result's size or value goes to the host), which
#: a capture refuses; boolean-mask indexing is one too (`_WaitsForTheDevice`)
_WAITING = {"_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique2", "unique_dim", "repeat_interleave"}


class _WaitsForTheDevice(TorchDispatchMode):
    """Records the aten ops that would make the host wait for a CUDA device."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__
        masks = args[1] if name in ("index", "index_put", "index_put_") else ()
        if name in _WAITING or any(isinstance(m, torch.Tensor) and m.dtype == torch.bool for m in masks):
            self.seen.append(name)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", ["tiny-C2F", "tiny-STANDARD"])
def test_the_captured_part_of_a_step_makes_no_op_that_waits_for_the_device(
    synthetic_corpus: Path, tmp_path: Path, name: str
) -> None:
    """What a capture records, `Trainer.forward_backward` on a warm shape's batch with its source
    lengths rounded (`rounded`), runs no aten op that reads a value or a size back to the host on
    CUDA (on the CPU they run, and are seen here): the word encoders trim their LSTMs to the
    batch's `SourceLengths`, counted on the host; without them they read the mask. (The Triton
    kernels' launchers are not on this path on the CPU; the GPU run of ``gpu_check.sh graph``
    captures them.)"""
    config = load_config(name, ["data.pad_targets=64", "train.epochs=1", "train.max_steps_per_epoch=2"])
    trainer = Trainer(config, synthetic_corpus, tmp_path / "run", quiet=True, log=lambda line: None)
    try:
        first, second = (b for b, _ in zip(trainer.loader, range(2)))
        trainer.train_step(first)  # (the warm-up a shape gets: the EMA's rows, the credit plan)
        inputs, normalizer = trainer.step_inputs(second)
        inputs = rounded(inputs)
        assert inputs.lengths is not None
        with _WaitsForTheDevice() as mode:
            trainer.forward_backward(inputs, normalizer, keep_grads=True)
        assert mode.seen == []
        with _WaitsForTheDevice() as mode:  # (the check sees what it looks for: the encoder's own read)
            trainer.forward_backward(replace(inputs, lengths=None), normalizer, keep_grads=True)
            _ = inputs.tgt[inputs.tgt_mask]
        assert mode.seen == ["_local_scalar_dense", "index"]
    finally:
        trainer.close()


def test_padded_targets_leave_a_soft_step_unchanged(synthetic_corpus: Path, tmp_path: Path) -> None:
    """A captured step pads every batch's targets to one length: on a deterministic (soft,
    dropout-free) model the padded positions change neither the NLL, the token count nor any
    gradient; a length shorter than the batch's targets is refused."""
    config = load_config("tiny-STANDARD", ["model.dropout=0.0", "train.max_steps_per_epoch=1", "train.epochs=1"])
    trainer = Trainer(config, synthetic_corpus, tmp_path / "run", quiet=True, log=lambda line: None)
    try:
        batch = next(iter(trainer.loader))
        T = int(batch.tgt.shape[1])
        params = [p for p in trainer.model.parameters() if p.requires_grad]
        got = []
        for b in (batch, batch.with_target_length(T + 5)):
            result, _ = trainer.forward_backward(*trainer.step_inputs(b))
            grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in params]
            got.append((result.read(), grads))
        (plain, g0), (padded, g1) = got
        assert padded.tokens == plain.tokens and abs(padded.nll - plain.nll) <= 1e-5 * abs(plain.nll)
        assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(g0, g1))
        assert any(bool(g.abs().sum() > 0) for g in g0)
        with pytest.raises(ValueError, match=f"a batch has targets of {T} positions, more than the {T - 1} it is"):
            batch.with_target_length(T - 1)
    finally:
        trainer.close()
