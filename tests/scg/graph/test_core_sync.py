"""No host synchronisation per tracked operation or per node (issue 12).

A host synchronisation (``.item()``, ``bool(t)``, ``t.tolist()``, ``int(t)``, ``float(t)``,
``t.numpy()``, ``t.cpu()``) stalls a CUDA stream until the device has caught up; a tracker that
did one per torch call would make every step launch-bound. These tests count the synchronising
calls made while a graph is built and its surrogate computed, by wrapping those methods of
``torch.Tensor``: building the graph makes none, and the surrogate makes a number that does not
grow with the number of steps (its finiteness check is one per surrogate, not per node).
On a machine with a GPU, ``torch.cuda.set_sync_debug_mode("error")`` checks the same on device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Normal

import scg

SYNCING = ("item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__")


@contextmanager
def count_syncs() -> Iterator[list[str]]:
    """Wrap the synchronising methods of ``torch.Tensor``; yields the list of calls made."""
    calls: list[str] = []
    saved = {name: torch.Tensor.__dict__.get(name) for name in SYNCING}

    def wrap(name: str, orig: Callable[..., Any]) -> Callable[..., Any]:
        def counted(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return orig(self, *args, **kwargs)

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


def test_counter_sees_synchronising_calls() -> None:
    """The counter is not vacuous: each kind of synchronising call is seen."""
    t = torch.tensor([1.5])
    with count_syncs() as calls:
        t.item()
        bool(t)
        float(t)
        t.tolist()
        t.numpy()
    assert calls == ["item", "__bool__", "__float__", "tolist", "numpy"]
    assert "item" not in torch.Tensor.__dict__  # restored


def attention(steps: int, structure: scg.Declared | scg.Cached | None = None) -> Callable[[], torch.Tensor]:
    """A hard-attention loop: a Categorical, a gather with the sample, a per-step cost."""
    gen = torch.Generator().manual_seed(0)
    enc = torch.randn(4, 5, 8, generator=gen)
    w = torch.nn.Parameter(torch.randn(8, 8, generator=gen) / 3)
    mu = torch.nn.Parameter(torch.zeros(4, 8))
    rows = torch.arange(4)

    def run() -> torch.Tensor:
        h = torch.zeros(4, 8)
        with scg.Graph(structure=structure) as g:
            for t in range(steps):
                scores = torch.bmm(enc, h[:, :, None]).squeeze(-1)  # (B, M)
                z = scg.sample(Categorical(logits=scores, validate_args=False), name="z", step=t)
                x = scg.sample(Normal(mu, 1.0, validate_args=False), name="x", step=t)  # (B, H)
                keep = scg.sample(Bernoulli(logits=h.sum(-1), validate_args=False), name="k", step=t)  # (B,)
                h = torch.tanh(enc[rows, z] @ w + x) * keep[:, None]
                h.masked_fill_(h.abs() > 10, 0.0)  # an in-place write on a tracked value
                scg.cost(((h - 1.0) ** 2).sum(-1), name="c", step=t)
        with count_syncs() as calls:
            loss = g.surrogate_loss()
        run.surrogate_calls = list(calls)  # type: ignore[attr-defined]
        return loss

    return run


@pytest.mark.parametrize("structure", [None, scg.Declared, scg.Cached])
@pytest.mark.parametrize("steps", [1, 6])
def test_graph_build_makes_no_host_sync(steps: int, structure: type | None) -> None:
    """Tracked, declared, and cached (the second graph is untracked, with a cached plan)."""
    run = attention(steps, None if structure is None else structure())
    for _ in range(2):
        with count_syncs() as calls:
            run()
        surrogate = run.surrogate_calls  # type: ignore[attr-defined]
        build = calls[: len(calls) - len(surrogate)]
        assert build == [], f"synchronising calls while building the graph: {build}"
        assert len(surrogate) <= 2, surrogate


def test_surrogate_syncs_do_not_grow_with_the_graph() -> None:
    """Whatever the surrogate synchronises on is per surrogate, not per node or per cost."""
    small, large = attention(2), attention(12)
    small()
    large()
    n_small = len(small.surrogate_calls)  # type: ignore[attr-defined]
    n_large = len(large.surrogate_calls)  # type: ignore[attr-defined]
    assert n_large == n_small, (
        small.surrogate_calls,  # type: ignore[attr-defined]
        large.surrogate_calls,
    )  # type: ignore[attr-defined]
    assert n_small <= 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_no_sync_on_cuda_while_tracking() -> None:
    """On device: building a graph (draws, gathers, in-place writes, costs) never synchronises.
    (Categorical is left out: torch's own multinomial checks its input with a sync.)"""
    enc = torch.randn(4, 5, 8, device="cuda")
    mu = torch.zeros(4, 8, device="cuda", requires_grad=True)
    rows = torch.arange(4, device="cuda")
    h = torch.zeros(4, 8, device="cuda")
    one = torch.ones(4, 8, device="cuda")  # a tensor scale: a Python 1.0 is copied to the device
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with scg.Graph() as g:
            for t in range(4):
                x = scg.sample(Normal(mu, one, validate_args=False), name="x", step=t)
                keep = scg.sample(Bernoulli(logits=h.sum(-1), validate_args=False), name="k", step=t)
                z = keep.long()  # (B,) a discrete index from a sample
                h = torch.tanh(enc[rows, z] + x) * keep[:, None]
                h.masked_fill_(h.abs() > 10, 0.0)
                scg.cost((h**2).sum(-1), name="c", step=t)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    with count_syncs() as calls:
        g.surrogate_loss().backward()
    assert len(calls) <= 2, calls
