"""Run configurations: the four tables of a run and their checks.

A configuration has four tables, each a dataclass: ``[model]`` ([`ModelConfig`][scg_summarize.models.ModelConfig]),
``[train]`` (`TrainConfig`), ``[data]`` (`DataConfig`) and ``[eval]``
(`EvalConfig`). `Config.from_dict` builds and validates one from plain data; named TOML files,
inheritance, size variants and ``--set`` overrides are
`.config_loading` (``load_config``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..decode_options import EVAL_TABLE_OTHER_KEYS, DecodeOptions, option_problems
from ..devices import DEVICE_SETTING, is_device_setting
from ..models.c2f.config import C2FConfig
from ..models.config import ModelConfig
from ..typed import check_field_types
from .schema import COMPILE_BACKENDS, PRECISIONS, ConfigError, check_config

__all__ = [
    "Config",
    "DataConfig",
    "EvalConfig",
    "TrainConfig",
]

OPTIMIZERS: tuple[str, ...] = ("sgd", "adam", "adadelta")
LR_SCHEDULES: tuple[str, ...] = ("after_plateau", "on_plateau")
ROUGE_METRICS: tuple[str, ...] = ("rouge1", "rouge2", "rougeL")
#: the objectives whose step has no host read, so ``train.compile`` can trace it whole and
#: ``train.cuda_graph`` capture it
COMPILABLE_OBJECTIVES: tuple[str, ...] = ("auto", "mle", "c2f_reinforce")


@dataclass
class TrainConfig:
    """Optimization and the scg objective (defaults: the paper, Section 4.4 and 5).

    Attributes:
        optimizer: ``sgd`` (the paper), ``adam`` or ``adadelta`` (ρ = 0.95, ε = 1e-6: MAL's).
        lr: learning rate (SGD 1.0).
        chunk_encoder_lr_scale: the chunk encoder's lr multiplier (the paper: 0.1).
        max_grad_norm: gradients renormalized to this norm when larger (5).
        lr_decay: lr × this at the epoch ends that ``lr_schedule`` picks (0.5; 1: constant lr).
        decay_patience: epochs without improvement before decay starts (0: at the first one).
        lr_schedule: ``after_plateau`` (seq2seq-attn's, the paper's: decay every epoch once the
            validation score stopped improving) or ``on_plateau`` (ABS's: decay only at the epochs
            that do not improve on the best so far).
        pool_batches: batches' worth of shuffled training examples sorted by length together
            (``data.bucket_by``) before they are cut into batches (50; 0: the whole split, as
            ABS: every example sorted by length, cut, and the batch order shuffled each epoch).
        epochs: passes over the training split.
        batch_size: examples per step (over all processes under DDP).
        seed: seeds data order, initialization, dropout and sampling.
        normalize: the loss is Σ NLL divided by the batch size (``batch``) or by the number of
            target tokens (``tokens``).
        discount: γ of the C2F reward-to-go (0.5).
        baseline_beta: β of the per-step EMA baseline (0.1).
        reward_scale: λ, the weight of the score-function (REINFORCE) terms (0.3).
        alternate: +ALTERNATE: probability that a minibatch uses soft (HIER) attention (0.5).
        pretrain / init_from: start from the weights of a trained checkpoint (``init_from``), which
            ``pretrain`` requires: +PRETRAIN (a HIER run's), PAULUS-RL (an ML run's).
        word2vec: a word2vec text file to initialize the embeddings from ("" for none).
        log_every: steps between progress/metrics lines.
        checkpoint_every: steps between mid-epoch checkpoints (0: epoch ends only).
        max_steps_per_epoch: cut epochs short (0: full epochs), for smoke runs.
        max_steps: stop after this many optimizer steps in all, with a final validation (0: no
            limit; ``train.epochs`` still applies). With epochs, the budget documented results use.
        time_budget_s: stop (after checkpointing) when the run has trained and validated this long
            (0: none): a user option; the result then depends on the machine's load.
        device: ``auto`` (CUDA when available), ``cpu``, ``cuda`` or ``cuda:N`` (the form is checked
            here, whether this machine has it when training starts: `devices.checked_device`).
        num_workers: data loader worker processes.
        threads: torch intra-op threads (0: torch's default).
        throttle_s: sleep after every step (only for interruption tests).
        objective: the registered training objective (`.objective`): ``auto`` (C2F's
            surrogate for hard attention, else NLL), ``mle``, ``c2f_reinforce``,
            ``self_critical`` or ``mixed``.
        rl_weight: γ of the mixed objective γ L_rl + (1 − γ) L_ml (0.9984, Paulus et al. 2018).
        rollout_len: words generated per sampled/greedy summary (0: the batch's longest reference).
        reward: the self-critical reward: ``rougeL`` (the paper), ``rouge1`` or ``rouge2``.
        select_metric: what picks ``best.pt`` and drives the lr schedule: ``ppl`` (validation
            perplexity, lower is better) or ``rouge1`` / ``rouge2`` / ``rougeL`` (greedy
            decoding of the first ``select_examples`` validation examples, higher is better).
        select_examples: validation examples decoded for a ROUGE ``select_metric``.
        compile: ``torch.compile`` the objective whole with this backend (``inductor``,
            ``aot_eager``, ``eager``; "" runs it eagerly): `.compiled`. Needs the ``mle`` or
            ``c2f_reinforce`` objective, no +ALTERNATE and one process; compiles once per target
            length (``data.pad_targets``).
        precision: ``fp32``, or ``bf16``: the objective (forward pass and loss) under bf16
            autocast (`.precision`); backward, clipping, the optimizer step and validation in fp32.
        cuda_graph: replay the forward and backward passes of each step from a CUDA graph, one
            per batch shape (`.captured`): the first batch of a shape runs eagerly, the second
            is captured; the optimizer steps eagerly after the step's one host read. Needs a
            CUDA device, ``data.pad_targets`` > 0 (it bounds the graphs), ``normalize = 'batch'``,
            the ``mle`` or ``c2f_reinforce`` objective, no +ALTERNATE, no ``compile`` and one process.
    """

    optimizer: str = "sgd"
    lr: float = 1.0
    chunk_encoder_lr_scale: float = 0.1
    max_grad_norm: float = 5.0
    lr_decay: float = 0.5
    decay_patience: int = 0
    lr_schedule: str = "after_plateau"
    pool_batches: int = 50
    epochs: int = 15
    batch_size: int = 16
    seed: int = 1
    normalize: str = "batch"
    discount: float = 0.5
    baseline_beta: float = 0.1
    reward_scale: float = 0.3
    alternate: float = 0.0
    pretrain: bool = False
    init_from: str = ""
    word2vec: str = ""
    log_every: int = 50
    checkpoint_every: int = 0
    max_steps_per_epoch: int = 0
    max_steps: int = 0
    time_budget_s: float = 0.0
    device: str = "auto"
    num_workers: int = 0
    threads: int = 0
    throttle_s: float = 0.0
    objective: str = "auto"
    rl_weight: float = 0.9984
    rollout_len: int = 0
    reward: str = "rougeL"
    select_metric: str = "ppl"
    select_examples: int = 200
    compile: str = ""
    precision: str = "fp32"
    cuda_graph: bool = False

    def validate(self) -> None:
        check_field_types(
            self, "train."
        )  # (built in Python: cuda_graph="false" was taken as true, lr="0.1" failed on <=)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"train.optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"train.lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        if self.pool_batches < 0:
            raise ValueError(f"train.pool_batches must be >= 0, got {self.pool_batches}")
        if self.normalize not in ("batch", "tokens"):
            raise ValueError(f"train.normalize must be 'batch' or 'tokens', got {self.normalize!r}")
        if not 0.0 <= self.discount <= 1.0:
            raise ValueError(f"train.discount must be in [0, 1], got {self.discount}")
        if not 0.0 < self.baseline_beta <= 1.0:
            raise ValueError(f"train.baseline_beta must be in (0, 1], got {self.baseline_beta}")
        if not 0.0 <= self.alternate <= 1.0:
            raise ValueError(f"train.alternate must be in [0, 1], got {self.alternate}")
        for key in ("batch_size", "epochs"):  # (epochs = 0 trains nothing and writes no checkpoint)
            if getattr(self, key) < 1:
                raise ValueError(f"train.{key} must be at least 1, got {getattr(self, key)}")
        if self.lr <= 0:
            raise ValueError(f"train.lr must be positive, got {self.lr}")
        from .objective import objective_names  # lazy: the registry imports the models

        if self.objective not in objective_names():
            raise ValueError(f"train.objective must be one of {objective_names()}, got {self.objective!r}")
        if not 0.0 <= self.rl_weight <= 1.0:
            raise ValueError(f"train.rl_weight must be in [0, 1], got {self.rl_weight}")
        if self.reward not in ROUGE_METRICS or self.select_metric not in ("ppl", *ROUGE_METRICS):
            raise ValueError(
                f"train.reward must be one of {ROUGE_METRICS} and train.select_metric 'ppl' or one of "
                f"them, got {self.reward!r} and {self.select_metric!r}"
            )
        if self.rollout_len < 0 or self.select_examples < 1:
            raise ValueError("train.rollout_len must be >= 0 and train.select_examples positive")
        if self.compile not in COMPILE_BACKENDS:
            raise ValueError(f"train.compile must be one of {COMPILE_BACKENDS}, got {self.compile!r}")
        if self.compile and (self.objective not in COMPILABLE_OBJECTIVES or self.alternate > 0):
            raise ValueError(
                f"train.compile needs train.objective in {COMPILABLE_OBJECTIVES} and no +ALTERNATE (the others "
                f"read values to the host each step), got {self.objective!r} and alternate = {self.alternate}"
            )
        if self.precision not in PRECISIONS:
            raise ValueError(f"train.precision must be one of {PRECISIONS}, got {self.precision!r}")
        if not is_device_setting(self.device):  # (a saved GPU run is still read on a CPU: the form only)
            raise ValueError(f"train.device must be {DEVICE_SETTING}, got {self.device!r}")
        if self.cuda_graph and (
            self.objective not in COMPILABLE_OBJECTIVES
            or self.alternate > 0
            or self.normalize != "batch"
            or self.compile
        ):
            raise ValueError(
                f"train.cuda_graph needs train.objective in {COMPILABLE_OBJECTIVES}, no +ALTERNATE, "
                "train.normalize = 'batch' and train.compile = '' (a graph replays one objective with one "
                f"normalizer, and reads nothing on the host), got {self.objective!r}, alternate = "
                f"{self.alternate}, {self.normalize!r} and {self.compile!r}"
            )


@dataclass
class DataConfig:
    """Which splits, target truncation and chunk grid.

    Attributes:
        train_split / valid_split / test_split: split names of the prepared corpus.
        max_target_len: truncate training targets to this many words (0: as prepared).
        regrid: ``[M, N]``: re-cut the first M·N words into M chunks of N (HIER-5x80,
            HIER-2x200 on a corpus prepared with the grid layout; ``[]``: as prepared).
        bucket_by: the length batches share (``tgt``, ``src``, ``both``, ``none``).
        pad_targets: pad every training batch's targets to a multiple of this many positions
            (0: the batch's longest): a compiled step (``train.compile``) compiles once per length,
            a captured one (``train.cuda_graph``) captures a graph per length.
    """

    train_split: str = "train"
    valid_split: str = "valid"
    test_split: str = "test"
    max_target_len: int = 0
    regrid: list[int] = field(default_factory=list)
    bucket_by: str = "both"
    pad_targets: int = 0

    @property
    def splits(self) -> list[str]:
        """The run's splits: training, validation and test (the corpus fingerprint covers them)."""
        return [self.train_split, self.valid_split, self.test_split]

    def validate(self) -> None:
        check_field_types(self, "data.")
        if self.regrid and (len(self.regrid) != 2 or min(self.regrid) < 1):
            raise ValueError(f"data.regrid must be [M, N] with positive M, N, got {self.regrid}")


@dataclass
class EvalConfig:
    """The ``[eval]`` table: decoding for ROUGE after training (``train --rouge``, the demo) and the
    run's defaults for ``summarize``/``evaluate``.

    In TOML (and ``config.json``) the table is flat: its keys are the fields of `DecodeOptions`
    (``beam_size``, ``max_len``, ``unk``, ...; a key left out takes `DecodeOptions`' default)
    plus ``batch_size`` and ``max_examples``.

    Attributes:
        decode: the search settings.
        batch_size: examples decoded at once.
        max_examples: evaluate only the first N test examples (0: all).
    """

    decode: DecodeOptions = field(default_factory=DecodeOptions)
    batch_size: int = 32
    max_examples: int = 0

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> EvalConfig:
        """An ``[eval]`` table (flat, see the class docstring); raises `ConfigError` listing every bad key."""
        problems = eval_problems(table)
        if problems:
            raise ConfigError(problems)
        own = {key: table[key] for key in EVAL_TABLE_OTHER_KEYS if key in table}
        return cls(decode=DecodeOptions.from_eval_table(table), **own)

    def to_table(self) -> dict[str, Any]:
        """The flat ``[eval]`` table (the inverse of `from_table`)."""
        return {**self.decode.to_dict(), "batch_size": self.batch_size, "max_examples": self.max_examples}

    def validate(self) -> None:
        check_field_types(self, "eval.")
        if self.batch_size < 1 or self.max_examples < 0:
            raise ValueError("eval.batch_size must be positive and eval.max_examples non-negative")


def eval_problems(table: Any) -> list[str]:
    """Every problem of a raw ``[eval]`` table, one line each (``eval.KEY: expected ..., got ...``)."""
    if not isinstance(table, Mapping):
        return [f"eval: expected a table of options ([eval] in TOML), got {table!r}"]
    problems = option_problems(table, prefix="eval.", also_known=EVAL_TABLE_OTHER_KEYS)
    for key, low in (("batch_size", 1), ("max_examples", 0)):
        value = table.get(key, low)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            problems.append(f"eval.{key}: expected an integer >= {low}, got {value!r}")
    return problems


@dataclass
class Config:
    """A full run configuration (see the module docstring)."""

    name: str = "custom"
    description: str = ""
    model: ModelConfig = field(default_factory=C2FConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    def validate(self) -> None:
        self.model.validate()
        self.train.validate()
        self.data.validate()
        self.eval.validate()
        if self.train.alternate > 0 and not (isinstance(self.model, C2FConfig) and self.model.attention == "c2f"):
            raise ValueError("train.alternate (+ALTERNATE) needs model.attention = 'c2f'")
        if self.train.cuda_graph and self.data.pad_targets < 1:
            raise ValueError(
                "train.cuda_graph needs data.pad_targets > 0: a graph is captured per padded target length "
                "(the longest summary's positions, <s> and </s> included, give one graph)"
            )

    def to_dict(self) -> dict[str, Any]:
        """The configuration as plain data (``config.json``; the ``[eval]`` table flat)."""
        return {**asdict(self), "eval": self.eval.to_table()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        """Build and validate a configuration; raises `ConfigError` listing every
        bad key at once (`check_config`)."""
        model = data.get("model", {})
        family: type = ModelConfig
        if isinstance(model, dict):  # the family's own dataclass (an unknown key names the family)
            try:
                family, model = ModelConfig.family_table(model, f"configuration {data.get('name', '')!r}")
                data = {**data, "model": model}
            except ValueError as err:
                raise ConfigError([str(err)]) from None
        tables: dict[str, type] = {"model": family, "train": TrainConfig, "data": DataConfig}
        problems = check_config({k: v for k, v in data.items() if k != "eval"}, tables, ("eval",))
        problems += eval_problems(data.get("eval", {}))
        if problems:
            raise ConfigError(problems)
        parts: dict[str, Any] = {key: cls_(**dict(data.get(key, {}))) for key, cls_ in tables.items()}
        parts["eval"] = EvalConfig.from_table(data.get("eval", {}))
        config = cls(name=str(data.get("name", "custom")), description=str(data.get("description", "")), **parts)
        config.validate()
        return config
