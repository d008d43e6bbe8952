"""``scg.testing.check_structure`` and a baseline's inputs (Theorem 2): a declared graph is not
watched, so its baselines' inputs are not either. A cost's baseline is subtracted from the credit of
every node the *declaration* credits with the cost: over-declaring a pair is unbiased only while the
baseline does not depend on the node. The check reads the inputs' influence off its tracked run and
refuses such a pair as biased; a baseline tracking itself refuses is raised as tracking raises it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.distributions import Bernoulli

import scg
import scg.testing as st
from scg.baselines import Learned, SelfCritical


def _theta() -> torch.Tensor:
    return torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)


def _reads_z1(
    theta: torch.Tensor, lin: torch.nn.Linear, cost_reads_z1: bool, named: bool = False
) -> Callable[[], None]:
    """z1, z2; the cost's ``Learned`` baseline is computed from h = 3·z1 (``named``: a deterministic
    node computed from z1). The cost depends on z1 too (``cost_reads_z1``: tracking refuses the
    baseline) or on z2 only (tracking credits z1 with nothing, and accepts it; the causal
    declaration credits z1 with the cost)."""

    def program() -> None:
        z1 = scg.sample(Bernoulli(logits=theta[0]), name="z1")
        z2 = scg.sample(Bernoulli(logits=theta[1]), name="z2")
        h = (scg.deterministic(z1 * 3.0, name="h") if named else z1 * 3.0).reshape(1)
        c = z2 * 2.0 + 1.0 + (z1 * 2.0 + z1 * z2 if cost_reads_z1 else 0.0)
        scg.cost(c, name="c", baseline=Learned(lin).given(h))

    return program


def _z1_influences_nothing(v: scg.graph.StochasticNode, node: scg.graph.Node) -> bool:
    return v.name != "z1"


@pytest.mark.parametrize("named", [False, True], ids=["sample", "deterministic-node"])
def test_an_over_declared_pair_whose_cost_baseline_reads_the_node_is_biased_and_refused(
    named: bool, fixed_linear: torch.nn.Linear
) -> None:
    """The causal declaration credits z1 with c, which z1 does not influence: unbiased without the
    baseline, but b(3·z1) subtracted from z1's credit adds -E[∇log p(z1)·b] = -1.4667 (exact), and
    check_structure called it 'unbiased, but with a higher variance' (exact=False: passed). Through a
    named deterministic node, the inputs' node is h: z1 is found among what h is computed from."""
    theta = _theta()
    program = _reads_z1(theta, fixed_linear, cost_reads_z1=False, named=named)
    exact = st.exact_gradient(program, [theta])[0]
    mean = st.expected_estimate(program, [theta], graph_kwargs={"structure": scg.Declared()})[0]
    torch.testing.assert_close(mean - exact, torch.tensor([-1.4667498701444752, 0.0], dtype=torch.float64))
    for exact_pairs in (True, False):
        with pytest.raises(AssertionError, match=r"credits stochastic node 'z1'.*with cost node 'c'.*BIASED"):
            st.check_structure(program, scg.Declared(), exact=exact_pairs)


def test_the_declaration_without_the_pair_is_accepted_and_exact(fixed_linear: torch.nn.Linear) -> None:
    theta = _theta()
    program = _reads_z1(theta, fixed_linear, cost_reads_z1=False)
    declared = scg.Declared(_z1_influences_nothing)
    st.check_structure(program, declared)
    mean = st.expected_estimate(program, [theta], graph_kwargs={"structure": declared})[0]
    torch.testing.assert_close(mean, st.exact_gradient(program, [theta])[0], rtol=1e-9, atol=1e-12)


def test_a_cost_baseline_from_a_node_that_influences_the_cost_is_refused_by_the_tracked_run(
    fixed_linear: torch.nn.Linear,
) -> None:
    """Under the declaration the estimate is biased (-1.4667 for z1, exact); tracking refuses it,
    and check_structure raises that error, naming the cost and the node."""
    theta = _theta()
    program = _reads_z1(theta, fixed_linear, cost_reads_z1=True)
    mean = st.expected_estimate(program, [theta], graph_kwargs={"structure": scg.Declared()})[0]
    bias = mean - st.exact_gradient(program, [theta])[0]
    torch.testing.assert_close(bias, torch.tensor([-1.4667498701444752, 0.0], dtype=torch.float64))
    with pytest.raises(scg.SCGError, match=r"baseline inputs of cost node 'c'.*computed from stochastic node 'z1'"):
        st.check_structure(program, scg.Declared())


def test_a_self_critical_callable_that_reads_its_node_is_refused_by_the_tracked_run() -> None:
    """The greedy cost returned by the callable is computed from z2's own sample: under the declaration
    a bias of -0.4805 in z2's gradient (exact); check_structure raises the tracked run's error."""
    theta = _theta()
    box: dict[str, torch.Tensor] = {}

    def program() -> None:
        z1 = scg.sample(Bernoulli(logits=theta[0]), name="z1")
        z2 = scg.sample(
            Bernoulli(logits=theta[1]), name="z2", baseline=SelfCritical(lambda node: box["z2"] * 2.0 + 0.5)
        )
        box["z2"] = z2
        scg.cost(z1 * 2.0 + z2 + z1 * z2, name="c")

    mean = st.expected_estimate(program, [theta], graph_kwargs={"structure": scg.Declared()})[0]
    bias = mean - st.exact_gradient(program, [theta])[0]
    torch.testing.assert_close(bias, torch.tensor([0.0, -0.4805214914830583], dtype=torch.float64))
    with pytest.raises(scg.SCGError, match=r"SelfCritical baseline of stochastic node 'z2'.*own sample"):
        st.check_structure(program, scg.Declared())
