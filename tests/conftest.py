"""Shared test configuration: a headless matplotlib backend, the shared data folder, and a guard
that no test leaks a change of torch's global grad mode into the tests after it."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import _fast_exit  # first: its atexit callback must run after every other one
import _gc_policy  # second: no cyclic garbage collection while torch and the test modules are imported
import _scg_import_purity  # noqa: F401  (before scg: it records torch's state before scg's first import)
import pytest
import torch

import scg
import scg.testing

# headless figures, for the tests that draw and the processes they start; read when matplotlib is imported
# (not imported here: ~0.4 s of CPU that a run without figures need not pay)
os.environ["MPLBACKEND"] = "Agg"

# Without a GPU the kernel tests run Triton's CPU interpreter. Triton reads TRITON_INTERPRET when its modules
# are first imported, and importing torch._dynamo (as any test module may) imports Triton: so it is set here,
# before any test module is collected, not in the kernel tests' own helpers (a test module collected before
# them that imported torch._dynamo left every interpreted kernel failing).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# torch.manual_seed also seeds CUDA, XPU and MTIA: without the device, each call queues the seed for a lazy
# initialisation that never comes, with a formatted traceback of its caller (traceback.format_stack, ~0.5 ms
# of CPU per device at pytest's stack depth; ~800 calls in tests/scg and tests/summarization alone). Without
# the device there is nothing to seed.
for _device in (torch.cuda, torch.xpu, torch.mtia):
    if not _device.is_available():
        _device.manual_seed_all = lambda seed: None

#: the warnings that fail a test unless it expects them (`pytest_configure`)
SCG_WARNINGS: tuple[type[Warning], ...] = (
    scg.InfluenceLostWarning,
    scg.UntrackedRandomnessWarning,
    scg.NonDifferentiablePathWarning,
    scg.testing.QuadratureWarning,
)

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("SCG_SHARED_DATA", REPO.parent / "shared" / "data"))


def pytest_configure(config: pytest.Config) -> None:
    """scg's own warnings (an influence lost, hidden randomness, a pathwise node behind a non-differentiable
    path, a quadrature that has not converged) fail the test that triggers them unless the test expects them
    (``pytest.warns``, or a ``filterwarnings`` mark that says why): a test program scg warns about may test
    less than it claims. Set here, not as pyproject's ``filterwarnings``: pytest resolves those categories
    before this file runs, which would import scg before `_scg_import_purity` records torch's state (and the
    purity test would then need a fresh interpreter, ~4.5 s of CPU). Each test's warning context copies these
    filters; its marks and ``pytest.warns`` come first."""
    for category in SCG_WARNINGS:
        warnings.filterwarnings("error", category=category)


def pytest_collection_finish(session: pytest.Session) -> None:
    _gc_policy.after_collection()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _gc_policy.at_session_finish()
    _fast_exit.arm(session.exitstatus)


@pytest.fixture(autouse=True)
def _grad_mode_is_restored(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test (or the code it calls) that switches autograd off globally, e.g. with
    ``torch.set_grad_enabled(False)`` outside a ``with``, would make every later test fail far from
    the cause; fail the test that did it instead, and restore the mode."""
    yield
    if not torch.is_grad_enabled():
        torch.set_grad_enabled(True)
        pytest.fail(
            f"{request.node.nodeid} left autograd disabled (torch.set_grad_enabled(False) outside a 'with' block?)",
            pytrace=False,
        )


StructureCheck = Callable[[Callable[[], None], Sequence[torch.Tensor]], None]


@pytest.fixture
def assert_same_gradient_in_every_structure() -> StructureCheck:
    """``check(run, params)``: with the same draws (seed 5), the surrogate's gradient of the graph
    ``run`` records is the same in a tracked, a ``Cached`` and a ``Declared`` graph."""

    def check(run: Callable[[], None], params: Sequence[torch.Tensor]) -> None:
        grads = []
        for kwargs in ({}, {"structure": scg.Cached()}, {"structure": scg.Declared()}):
            torch.manual_seed(5)
            with scg.Graph(**kwargs) as g:
                run()
            grads.append(torch.autograd.grad(g.surrogate_loss(), list(params)))
        for other in grads[1:]:
            torch.testing.assert_close(other, grads[0])

    return check


@pytest.fixture
def assert_credit_and_exact_mean() -> Callable[..., None]:
    """``check(program, params, **credit)``: the program run once tracked gives each (node, cost)
    pair its expected credit (``credit``: ``"z__c"`` -> ``"whole-plate"``, ...), and the estimator's
    exact mean over every joint draw (`scg.testing.expected_estimate`) is d/dθ E[Σ costs]
    (`scg.testing.exact_gradient`) at rtol 1e-9."""

    def check(program: Callable[[], None], params: Sequence[torch.Tensor], **credit: str) -> None:
        with scg.Graph() as g:
            program()
        g.surrogate_loss()
        for pair, want in credit.items():
            v, c = pair.split("__")
            assert g.credit(v, c) == want, (pair, g.credit(v, c))
        means = scg.testing.expected_estimate(program, list(params))
        for mean, exact in zip(means, scg.testing.exact_gradient(program, list(params)), strict=True):
            torch.testing.assert_close(mean, exact, rtol=1e-9, atol=1e-12)

    return check


@pytest.fixture
def fixed_linear() -> torch.nn.Linear:
    """``b = 2h + 0.5`` (float64, one input): a fixed module for a ``Learned`` baseline, in tests of
    where a baseline's inputs come from (not of its fit)."""
    lin = torch.nn.Linear(1, 1, dtype=torch.float64)
    with torch.no_grad():
        lin.weight.fill_(2.0)
        lin.bias.fill_(0.5)
    return lin
