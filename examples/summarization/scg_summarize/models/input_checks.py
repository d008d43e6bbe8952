"""What a family's ``forward`` / ``encode`` / ``advance`` / ``step`` is given, checked once for every
family (`.family`'s `SummarizerFamily` runs these checks before them): dtype, rank, shapes, batch
sizes and devices, all read from the tensors' metadata (never their values: no host read, so no
synchronisation on a GPU, and nothing for torch.compile or a CUDA graph to trip on).

Ids in the vocabulary and a tgt_mask that agrees with the ids would need their values: unchecked.
"""

from __future__ import annotations

import torch
from torch import nn

from .common.decoder import DecoderState

__all__ = ["check_on_model", "check_prev_tokens", "check_source", "check_state", "check_target", "model_device"]


def _found(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of dtype {str(value.dtype).removeprefix('torch.')} and shape {tuple(value.shape)}"
    return type(value).__name__


def _check_ids(where: str, name: str, ids: object, form: str) -> torch.Tensor:
    """``ids`` if it is an int64 tensor of ``len(form)`` dimensions with none empty."""
    if not isinstance(ids, torch.Tensor) or ids.dtype != torch.long:
        raise TypeError(f"{where}({name}): expected int64 (long) word ids {form}, got {_found(ids)}")
    if ids.dim() != form.count(",") + 1 or ids.numel() == 0:
        raise ValueError(f"{where}({name}): expected word ids {form} with no size 0, got {_found(ids)}")
    return ids


def _check_mask(where: str, name: str, mask: object, ids: torch.Tensor, ids_name: str) -> None:
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"{where}({name}): expected a bool tensor, got {_found(mask)}")
    if mask.shape != ids.shape or mask.device != ids.device:
        raise ValueError(
            f"{where}({name}): expected the shape {tuple(ids.shape)} of {ids_name} on {ids.device}, "
            f"got {tuple(mask.shape)} on {mask.device}"
        )


def check_source(where: str, src: object, src_mask: object) -> None:
    """``src`` int64 ``(B, M, N)``, ``src_mask`` bool of its shape and device, no size 0 (an empty
    batch, chunk or grid failed deep inside torch: ``max(): Expected reduction dim``)."""
    _check_mask(where, "src_mask", src_mask, _check_ids(where, "src", src, "(B, M, N)"), "src")


def check_target(where: str, tgt: object, tgt_mask: object, src: torch.Tensor) -> None:
    """``tgt`` int64 ``(B, T)`` with ``src``'s B, its device and T >= 2 (``<s>`` and a word to score),
    ``tgt_mask`` bool of its shape and device."""
    tgt = _check_ids(where, "tgt", tgt, "(B, T)")
    if tgt.shape[0] != src.shape[0] or tgt.device != src.device:
        raise ValueError(
            f"{where}(tgt): expected src's {src.shape[0]} examples on {src.device}, got {tgt.shape[0]} on {tgt.device}"
        )
    if tgt.shape[1] < 2:
        raise ValueError(f"{where}(tgt): expected T >= 2 positions (<s> and the words it predicts), got {tgt.shape[1]}")
    _check_mask(where, "tgt_mask", tgt_mask, tgt, "tgt")


def check_prev_tokens(model: nn.Module, prev_tokens: object, rows: torch.Tensor, method: str = "step") -> None:
    """``prev_tokens`` int64 ``(R,)`` with the R rows of ``rows`` (a state tensor: its first dimension
    and its device are read), on ``rows``' device (the model's: the state comes from its `encode`).
    ``model`` and ``method`` name the call, in the error only: nothing is formatted on every step."""
    if not isinstance(prev_tokens, torch.Tensor) or prev_tokens.dtype != torch.long:
        error: type[Exception] = TypeError
    elif prev_tokens.shape != rows.shape[:1]:
        error = ValueError
    elif prev_tokens.device != rows.device:
        raise ValueError(
            f"{type(model).__name__}.{method}(prev_tokens): expected word ids on the device of the state and "
            f"the model, {rows.device}, got them on {prev_tokens.device} (move them with .to({str(rows.device)!r}))"
        )
    else:
        return
    raise error(
        f"{type(model).__name__}.{method}(prev_tokens): expected int64 (long) word ids ({rows.shape[0]},), one per "
        f"row of the state, got {_found(prev_tokens)}"
    )


def check_state(model: nn.Module, state: object, method: str) -> DecoderState:
    """``state`` if it is a `DecoderState` (what `init_state` and every step return)."""
    if not isinstance(state, DecoderState):
        raise TypeError(
            f"{type(model).__name__}.{method}(state): expected a DecoderState (from init_state or the "
            f"previous step), got {_found(state)}"
        )
    return state


def model_device(model: nn.Module) -> torch.device | None:
    """The device of ``model``'s first parameter (None: it has none)."""
    for parameter in model.parameters():
        return parameter.device
    return None


def check_on_model(where: str, name: str, tensor: torch.Tensor, model: nn.Module) -> None:
    """``tensor`` on ``model``'s device (CPU ids given to a CUDA model failed inside torch with
    ``Expected all tensors to be on the same device``; words on ``meta`` were taken by every step)."""
    device = model_device(model)
    if device is not None and tensor.device != device:
        raise ValueError(
            f"{where}({name}): expected a tensor on the model's device, {device}, got one on {tensor.device} "
            f"(move the inputs with .to({str(device)!r}))"
        )
