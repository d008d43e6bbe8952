"""One test per exported estimator (``scg.estimators.__all__``) and baseline
(``scg.baselines.__all__``), driven by what each declares (issue 24).

An estimator or baseline that declares ``unbiased`` must pass the z-test against exact enumeration
on hypothesis-generated graphs (:mod:`scg.testing.strategies`); one that declares itself biased
(the relaxations, ``Normalized`` with its scaling) must be *rejected* on a graph where the bias is
large. Which node kinds an estimator takes is found by trying it (``needs_rsample`` decides for
the pathwise ones); what a baseline needs comes from ``needs_samples`` / ``defines_cost``. A new
export is picked up from ``__all__``; one with a required constructor argument that ``_arg`` has
no rule for fails here by name.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import pytest
import torch
from _estimators_util import exact_gradient_batched
from hypothesis import HealthCheck, assume, given, settings

import scg
import scg.testing as st
from scg.baselines import Baseline
from scg.estimators import Estimator
from scg.testing.strategies import KINDS, CostSpec, NodeSpec, SCGSpec, scgs

N = 1000  # estimates per check: one particle-batched graph
ALPHA = 1e-4
SETTINGS = settings(
    max_examples=2, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)


def _exported(module: Any, base: type) -> dict[str, type]:
    return {
        name: obj
        for name in module.__all__
        if inspect.isclass(obj := getattr(module, name)) and issubclass(obj, base) and obj is not base
    }


ESTIMATORS = _exported(scg.estimators, Estimator)
BASELINES = _exported(scg.baselines, Baseline)


def _arg(name: str, kind: str) -> Any:
    """A value for a required constructor argument, by its name."""
    if name == "temperature":
        return 1.0
    if name in ("control", "relaxed_cost"):  # a nonzero function of the relaxation, log-prob shaped
        return (lambda z: 0.3 * torch.tanh(z).sum(-1)) if kind == "categorical" else (lambda z: 0.3 * torch.tanh(z))
    if name == "k":
        return 2
    if name == "value":
        return 0.7
    if name == "module":
        return torch.nn.Linear(1, 1).double()
    if name == "greedy":
        return torch.tensor(0.4, dtype=torch.float64)
    raise AssertionError(f"capability test: no rule for the required constructor argument {name!r}; add one to _arg")


#: optional arguments that make a mistake easier to see: a fast running average over one
#: element each (an EMA updated before use would then halve the gradient)
SHARPER = {"beta": 0.5, "per_element": True}


@functools.cache
def _parameters(cls: type) -> tuple[list[str], dict[str, Any]]:
    """The required constructor arguments of ``cls`` and the SHARPER ones it takes (a class's
    signature is read once: ``inspect.signature`` of a class costs ~0.5 ms and _make runs ~550 times)."""
    parameters = inspect.signature(cls).parameters
    required = [
        p.name
        for p in parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    return required, {name: value for name, value in SHARPER.items() if name in parameters}


def _make(cls: type, kind: str = "bernoulli") -> Any:
    required, optional = _parameters(cls)
    obj = cls(**{name: _arg(name, kind) for name in required}, **optional)
    return obj.given(torch.ones(N, 1, dtype=torch.float64)) if hasattr(obj, "given") else obj


@functools.cache
def _draws(cls: type, kind: str, k: int) -> int | bool | None:
    """How the estimator takes a node of this kind: 1 (one sample), the n it needs (2: pairs; ARSM:
    1 + K(K-1)/2), or False (not at all); tried on a one-node spec, built as the specs build it."""
    if getattr(cls, "needs_rsample", False) and kind != "normal":
        return False
    for n in (None, *range(2, 8)):
        spec = SCGSpec(
            [NodeSpec(kind, k, ())], [(0, CostSpec((0,), False, 1.0))], {0: _make(cls, kind)}, {0: n} if n else {}
        )
        try:
            with scg.Graph() as g:
                spec.batched()(spec.init_params().detach().expand(4, -1))
            g.surrogate_loss()
        except (scg.SCGError, NotImplementedError):
            continue
        return n or 1
    return False


def _target(cls: type, spec: SCGSpec) -> SCGSpec:
    """``spec`` with ``cls`` on every node it takes (with the n it needs). An estimator
    that adds a sample dimension (``enumerates``, or n > 1) goes on the first such node only: the
    specs' programs do not keep the dims of independent nodes apart (f(u[None], v[:, None]))."""
    takes = {i: _draws(cls, nd.kind, nd.k) for i, nd in enumerate(spec.nodes)}
    takes = {i: n for i, n in takes.items() if n}
    if takes and (getattr(cls, "enumerates", False) or max(takes.values()) > 1):
        takes = dict([next(iter(takes.items()))])
    return SCGSpec(
        spec.nodes,
        spec.costs,
        {i: _make(cls, spec.nodes[i].kind) for i in takes},
        {i: n for i, n in takes.items() if n > 1},
    )


