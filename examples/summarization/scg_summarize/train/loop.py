"""The training loop: [`Trainer`][scg_summarize.train.loop.Trainer] (``scg-summarize train``).

Per step (`.step`, a base of `Trainer`): a global batch from the resumable bucketed loader (this
rank's slice under DDP), the objective (`.objective`: NLL for soft attention; the scg surrogate for
C2F, or NLL with probability ``train.alternate`` for +ALTERNATE), backpropagation, gradient
renormalization and the optimizer step. Per epoch: validation perplexity (C2F at its test-time
argmax), the lr schedule, ``checkpoint.pt`` and ``best.pt``. Metrics go to ``RUN_DIR/metrics.jsonl``.

Exact resumption (``checkpoint.pt``, at epoch ends and every ``train.checkpoint_every`` steps):
`.checkpoint` says what it holds, `.resume` how ``Trainer(resume=True)`` continues from it.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import scg

from ..dirlock import DirLock
from .captured import CapturedStep, check_capturable
from .checkpoint import TrainingParts, save_atomic, seed_all, write_param_digest
from .compiled import check_whole_step, compiled_objective
from .config import Config
from .data import load_training_splits, make_loader
from .ddp import DistContext, resolve_device
from .evaluate import validation_metrics
from .fingerprint import check_fingerprint
from .metrics_log import LogWindow, append_record
from .model_init import initial_model
from .objective import build_objective, trained_objectives, unread_options
from .optim import PlateauDecay, build_optimizer
from .precision import autocast_objective
from .progress import (
    PhaseProgress,
    TrainingRecord,
    budget_notice,
    epoch_bar,
    epoch_line,
    step_line,
)
from .resume import open_run
from .run_dir import CHECKPOINT, METRICS, save_best
from .run_state import done_line, training_record
from .selection import selection_value
from .signals import StopRequest
from .step import TrainingStep
from .stopping import RunStopping

__all__ = ["Trainer"]


class Trainer(TrainingStep, RunStopping):
    """Train ``config`` on the prepared corpus ``data_dir``, writing to ``out_dir``.

    Args:
        config: the run configuration.
        data_dir: a prepared corpus (``scg-summarize prepare``).
        out_dir: the run directory (created).
        resume: continue from ``out_dir/checkpoint.pt``.
        quiet: no progress bar.
        log: where human-readable lines go (rank 0 only).
    """

    def __init__(
        self,
        config: Config,
        data_dir: str | Path,
        out_dir: str | Path,
        *,
        resume: bool = False,
        quiet: bool = False,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if not isinstance(config, Config):
            raise TypeError(f"Trainer(config): expected a Config (load_config), got {type(config).__name__}")
        config.validate()  # (one built or changed in Python was not: train.cuda_graph="false" trained as true)
        self.config = config
        self.data_dir = Path(data_dir)
        self.out_dir = Path(out_dir)
        self.quiet = quiet
        tc = config.train
        self.dist = DistContext.from_env(tc.device)
        self.device = resolve_device(tc.device, self.dist.local_rank)
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        if tc.threads > 0:
            torch.set_num_threads(tc.threads)
        seed_all(tc.seed)  # identical initialization on every rank, then per-rank streams for dropout and sampling
        if resume:  # (another corpus is named as such, before its vocabulary size is compared with the model's)
            check_fingerprint(self.out_dir, self.data_dir, config.data.splits, "resume")
        self.train_set, self.valid_set = load_training_splits(self.data_dir, config)
        self.vocab = self.train_set.vocab
        self.model = initial_model(
            config, self.vocab, self.train_set.num_chunks, self.data_dir, self.device, resume=resume, info=self.info
        )
        torch.manual_seed(tc.seed + 1000 * self.dist.rank)
        self.net = self.dist.wrap(self.model, self.device)
        self.optimizer = build_optimizer(self.model, self.model.chunk_encoder_parameters(), tc)
        self.schedule = PlateauDecay(self.optimizer, tc.lr_decay, tc.decay_patience, tc.lr_schedule)
        self.baseline = scg.baselines.EMA(tc.baseline_beta)
        unread = unread_options(tc, trained_objectives(tc.objective, self.model))
        if unread:
            raise ValueError("; ".join(unread))
        self.objective = build_objective(tc.objective, self)  # train.objective (registered objectives)
        if tc.precision == "bf16":  # train.precision: the objective under autocast (`.precision`)
            self.objective = autocast_objective(self.objective, self.device, cache=not tc.cuda_graph)
        if tc.compile:  # train.compile: the objective traced whole (`.compiled`)
            check_whole_step(self, "train.compile")
            self.objective = compiled_objective(self.objective, tc.compile)
        self.captured: CapturedStep | None = None  # train.cuda_graph: the device's part replayed (`.captured`)
        if tc.cuda_graph:
            check_capturable(self)
            self.captured = CapturedStep(functools.partial(self.forward_backward, keep_grads=True))
        self.loader = make_loader(self.train_set, config, train=True, drop_last=self.dist.enabled)
        self.parts = TrainingParts(
            model=self.model,
            optimizer=self.optimizer,
            schedule=self.schedule,
            baseline=self.baseline,
            loader=self.loader,
            window=LogWindow(),
            vocab=self.vocab.digest(),
        )
        self.last_validation_s = 0.0  # wall seconds of the last validation
        self.stopped_by = "epochs"
        self.last_finite: tuple[int, float] | None = None  # (step, training loss per token)
        self.stop = StopRequest(watch_parent=self.dist.enabled and "TORCHELASTIC_RUN_ID" in os.environ)
        self.lock: DirLock | None = None
        if self.dist.is_main:  # one writer per run directory (refuses a second train on --out)
            self.lock = DirLock(self.out_dir, "scg-summarize train").acquire()
        try:
            self.counters = open_run(
                self.parts, config, self.out_dir, self.data_dir, self.device, self.dist.rank, self.info, resume=resume
            )
        except BaseException:
            self.close()
            raise

    def leave_process_group(self) -> None:
        """After `fit`: drop the DistributedDataParallel wrapper, then leave the process group
        (`DistContext.close`, which collects the wrapper: its reducer holds the group)."""
        self.net = self.model
        self.dist.close()

    def close(self) -> None:
        """Release the run directory's lock and the captured step's CUDA graphs (the process group is
        left by `leave_process_group`).

        The captured step runs this trainer's `forward_backward`, so the two refer to each other: left
        to the garbage collector, every graph's memory pool would outlive the trainer until a
        collection ran (a process training one model after another ran out of GPU memory)."""
        self.captured = None
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    # ------------------------------------------------------------------ logging
    def info(self, line: str) -> None:
        if self.dist.is_main:
            self._log(line)

    def record(self, event: str, **values: Any) -> None:
        """Append a metrics line (rank 0)."""
        if not self.dist.is_main:
            return
        line = {"event": event, "step": self.counters.step, "epoch": self._epochs(), **values}
        append_record(self.out_dir / METRICS, line)

    # ------------------------------------------------------------------ checkpoints
    def save(self, name: str = CHECKPOINT) -> None:
        if self.dist.is_main:
            save_atomic(self.parts.checkpoint(self.config, self.counters), self.out_dir / name)
        self.dist.barrier()

    # ------------------------------------------------------------------ the loop
    def _phase(self, name: str, total: int) -> PhaseProgress:
        """Progress lines of a phase after the steps (with ``quiet``: only its first and last line)."""
        return PhaseProgress(
            name, total, self.info if self.dist.is_main else None, every_s=math.inf if self.quiet else 10.0
        )

    def validate(self) -> dict[str, Any]:
        start = time.perf_counter()
        metrics = validation_metrics(self.model, self.valid_set, self.config, self.device, self.dist, self._phase)
        seconds = time.perf_counter() - start
        self.counters.validation_s += seconds
        self.counters.validations += 1
        self.counters.valid_step = self.counters.step
        self.last_validation_s = seconds
        return metrics

    def training_record(self) -> TrainingRecord:
        """What the run has done so far (written to ``RUN_DIR/training.json`` at its end)."""
        return training_record(self.counters, self._epochs(), self.stopped_by, self.config.train)

    def _epochs(self) -> float:
        """The epochs done, with the fraction of the current one."""
        return self.loader.epoch + self.loader.position / max(len(self.loader), 1)

    def fit(self) -> dict[str, Any]:
        """Train until ``train.epochs``, ``train.max_steps`` or the time budget; returns the last
        validation metrics.

        SIGTERM/SIGINT stop the run after the current step with a checkpoint
        (`TrainingStopped`); a non-finite loss stops it with `TrainingDiverged`.
        """
        self.stop.install()
        try:
            return self._fit()
        finally:
            self.stop.restore()

    def _fit(self) -> dict[str, Any]:
        tc = self.config.train
        last: dict[str, Any] = {}
        self._wall_start = time.perf_counter() - self.counters.elapsed
        self._cpu_start = time.process_time() - self.counters.cpu_elapsed
        if tc.time_budget_s:
            self.info(budget_notice(tc.time_budget_s))
        # resumed with its step or time budget spent: finished, once its final validation is made
        # (a stop signal or a kill may have come between its last step and that validation)
        out_of_time = self.counters.step > 0 and self._out_of_steps_or_time()
        if out_of_time and self.counters.valid_step != self.counters.step:
            last = self._final_validation(self.loader.epoch)
        while self.loader.epoch < tc.epochs and not out_of_time:
            epoch = self.loader.epoch
            out_of_time = self._train_epoch(epoch)
            if out_of_time and self._inside_epoch(epoch):
                last = self._final_validation(epoch)  # (the budget ran out inside the epoch)
            else:
                if self.loader.epoch == epoch:  # (its last step ended the run: the loader did not move on)
                    self.loader.set_epoch(epoch + 1)
                last = self._end_epoch(epoch)
            self._tick()
            if self._stop_requested():
                raise self._stopped()
        self._finish()
        return last

    def _inside_epoch(self, epoch: int) -> bool:
        """Whether the loader stands inside ``epoch``: not at its end, nor at the end that
        ``train.max_steps_per_epoch`` cuts it at."""
        tc, position = self.config.train, self.loader.position
        cut = bool(tc.max_steps_per_epoch) and position >= tc.max_steps_per_epoch
        return self.loader.epoch == epoch and 0 < position < len(self.loader) and not cut

    def _final_validation(self, epoch: int) -> dict[str, Any]:
        """The validation after the last step when the step or time budget ends the run inside an
        epoch: validated, recorded, ``best.pt`` and a checkpoint written, as at an epoch's end,
        but without the epoch's schedule step and the family's end-of-epoch hook, so that a run
        extended on resume (a larger ``train.max_steps``) trains on as if it had not stopped."""
        return self._end_epoch(epoch, epoch_end=False)

    def _train_epoch(self, epoch: int) -> bool:
        """The steps left in ``epoch``; True when the run stops after them (`_out_of_steps_or_time`).

        A stop signal mid-epoch saves a checkpoint and raises `TrainingStopped` (at an epoch's
        end the run stops after that epoch's validation)."""
        tc = self.config.train
        bar = self._progress(epoch)
        if self.loader.position == 0 or self.loader.epoch != epoch:  # (each epoch's lines start afresh;
            self.parts.window = LogWindow()  # resumed inside one, the window restored by --resume goes on)
        window = self.parts.window
        if tc.max_steps_per_epoch and self.loader.position >= tc.max_steps_per_epoch:
            self.loader.set_epoch(epoch + 1)  # resumed exactly at a shortened epoch's end
        try:
            for batch in self._batches(epoch):
                window.add(self.train_step(batch))
                self._tick()
                if bar is not None:
                    bar.update(1)
                if self.counters.step % tc.log_every == 0 or self.loader.position == len(self.loader):
                    window = self._log_window(window, bar)
                if tc.throttle_s > 0:
                    time.sleep(tc.throttle_s)
                cut = bool(tc.max_steps_per_epoch) and self.loader.position >= tc.max_steps_per_epoch
                mid_epoch = self.loader.position < len(self.loader) and not cut
                if self._out_of_steps_or_time():  # (before a stop signal: the final validation comes first)
                    return True
                if self._stop_requested() and mid_epoch:
                    self.save()
                    raise self._stopped()
                if tc.checkpoint_every and self.counters.step % tc.checkpoint_every == 0 and mid_epoch:
                    self.save()
                if cut:  # a shortened epoch (train.max_steps_per_epoch) ends here
                    if self.loader.epoch == epoch:
                        self.loader.set_epoch(epoch + 1)
                    return False
            return False
        finally:
            if bar is not None:
                bar.close()

    def _finish(self) -> None:
        """The closing line, the ``end`` metrics line and ``training.json`` (under DDP also each
        rank's parameter digest)."""
        self.info(done_line(self.counters, self.stopped_by, self.config.train.select_metric))
        record = self.training_record()
        self.record(
            "end",
            best_ppl=self.counters.best_ppl,
            best_step=self.counters.best_step,
            elapsed_s=self.counters.elapsed,
            stopped_by=record.stopped_by,
        )  # (CPU seconds: training.json)
        if self.dist.is_main:
            record.write(self.out_dir)
        if self.dist.enabled:
            write_param_digest(self.out_dir, self.dist.rank, self.model)

    def _batches(self, epoch: int) -> Any:
        """The rest of the epoch (nothing when the loader already moved past ``epoch``)."""
        if self.loader.epoch != epoch:
            return iter(())
        return iter(self.loader)

    def _end_epoch(self, epoch: int, *, epoch_end: bool = True) -> dict[str, Any]:
        if epoch_end:
            self.model.end_of_epoch()  # the family's per-epoch step (ABS: max-norm of the embeddings)
        metrics = self.validate()
        if not math.isfinite(metrics["nll"]) or metrics["nll"] >= 50.0:  # ppl is capped at e^50
            self._diverged(
                f"the validation loss after step {self.counters.step} is {metrics['nll']:.4g} per token "
                f"(non-finite, or a perplexity beyond e^50)"
            )
        score = selection_value(metrics, self.config.train.select_metric)
        improved = score < self.counters.best_score
        decayed = self.schedule.step(score) if epoch_end else False
        self.counters.best_ppl = min(self.counters.best_ppl, metrics["ppl"])
        self.counters.last_valid_ppl = float(metrics["ppl"])
        if improved:
            self.counters.best_score, self.counters.best_step = score, self.counters.step
        self.record("valid", **metrics, lr=self.schedule.lr, decayed=decayed)
        self.info(
            epoch_line(
                epoch,
                metrics,
                self.config.train.select_metric,
                self.schedule.lr,
                decayed,
                self.last_validation_s,
                self.model.output_terms,
            )
        )
        if improved and self.dist.is_main:  # best.pt first: see resume._check_best
            save_best(
                self.out_dir,
                self.config,
                self.model,
                self.parts.vocab,
                step=self.counters.step,
                epoch=epoch,
                metrics=metrics,
            )
        self.save()
        return metrics

    def _progress(self, epoch: int) -> Any:
        if self.quiet or not self.dist.is_main or not sys.stderr.isatty():
            return None
        return epoch_bar(len(self.loader), self.loader.position, epoch)

    def _log_window(self, window: LogWindow, bar: Any) -> LogWindow:
        """Write the ``train`` line of ``window`` (and a progress line); returns the next window."""
        values = window.values(self.schedule.lr)
        self.record("train", **values)
        if bar is not None:
            bar.set_postfix(
                loss=f"{values['loss']:.3f}", ppl=f"{values['ppl']:.2f}", tok_s=f"{values['tok_per_s']:.0f}"
            )
        elif not self.quiet:
            epoch, steps = self.loader.epoch + 1, len(self.loader)
            self.info(step_line(values, self.counters.step, self.counters.elapsed, epoch, steps, self.config.train))
        self.parts.window = LogWindow()
        return self.parts.window
