"""Shared test configuration: a headless matplotlib backend, the shared data folder, and a guard
that no test leaks a change of torch's global grad mode into the tests after it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("SCG_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(autouse=True)
def _grad_mode_is_restored(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test (or the code it calls) that switches autograd off globally, e.g. with
    ``torch.set_grad_enabled(False)`` outside a ``with``, would make every later test fail far from
    the cause; fail the test that did it instead, and restore the mode."""
    yield
    if not torch.is_grad_enabled():
        torch.set_grad_enabled(True)
        pytest.fail(f"{request.node.nodeid} left autograd disabled (torch.set_grad_enabled(False) outside a "
                    f"'with' block?)", pytrace=False)
