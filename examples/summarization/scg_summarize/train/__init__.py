"""Training the summarizer: configuration, objectives (scg for C2F), the loop, checkpoints, DDP.

=============== ==========================================================================
``config``      :class:`Config` and the named TOML configurations (``--set`` overrides)
``schema``      every key's type and range, all problems reported at once
``data``        splits, loaders and the HIER-5x80 / 2x200 re-gridding
``objective``   NLL for soft attention; the scg surrogate for C2F
``optim``       SGD/Adam parameter groups, gradient renormalization, the lr schedule
``checkpoint``  atomic checkpoints and RNG states (clear errors for unreadable/unwritable ones)
``resume``      what ``--resume`` accepts (the saved configuration, a fitting model)
``metrics_log`` ``metrics.jsonl``: appended per line, repaired on resume
``fingerprint`` the corpus a run trains on, refused when replaced
``signals``     graceful SIGTERM/SIGINT and torchrun-agent death
``ddp``         ``torch.distributed`` data parallelism
``loop``        :class:`Trainer`
``evaluate``    validation: perplexity and attention statistics (teacher forcing)
=============== ==========================================================================
"""

from .config import Config, DataConfig, EvalConfig, TrainConfig, available_configs, load_config
from .loop import Trainer, build_model, load_model, param_digest
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
    "load_model",
    "mle_objective",
    "param_digest",
]
