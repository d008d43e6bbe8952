"""The testing helpers' arguments (`scg.testing.arguments`): one tensor is one parameter, and an
argument that would make a check vacuous (no gradient reaching the parameters, no estimate, no
run, a false-failure rate outside (0, 1)) is refused, naming the helper and the argument."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import OneHotCategorical

import scg
import scg.testing as st

PRICES = torch.tensor([0.0, 1.0, 5.0])


def _program(theta: torch.Tensor, estimator: scg.estimators.Estimator | None = None) -> st.Program:
    def program() -> None:
        z = scg.sample(OneHotCategorical(logits=theta), name="z", estimator=estimator)
        scg.cost((z * PRICES).sum() ** 2, name="c")

    return program


def test_a_bare_tensor_is_one_parameter_and_the_biased_twin_is_caught() -> None:
    """``params=theta`` (not ``[theta]``) was iterated into its rows, views the program never
    uses: every gradient came out zero and a biased estimator passed."""
    theta = torch.tensor([0.3, -0.2, 0.1], requires_grad=True)
    exact = st.exact_gradient(_program(theta), theta)
    torch.testing.assert_close(exact[0], st.exact_gradient(_program(theta), [theta])[0])
    assert float(exact[0].abs().max()) > 1.0
    assert st.check_unbiased(_program(theta), theta, n=400).passed  # score function: unbiased
    biased = st.check_unbiased(_program(theta, scg.estimators.GumbelSoftmax(2.0)), theta, n=400)
    assert not biased.passed and float(biased.z.abs().max()) > 10 * biased.critical, str(biased)


def test_parameters_the_program_does_not_use_are_refused() -> None:
    theta = torch.tensor([0.3, -0.2, 0.1], requires_grad=True)
    with pytest.raises(scg.SCGError, match=r"exact_gradient: .*does not depend on any of params.*list\(tensor\)"):
        st.check_unbiased(_program(theta), list(theta), n=10)
    with pytest.raises(scg.SCGError, match=r"exact_hessian: .*does not depend on any of params"):
        st.exact_hessian(_program(theta), [torch.zeros(2, requires_grad=True)])
    with pytest.raises(scg.SCGError, match=r"params\[0\] \(shape \(3,\)\) does not require grad"):
        st.exact_gradient(_program(theta), [theta.detach()])
    for bad, found in ((5, "int"), ([theta, "x"], r"params\[1\] must be a tensor, got str"), ([], "empty")):
        with pytest.raises(scg.SCGError, match=found):
            st.estimate_gradients(_program(theta), bad, 2)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p, t: st.estimate_gradients(p, t, 0), r"estimate_gradients: n must be an int >= 1, got 0"),
        (lambda p, t: st.check_unbiased(p, t, n=-1), r"n must be an int >= 2, got -1"),
        (lambda p, t: st.check_unbiased(p, t, n=1), r"n must be an int >= 2, got 1"),
        (
            lambda p, t: st.check_unbiased(p, t, n=4, surrogate_kwargs={"discout": 0.5}),
            r"surrogate_kwargs has unknown key\(s\) \[.discout.\]",
        ),
        (
            lambda p, t: st.check_unbiased(p, t, n=4, graph_kwargs={"stric": True}),
            r"graph_kwargs has unknown key\(s\) \[.stric.\]",
        ),
        (lambda p, t: st.estimate_gradients(p, t, 3, seed=1.5), r"estimate_gradients: seed must be an int, got 1.5"),
        (
            lambda p, t: st.exact_gradient(lambda x: None, t),
            r"exact_gradient: program must be callable with no arguments",
        ),
        (lambda p, t: st.compare(torch.zeros(10, 0), torch.zeros(0)), r"compare: the estimates have no coordinates"),
        (lambda p, t: st.estimate_gradients_batched(p, t, 4, particles=0), r"particles must be an int >= 1"),
        (lambda p, t: st.exact_expectation(p, quadrature=0), r"exact_expectation: quadrature must be an int >= 1"),
        (lambda p, t: st.exact_gradient(p, t, max_runs=True), r"max_runs must be an int >= 1, got True"),
        (lambda p, t: st.check_structure(p, scg.Declared(), runs=0), r"check_structure: runs must be an int >= 1"),
        (lambda p, t: st.check_unbiased(p, [t], n=5, exact=[torch.zeros(2)]), r"one gradient per parameter"),
        (lambda p, t: st.check_unbiased(p, t, n=5, alpha=0.0), r"compare: alpha must be a number in \(0, 1\)"),
        (lambda p, t: st.compare(torch.zeros(5, 2), torch.zeros(2), alpha=2), r"alpha must be a number in \(0, 1\)"),
        (lambda p, t: st.compare(torch.zeros(5, 2), torch.zeros(2), atol=-1e-3), r"atol must be a finite number"),
        (lambda p, t: st.compare(torch.zeros(5, 2), torch.zeros(1)), r"exact must be a tensor of 2 entries"),
        (lambda p, t: st.compare(torch.zeros(5), torch.zeros(5)), r"estimates must be a tensor \(n, d\)"),
    ],
)
def test_an_argument_that_would_make_the_check_vacuous_is_refused(call, message) -> None:  # type: ignore[no-untyped-def]
    theta = torch.tensor([0.3, -0.2, 0.1], requires_grad=True)
    with pytest.raises(scg.SCGError, match=message):
        call(_program(theta), theta)
