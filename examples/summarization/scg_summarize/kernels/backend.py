"""Which implementation runs a kernel op: the ``SCG_KERNELS`` switch and the lazy Triton import.

``SCG_KERNELS`` (read at every call, so tests can change it):

* ``auto`` (default): Triton for CUDA tensors when ``triton`` is installed, the PyTorch reference
  otherwise (CPU tensors, or no Triton).
* ``triton``: always Triton. On CPU tensors that is Triton's interpreter, which needs
  ``TRITON_INTERPRET=1`` in the environment *before* the kernel modules are imported (Triton reads it
  when ``@triton.jit`` decorates a function); the interpreter is ~500x slower than torch and computes
  only float32 correctly, so it is for tests.
* ``reference``: always the PyTorch reference (:mod:`.reference`).

The Triton modules (``triton_coarse``, ``triton_fine``, ``triton_topk``) are imported on first use only,
so importing :mod:`scg_summarize.kernels` never imports Triton.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from types import ModuleType
from typing import Literal

import torch

__all__ = ["ENV_VAR", "Backend", "choose", "forced", "requested", "triton_available", "triton_module"]

ENV_VAR = "SCG_KERNELS"
Backend = Literal["triton", "reference"]
_MODES = ("auto", "triton", "reference")


def requested() -> str:
    """The value of ``SCG_KERNELS`` (default ``auto``); raises on anything else."""
    mode = os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"
    if mode not in _MODES:
        raise ValueError(f"{ENV_VAR}={mode!r}: expected one of {', '.join(_MODES)}")
    return mode


@cache
def triton_available() -> bool:
    """Whether the ``triton`` package can be imported (checked once, without importing it)."""
    return importlib.util.find_spec("triton") is not None


def choose(device: torch.device) -> Backend:
    """The backend for an op whose tensors live on ``device`` (see the module docstring)."""
    mode = requested()
    if mode == "reference":
        return "reference"
    if mode == "triton":
        if not triton_available():
            raise RuntimeError(f"{ENV_VAR}=triton but triton is not installed (pip install 'scg[kernels]')")
        if device.type != "cuda" and os.environ.get("TRITON_INTERPRET", "0") != "1":
            raise RuntimeError(
                f"{ENV_VAR}=triton on {device.type} tensors runs Triton's interpreter: set TRITON_INTERPRET=1 "
                "before scg_summarize.kernels' Triton modules are first imported"
            )
        return "triton"
    return "triton" if device.type == "cuda" and triton_available() else "reference"


@contextmanager
def forced(mode: str | None) -> Iterator[None]:
    """``SCG_KERNELS=mode`` inside the block, restored after it (``None``: left as it is).

    For benchmarks and tests that compare the backends in one process. The value is checked where it
    is read (:func:`requested`: the ops raise ``ValueError`` for a mode other than ``auto``, ``triton``
    or ``reference``).
    """
    if mode is None:
        yield
        return
    old = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = mode
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = old


def triton_module(name: Literal["coarse", "fine", "topk"]) -> ModuleType:
    """Import (once) and return ``scg_summarize.kernels.triton_<name>``."""
    return importlib.import_module(f"{__package__}.triton_{name}")
