"""Helpers for the kernel tests: the interpreter switch, random cases and a chi-square test.

Without a GPU, ``tests/conftest.py`` has set ``TRITON_INTERPRET=1`` before any test module is collected,
so that the Triton kernel modules, imported lazily later, are decorated for Triton's CPU interpreter.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import pytest
import torch

# (it imports no Triton module itself)
from scg_summarize.kernels import forced

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """Run a module's tests with one torch thread: on a loaded two-core machine the small ops here run
    ~100x slower with two threads (oversubscription). Restores the thread count afterwards."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


@pytest.fixture(scope="session")
def builtins_scanned_once() -> Iterator[None]:
    """Triton's CPU interpreter scans ``triton.language``'s modules and its tensor class with
    ``inspect.getmembers`` for the builtins to patch at every launch *and at every call of a
    ``@triton.jit`` helper* (``tl.sum``, ``tl.max``, the kernels' own): ~1,600 scans of five namespaces in
    these tests, 1.8 s of CPU. Which names hold builtins never changes (the interpreter only swaps their
    values), so here each namespace is scanned once; each call still patches exactly the names that
    hold a builtin at that moment, as Triton's scan does (1.8 -> 0.5 s). A patched name counts too: its
    wrapper keeps the builtin as its ``member`` default. Nothing changes without the interpreter (a GPU)
    or with a Triton whose interpreter patches otherwise."""
    interpreter = _interpreter()
    if interpreter is None:
        yield
        return
    from triton.language.core import is_builtin

    names: dict[int, list[str]] = {}

    def builtin_names(pkg: Any) -> list[str]:
        if id(pkg) not in names:
            wrapped = lambda m: (getattr(m, "__kwdefaults__", None) or {}).get("member")  # noqa: E731
            names[id(pkg)] = [n for n, m in inspect.getmembers(pkg) if is_builtin(m) or is_builtin(wrapped(m))]
        return names[id(pkg)]

    def patch_builtin(pkg: Any, builder: Any, scope: Any) -> None:
        for name in builtin_names(pkg):
            member = getattr(pkg, name)
            if is_builtin(member):
                interpreter._patch_attr(pkg, name, member, builder, scope)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(interpreter, "_patch_builtin", patch_builtin)
        yield


def _interpreter() -> Any:
    """Triton's interpreter module when the kernels run in it and it patches by ``_patch_builtin``."""
    if os.environ.get("TRITON_INTERPRET") != "1" or torch.cuda.is_available():
        return None
    try:
        from triton.runtime import interpreter
    except ImportError:
        return None
    if not (hasattr(interpreter, "_patch_builtin") and hasattr(interpreter, "_patch_attr")):
        return None
    return interpreter


def backend(name: str) -> AbstractContextManager[None]:
    """Run the body with ``SCG_KERNELS=name``."""
    return forced(name)


@dataclass
class Case:
    """Random inputs of one C2F step (float64; ``rows`` maps query rows to encoder rows or is None)."""

    keys: torch.Tensor
    query_coarse: torch.Tensor
    chunk_mask: torch.Tensor
    words: torch.Tensor
    word_mask: torch.Tensor
    query_fine: torch.Tensor
    idx: torch.Tensor
    weights: torch.Tensor
    rows: torch.Tensor | None

    def cast(self, dtype: torch.dtype) -> Case:
        """A copy with the floating tensors in ``dtype`` (leaves, no grad)."""
        f = lambda t: t.detach().to(dtype)  # noqa: E731
        return Case(
            f(self.keys),
            f(self.query_coarse),
            self.chunk_mask,
            f(self.words),
            self.word_mask,
            f(self.query_fine),
            self.idx,
            f(self.weights),
            self.rows,
        )


def make_case(
    seed: int, b: int, m: int, n: int, h: int, d: int, k: int, r: int | None = None, device: torch.device = DEVICE
) -> Case:
    """Random masks with padded chunks (chunk 0 always real), a chunk without real words (the last),
    and choices ``idx`` with a repeat (k > 1) and with the empty chunk once (row 0's last choice).
    Use ``r >= 2`` or ``k >= 2``, so that some choice reads real words."""
    gen = torch.Generator().manual_seed(seed)
    rows = None if r is None else torch.randint(0, b, (r,), generator=gen)
    n_rows = b if r is None else r
    chunk_mask = torch.rand(b, m, generator=gen) < 0.7
    chunk_mask[:, 0] = True
    word_mask = torch.rand(b, m, n, generator=gen) < 0.75
    word_mask[:, 0, 0] = True
    word_mask[:, m - 1] = False  # an empty chunk (all words padded)
    idx = torch.randint(0, m - 1, (n_rows, k), generator=gen)  # real chunks ...
    idx[0, -1] = m - 1  # ... but one choice of row 0 is the empty chunk
    if k > 1:
        idx[-1, 1] = idx[-1, 0]  # a repeated draw
    case = Case(
        keys=torch.randn(b, m, d, generator=gen, dtype=torch.float64),
        query_coarse=torch.randn(n_rows, d, generator=gen, dtype=torch.float64) / d**0.5,
        chunk_mask=chunk_mask,
        words=torch.randn(b, m, n, h, generator=gen, dtype=torch.float64),
        word_mask=word_mask,
        query_fine=torch.randn(n_rows, h, generator=gen, dtype=torch.float64) / h**0.5,
        idx=idx,
        weights=torch.rand(n_rows, k, generator=gen, dtype=torch.float64),
        rows=rows,
    )
    return Case(*(t.to(device) if isinstance(t, torch.Tensor) else t for t in vars(case).values()))


def chi_square_pvalue(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """P-value of Pearson's chi-square test of ``counts`` against ``probs`` (cells with p = 0 must be
    empty; df = number of cells with p > 0, minus one). Uses the chi-square survival function
    ``Q(df / 2, x / 2)`` (regularized upper incomplete gamma)."""
    counts = counts.double().flatten()
    probs = probs.double().flatten()
    if bool((counts[probs == 0] > 0).any()):
        return 0.0
    live = probs > 0
    expected = counts.sum() * probs[live]
    stat = ((counts[live] - expected) ** 2 / expected).sum()
    df = int(live.sum()) - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64), stat / 2))
