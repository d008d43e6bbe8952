"""A trained model from its checkpoint file, without the training code.

The trainer (``scg_summarize.train``) stores ``best.pt`` / ``checkpoint.pt`` as a dict with at
least ``"config"`` (the run configuration as a plain dict: ``{"name", "model": {...}, "data":
{...}, "eval": {...}, ...}``) and ``"model"`` (the state dict). :func:`load_model` rebuilds the
model of its family (``model.family``, :func:`~scg_summarize.models.registry.build_model`) from
the ``model`` table alone, so decoding and evaluation can load a run without importing the
trainer (the example's layers go one way: data -> models -> decoding -> evaluation -> train -> commands).
``scg_summarize.train.loop.load_model`` wraps it and also parses the full configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from .config import ModelConfig
from .registry import build_model
from .summarizer import Summarizer

__all__ = ["load_model", "read_checkpoint"]


def read_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The dict stored in a checkpoint file; ``ValueError`` naming the file when it is missing,
    unreadable (truncated, not a torch file) or not a dict."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such checkpoint file")
    try:
        state = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as err:  # torch raises RuntimeError, EOFError, UnpicklingError... for damaged files
        raise ValueError(f"{path}: not a readable checkpoint ({type(err).__name__}: {err})") from None
    if not isinstance(state, dict):
        raise ValueError(f"{path}: a checkpoint must hold a dict, found {type(state).__name__}")
    return state


def load_model(path: str | Path, device: str | torch.device = "cpu") -> tuple[Summarizer, dict[str, Any]]:
    """The model stored in a checkpoint and the run configuration as a plain dict.

    Raises ``ValueError`` naming the file when it lacks ``config``/``model``, when the ``model``
    table is invalid, or when the weights do not fit the configured model.
    """
    state = read_checkpoint(path, device)
    missing = [key for key in ("config", "model") if key not in state]
    if missing:
        raise ValueError(f"{path}: not a model checkpoint (no {' and no '.join(repr(m) for m in missing)})")
    raw = state["config"]
    if not isinstance(raw, dict) or not isinstance(raw.get("model"), dict):
        raise ValueError(f"{path}: the stored configuration has no [model] table")
    try:
        model: Summarizer = build_model(ModelConfig.from_dict(dict(raw["model"]))).to(device)  # type: ignore[assignment]
        model.load_state_dict(state["model"])
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{path}: cannot rebuild the model: {err}") from None
    return model, raw
