"""Every family with each training option a user may set (slow: a matrix of short runs): a
configuration either trains its steps, or is refused with a `ValueError` naming an option
(``train.…``, ``data.…``, ``model.…``), never a traceback from inside the model or torch.
Three of these pairs were such tracebacks once: MAL under ``train.precision = 'bf16'``, ABS and
Paulus under ``train.compile``."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from scg_summarize.train import Trainer, load_config

SMALL = ["model.emb_dim=8", "model.hidden=8"]
FAMILIES = {
    "ABS": SMALL,
    "MAL+SUATT": ["model.emb_dim=8", "model.hidden=6"],
    "PAULUS-ML+RL": SMALL,
    "tiny-C2F+MULTI2": [],
    "tiny-STANDARD+COPY": [],
}
OPTIONS = [
    "",
    "train.objective='self_critical'",
    "train.objective='mixed'",
    "train.objective='mle'",
    "train.objective='c2f_reinforce'",
    "train.select_metric='rougeL'",
    "train.precision='bf16'",
    "train.compile='eager'",
    "data.regrid=[2, 20]",
    "train.normalize='tokens'",
    "train.discount=0.5",
    "train.reward='rouge2'",
    "train.checkpoint_every=1",
    "train.optimizer='adam'",
    "data.max_target_len=3",
    "data.bucket_by='target'",
    "train.alternate=0.5",
]
NAMED = re.compile(r"\b(train|data|model)\.[a-z_]+")


@pytest.mark.slow
@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("name", list(FAMILIES))
def test_an_option_trains_or_is_refused_by_name(name: str, option: str, synthetic_corpus: Path, tmp_path: Path) -> None:
    overrides = [*FAMILIES[name], "train.epochs=1", "train.max_steps_per_epoch=2", "train.batch_size=4"]
    try:
        config = load_config(name, [*overrides, *([option] if option else [])])
        trainer = Trainer(config, synthetic_corpus, tmp_path / "run", quiet=True, log=lambda line: None)
    except ValueError as refused:  # (ConfigError is one)
        assert NAMED.search(str(refused)), str(refused)
        return
    try:
        trainer.fit()
        assert trainer.counters.step == 2 and math.isfinite(trainer.last_finite[1] if trainer.last_finite else math.nan)
    finally:
        trainer.close()
