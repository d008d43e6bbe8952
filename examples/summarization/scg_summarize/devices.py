"""Whether a device named by the user is on this machine (``--device``, ``train.device``,
``load_run(device=...)``): one check, so every entry point says the same thing."""

from __future__ import annotations

__all__ = ["missing_cuda"]


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
