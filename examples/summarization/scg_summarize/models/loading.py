"""A trained model from its checkpoint file, without the training code.

The trainer (``scg_summarize.train``) stores ``best.pt`` / ``checkpoint.pt`` as a dict with at
least ``"config"`` (the run configuration as a plain dict: ``{"name", "model": {...}, "data":
{...}, "eval": {...}, ...}``) and ``"model"`` (the state dict). `load_model` rebuilds the
model of its family (``model.family``, `build_model`) from
the ``model`` table alone, so decoding and evaluation can load a run without importing the
trainer (the example's layers go one way: data -> models -> decoding -> evaluation -> train -> commands).
It is the one ``load_model``: the trainer parses the returned configuration itself
(``train.config.Config.from_dict``), decoding goes through ``decoding.load_run``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..data.vocab import Vocab
from ..devices import checked_device
from .config import ModelConfig
from .family import SummarizerFamily
from .registry import build_model

__all__ = [
    "CHECKPOINTS",
    "REQUIRED_KEYS",
    "CheckpointError",
    "check_same_model",
    "load_model",
    "read_checkpoint",
    "run_checkpoint",
]

#: what every checkpoint written by the trainer holds
REQUIRED_KEYS: tuple[str, ...] = ("config", "model")
#: the checkpoints of a run directory, in the order `run_checkpoint` prefers them
CHECKPOINTS: tuple[str, ...] = ("best.pt", "checkpoint.pt")


class CheckpointError(ValueError):
    """A checkpoint that cannot be written or read; the message names the file."""


def read_checkpoint(
    path: str | Path, map_location: str | torch.device = "cpu", required: tuple[str, ...] = REQUIRED_KEYS
) -> dict[str, Any]:
    """The dict stored in a checkpoint file (written by ``train.checkpoint.save_atomic``).

    Raises `CheckpointError` naming ``path`` for a missing, empty, truncated or foreign
    file, or one without the ``required`` keys (instead of ``EOFError``/``UnpicklingError`` from
    deep inside ``torch.load``).
    """
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(
            f"{path}: a folder, not a checkpoint file (a run folder holds best.pt and checkpoint.pt; "
            "scg_summarize.decoding.load_run(path) loads a run)"
        )
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint")
    size = path.stat().st_size
    if size == 0:
        raise CheckpointError(f"{path}: empty file (0 bytes), not a checkpoint")
    try:
        obj = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as err:  # torch raises EOFError, UnpicklingError, RuntimeError, ... for bad bytes
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        first = first if len(first) <= 200 else first[:200].rsplit(" ", 1)[0] + " ..."
        raise CheckpointError(
            f"{path}: not a readable checkpoint ({size} bytes; truncated or not written by "
            f"scg-summarize train: {first})"
        ) from None
    if not isinstance(obj, dict) or any(key not in obj for key in required):
        have = ", ".join(sorted(map(str, obj))) if isinstance(obj, dict) else type(obj).__name__
        raise CheckpointError(
            f"{path}: not an scg-summarize checkpoint (expected the keys "
            f"{', '.join(required)}; found {have[:200] or 'none'})"
        )
    return obj


def run_checkpoint(run_dir: str | Path) -> Path:
    """The checkpoint of a run directory: ``best.pt`` (the validated model), else ``checkpoint.pt``
    (the latest); `CheckpointError` naming the directory when it has neither."""
    run_dir = Path(run_dir)
    for name in CHECKPOINTS:
        if (run_dir / name).is_file():
            return run_dir / name
    raise CheckpointError(
        f"{run_dir}: no checkpoint ({' or '.join(CHECKPOINTS)}); the run has not saved one yet, or is not a run"
    )


def check_same_model(model: nn.Module, state: dict[str, Any], path: str | Path) -> None:
    """``model.load_state_dict(state)``, or a ``ValueError`` naming what does not fit (another
    model size, HIER weights in a C2F model) instead of ``load_state_dict``'s multi-page error."""
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    shapes = sorted(k for k in set(own) & set(state) if tuple(own[k].shape) != tuple(state[k].shape))
    if missing or unexpected or shapes:
        parts = []
        if shapes:
            k = shapes[0]
            parts.append(
                f"{len(shapes)} parameters of another size (e.g. {k}: {tuple(state[k].shape)} in the "
                f"checkpoint, {tuple(own[k].shape)} in the model)"
            )
        if missing:
            parts.append(f"{len(missing)} parameters missing (e.g. {missing[0]})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected parameters (e.g. {unexpected[0]})")
        raise ValueError(
            f"{path}: the checkpoint does not fit this model: {'; '.join(parts)} (another model size or attention?)"
        )
    model.load_state_dict(state)


def check_vocabulary(state: dict[str, Any], vocab: Vocab, path: str | Path, source: str) -> None:
    """Refuse weights trained with another vocabulary than ``vocab`` (read from ``source``): the
    checkpoint's recorded `Vocab.digest` differs (a vocabulary of the same size passes every shape
    check, and the embedding rows would belong to other words). A checkpoint that records none
    (written before the digest was) is not checked."""
    recorded = state.get("vocab")
    if recorded is None or recorded == vocab.digest():
        return
    size = int((state.get("config") or {}).get("model", {}).get("vocab_size", 0))
    sizes = f"{size} words each" if size == len(vocab) else f"{size} words, not {len(vocab)}"
    raise ValueError(
        f"{path}: the weights were trained with another vocabulary than {source} ({sizes}, other words); "
        "use the checkpoint with the corpus and run it was trained on"
    )


def load_model(
    path: str | Path, device: str | torch.device = "cpu", *, vocab: tuple[Vocab, str] | None = None
) -> tuple[SummarizerFamily[Any, Any], dict[str, Any]]:
    """The model stored in a checkpoint and the run configuration as a plain dict.

    ``vocab``: the vocabulary the weights will be read with and where it was read from; weights
    trained with another one are refused (`check_vocabulary`).

    Raises ``ValueError`` naming the file when it is not a model checkpoint, when the ``model``
    table is invalid, when the weights do not fit the configured model or ``vocab``.
    """
    device = checked_device(device, "load_model")  # (else blamed on the file, which torch.load could not map)
    state = read_checkpoint(path, device)
    if vocab is not None:
        check_vocabulary(state, vocab[0], path, vocab[1])
    raw = state["config"]
    if not isinstance(raw, dict) or not isinstance(raw.get("model"), dict):
        raise ValueError(f"{path}: the stored configuration has no [model] table")
    try:
        model = build_model(ModelConfig.from_dict(dict(raw["model"]))).to(device)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"{path}: cannot rebuild the model: {err} (a checkpoint written by an older scg-summarize, "
            f"whose [model] table held every family's options, is not read: train it again with this version)"
        ) from None
    check_same_model(model, state["model"], path)
    return model, raw
