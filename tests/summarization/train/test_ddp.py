"""`DistContext` with a real (one-process) gloo group: what ``close`` leaves behind. (Two ranks
end to end: ``test_train_ddp.py``, slow.)"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist
from scg_summarize.train.ddp import DistContext
from torch import nn


@pytest.fixture
def one_process_group() -> Iterator[None]:
    """A gloo group of one rank in this process (an in-memory store), destroyed afterwards; the
    garbage collector paused, so that only an explicit collection frees a reference cycle."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        if dist.is_initialized():
            dist.destroy_process_group()


class _Owner:
    """Holds a wrapper inside a reference cycle, as a trainer does (its objective's closures
    refer back to it), and as the wrapper's own cycles may."""

    def __init__(self, net: nn.Module) -> None:
        self.net = net
        self.me = self


def test_close_collects_a_dropped_wrapper_before_it_destroys_the_group(one_process_group: None) -> None:
    """A DistributedDataParallel wrapper left in a reference cycle outlives ``del``, and its
    reducer holds the group; a group still held at the interpreter's exit aborts a finished
    torchrun process. ``close`` collects it, then destroys the group."""
    ctx = DistContext(rank=0, world=2)  # (enabled: a group to leave; the group itself has one rank)
    net = ctx.wrap(nn.Linear(3, 3), torch.device("cpu"))
    net(torch.randn(2, 3)).sum().backward()
    alive = weakref.ref(net)
    owner = _Owner(net)
    del net, owner
    assert alive() is not None  # (deleting the names is not enough)
    ctx.close()
    assert alive() is None
    assert not dist.is_initialized()