def _check(
    spec: SCGSpec, batched: Callable[[torch.Tensor], None], exact_program: SCGSpec, particles: int = N, **kw: Any
) -> st.UnbiasedReport:
    theta = spec.init_params(seed=len(spec.nodes))
    if not kw:  # every node kind: the particle-batched enumeration (checked in test_core_unbiased.py)
        exact = exact_gradient_batched(exact_program.batched(), theta, quadrature=16)
    else:
        program = exact_program.program(theta, **kw)
        exact = st.exact_gradient(program, [theta], quadrature=16, check_quadrature=False)[0]
    est = st.estimate_gradients_batched(batched, [theta], particles, particles=particles, seed=1)
    return st.compare(est, exact, alpha=ALPHA)


def _bias_spec(kind: str, k: int = 3) -> SCGSpec:
    """A chain of two nodes and a large quadratic cost: relaxations and scaling are visibly biased."""
    return SCGSpec([NodeSpec(kind, k, ()), NodeSpec(kind, k, (0,))], [(1, CostSpec((0, 1), False, 20.0))])


def _estimator_case(name: str) -> None:
    cls = ESTIMATORS[name]
    kinds = [kind for kind in KINDS if _draws(cls, kind, 3)]
    if not kinds:
        subclasses = [n for n, o in ESTIMATORS.items() if o is not cls and issubclass(o, cls)]
        assert subclasses, f"{name} takes none of the node kinds {KINDS}: the capability test cannot run it"
        pytest.skip(f"{name} is the base class of {subclasses}, tested through them")
    if not cls.unbiased:
        plain = _bias_spec(kinds[0])
        spec = _target(cls, plain)
        report = _check(spec, spec.batched(), plain, particles=4 * N)
        assert not report.passed, f"{name} declares itself biased, but the test does not see it: {report}"
        return

    @SETTINGS
    @given(plain=scgs(max_nodes=2, max_costs=2, kinds=kinds))
    def unbiased_on(plain: SCGSpec) -> None:
        spec = _target(cls, plain)
        assume(spec.estimator)
        report = _check(spec, spec.batched(), plain)
        assert report.passed, f"{name} on {spec.nodes} {spec.costs}: {report}"

    unbiased_on()


BASELINE_CASES: dict[str, Callable[[], Any]] = {
    name: (lambda cls=cls: _make(cls)) for name, cls in sorted(BASELINES.items())
}
# Normalized without its scaling: the centring alone, unbiased
BASELINE_CASES["Normalized(scale=False)"] = lambda: scg.baselines.Normalized(scg.baselines.EMA(), scale=False)


def _baseline_case(label: str) -> None:
    factory = BASELINE_CASES[label]
    probe = factory()
    n = 2 if probe.needs_samples else None
    kw = {"n": n, "log_mean_exp": probe.defines_cost}
    exact_kw = kw if probe.defines_cost else {}  # n samples do not change E[costs]: enumerate one
    if not probe.unbiased:
        baseline = factory()
        spec = _bias_spec("bernoulli")
        with scg.Graph() as warm:  # running statistics from one earlier batch: the scale is 1/std
            spec.batched(baseline, **kw)(spec.init_params().detach().expand(N, -1))
        warm.surrogate_loss()
        report = _check(spec, spec.batched(baseline, **kw), spec, particles=4 * N, **exact_kw)
        assert not report.passed, f"{label} declares itself biased, but the test does not see it: {report}"
        return

    @SETTINGS
    @given(spec=scgs(max_nodes=2, max_costs=2, continuous=False))
    def unbiased_on(spec: SCGSpec) -> None:
        # n samples go on node 0: every later node must carry them (descend from it)
        assume(not n or all(nd.parents for nd in spec.nodes[1:]))
        report = _check(spec, spec.batched(factory(), **kw), spec, **exact_kw)
        assert report.passed, f"{label} on {spec.nodes} {spec.costs}: {report}"

    unbiased_on()


CASES = [("estimator", name) for name in sorted(ESTIMATORS)] + [("baseline", label) for label in BASELINE_CASES]


@pytest.mark.parametrize(("what", "name"), CASES, ids=[f"{what}:{name}" for what, name in CASES])
def test_each_estimator_and_baseline_keeps_its_declared_promise(what: str, name: str) -> None:
    if what == "estimator":
        _estimator_case(name)
    else:
        _baseline_case(name)
