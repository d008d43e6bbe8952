"""Whether a device named by the user is on this machine (``--device``, ``train.device`` (the
`Trainer`, `TrainConfig`, the TOML schema), ``device=`` of the Python API: `load_model`,
`load_run`, `Summarizer`, `evaluate_model`, `evaluate_run`, `run_saliency_top_k`): one check, so
every entry point says the same thing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["DEVICE_SETTING", "checked_device", "is_device_setting", "missing_cuda", "parse_device"]

#: the forms of a device setting (``train.device``): ``auto`` picks CUDA when there is a GPU
DEVICE_SETTING = "'auto', 'cpu', 'cuda' or 'cuda:N'"


def missing_cuda(device: str) -> str | None:
    """Why the CUDA device named ``device`` (``cuda``, ``cuda:N``) is not on this machine, or None
    (it is, or ``device`` names no CUDA device). Imports torch only for a CUDA name."""
    if not device.startswith("cuda"):
        return None
    import torch

    if not torch.cuda.is_available():
        return f"{device!r}, but no CUDA GPU is available here"
    index = device.partition(":")[2]
    if index.isdigit() and int(index) >= torch.cuda.device_count():
        return f"{device!r}, but this machine has {torch.cuda.device_count()} CUDA GPU(s)"
    return None


def parse_device(device: object) -> torch.device | None:
    """``device`` (a name or a ``torch.device``) as torch's device when it is a CPU or CUDA one, else
    None (a name torch does not know, ``"gpu"``, ``"cuda:x"``, or another kind, ``"meta"``)."""
    import torch

    try:
        parsed = torch.device(device)  # type: ignore[call-overload]
    except (RuntimeError, TypeError, ValueError):
        return None
    return parsed if parsed.type in ("cpu", "cuda") else None


def is_device_setting(value: object) -> bool:
    """Whether ``value`` has the form of a device setting (`DEVICE_SETTING`): ``auto`` or a name
    `parse_device` takes; whether this machine has it is `checked_device`'s question."""
    return value == "auto" or (isinstance(value, str) and parse_device(value) is not None)


def checked_device(device: object, where: str, *, setting: bool = False) -> torch.device:
    """``device`` as a ``torch.device`` this machine has; else ``ValueError`` naming the argument of
    ``where`` (the entry point, ``"load_model"``) and the expected form, or the missing GPU (a bad
    name failed deep in torch, and a missing GPU was blamed on the checkpoint torch could not map).
    ``setting``: ``where`` is a configuration key (``"train.device"``), named as such."""
    parsed = parse_device(device)
    if parsed is None:
        if setting:
            raise ValueError(f"{where} = {device!r}: expected {DEVICE_SETTING}")
        raise ValueError(f"{where}(device={device!r}): expected 'cpu', 'cuda' or 'cuda:N'")
    missing = missing_cuda(str(parsed))
    if missing is not None:
        raise ValueError(f"{where}: {missing}" if setting else f"{where}(device=...): {missing}")
    return parsed
