"""Training every model family with one trainer: configuration, objectives (scg for C2F), the
loop, checkpoints, DDP.

=================== ========================================================================
``config``          :class:`Config` and its tables (``[model]``, ``[train]``, ``[data]``, ``[eval]``)
``config_loading``  the named TOML configurations, inheritance, variants, ``--set`` overrides
``schema``          every key's type and range, all problems reported at once
``data``            splits, loaders and the HIER-5x80 / 2x200 re-gridding
``objective``       NLL for soft attention; the scg surrogate for C2F; the registry of objectives
``compiled``        ``train.compile``: the objective traced whole by ``torch.compile``
``self_critical``   Paulus et al.'s self-critical and mixed objectives
``mal_objective``   L_s + L_NLL of MAL (Li et al.)
``optim``           SGD/Adam/Adadelta parameter groups, gradient renormalization, the lr schedules
                    (the paper's and ABS's), max-norm renormalization of embeddings
``checkpoint``      atomic checkpoints and RNG states (clear errors for unreadable/unwritable ones)
``resume``          what ``--resume`` accepts (the saved configuration, a fitting model)
``metrics_log``     ``metrics.jsonl``: appended per line, repaired on resume; the train-line sums
``run_dir``         the run directory's files; ``best.pt`` checked on resume
``fingerprint``     the corpus a run trains on, refused when replaced
``signals``         graceful SIGTERM/SIGINT and torchrun-agent death
``ddp``             ``torch.distributed`` data parallelism
``model_init``      the model a run starts from (``build_model``, word2vec, +PRETRAIN's init_from)
``run_state``       :class:`RunCounters` (steps, best validation, seconds) and ``training.json``
``loop``            :class:`Trainer` (every family: C2F, Paulus, ABS, MAL)
``step``            one optimizer step of the Trainer; :class:`TrainingDiverged`
``stopping``        when the run stops: ``train.max_steps``, the time budget, a signal on any rank
``abs``             ABS's flat (input, title) pairs for the count rows and decoding variants
``evaluate``        validation: perplexity and attention statistics (teacher forcing)
=================== ========================================================================
"""

from .checkpoint import param_digest
from .config import Config, DataConfig, EvalConfig, TrainConfig
from .config_loading import available_configs, load_config
from .loop import Trainer
from .model_init import build_model
from .objective import c2f_objective, mle_objective

__all__ = [
    "Config",
    "DataConfig",
    "EvalConfig",
    "TrainConfig",
    "Trainer",
    "available_configs",
    "build_model",
    "c2f_objective",
    "load_config",
    "mle_objective",
    "param_digest",
]
