"""Counting host reads (``.item()``, ``bool(t)``, ``t.tolist()``, ...), each a wait for the device on
a GPU, by wrapping those methods of ``torch.Tensor`` (not a test module): scg's own steps
(``tests/scg/graph/test_core_sync.py``) and the summarizer's training step
(``tests/summarization/train/test_train_host_reads.py``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

import scg

SYNCING = ("item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__")


SCG_DIR = Path(scg.__file__).resolve().parent


def _scg_site() -> str:
    """The innermost caller inside the scg package ("scg/credit/signals.py:101"), or ""."""
    frame = sys._getframe(2)
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if SCG_DIR in path.parents:
            return f"scg/{path.relative_to(SCG_DIR).as_posix()}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return ""


@contextmanager
def count_syncs(sites: list[str] | None = None) -> Iterator[list[str]]:
    """Wrap the synchronising methods of ``torch.Tensor``; yields the list of calls made (and
    appends to ``sites``, when given, each call's innermost caller inside scg, or ""). A call
    made while another is running (the tracking mode's ``__torch_function__`` passing the same
    read through) is not counted again."""
    calls: list[str] = []
    saved = {name: torch.Tensor.__dict__.get(name) for name in SYNCING}

    depth = [0]  # a read the tracking mode passes through reaches the wrapper again: counted once

    def wrap(name: str, orig: Callable[..., Any]) -> Callable[..., Any]:
        def counted(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if depth[0] == 0:
                calls.append(name)
                if sites is not None:
                    sites.append(_scg_site())
            depth[0] += 1
            try:
                return orig(self, *args, **kwargs)
            finally:
                depth[0] -= 1

        return counted

    for name in SYNCING:
        setattr(torch.Tensor, name, wrap(name, getattr(torch.Tensor, name)))
    try:
        yield calls
    finally:
        for name, orig in saved.items():
            if orig is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, orig)
