"""scg.Cached and a baseline's inputs (Theorem 2): an untracked graph records no influence, so its
baselines' inputs go unchecked. The tracked graphs (the first, and one in ``check_every``) refuse a
baseline computed from a node it is subtracted for, naming the baseline's node and that node; an
untracked graph given the conservative credit (every earlier node credited with each later cost) is
refused once a tracked graph showed a cost's baseline computed from a stochastic node."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
from torch.distributions import Bernoulli, Normal

import scg
import scg.testing as st
from scg.baselines import Learned
from scg.graph.structure import every_earlier


def _steps(
    theta: torch.Tensor,
    lin: torch.nn.Linear,
    steps: int,
    reads: Callable[[], bool],
    cost_z1: bool,
    named: bool = False,
) -> Callable[[], None]:
    """z1, then ``steps`` steps of z2_t with the cost c_t = 2·z2_t + 1 (+ z1 with ``cost_z1``), whose
    ``Learned`` baseline is computed from h = 3·z1 (from a constant when ``reads()`` is False; a
    named deterministic node computed from z1 with ``named``)."""

    def program() -> None:
        z1 = scg.sample(Bernoulli(logits=theta[0]), name="z1")
        h = z1 * 3.0 if reads() else torch.ones((), dtype=torch.float64)
        h = (scg.deterministic(h, name="h") if named else h).reshape(1)
        for t in range(steps):
            z2 = scg.sample(Bernoulli(logits=theta[1]), name="z2", step=t)
            scg.cost(z2 * 2.0 + 1.0 + (z1 if cost_z1 else 0.0), name="c", step=t, baseline=Learned(lin).given(h))

    return program


def test_a_tracked_check_refuses_a_baseline_that_reads_a_node_crediting_the_cost(fixed_linear: torch.nn.Linear) -> None:
    """The program starts computing the baseline from z1, which influences the cost, after its
    relation was learned (same signature): the untracked graphs in between are served the cached
    relation unchecked (biased); the next tracked graph refuses it, naming the cost and z1."""
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    reading = [False]
    program = _steps(theta, fixed_linear, 1, lambda: reading[0], cost_z1=True)
    cached = scg.Cached(check_every=3, seed=0)
    with scg.Graph(structure=cached) as g:
        program()
    g.surrogate_loss()
    reading[0] = True
    for _ in range(20):
        tracked = cached.stats["tracked"]
        try:
            with scg.Graph(structure=cached) as g:
                program()
            g.surrogate_loss()
        except scg.SCGError as e:
            assert cached.stats["tracked"] == tracked + 1  # (at a tracked check, not a reused graph)
            assert "baseline inputs of cost node 'c'" in str(e) and "stochastic node 'z1'" in str(e)
            break
        assert cached.stats["tracked"] == tracked  # (a reused graph is not checked)
    else:
        pytest.fail("no tracked check in 20 graphs")
    assert cached.stats["reused"] > 0


@pytest.mark.parametrize("named", [False, True], ids=["sample", "deterministic-node"])
def test_the_conservative_credit_is_refused_once_a_cost_baseline_was_computed_from_a_node(
    named: bool, fixed_linear: torch.nn.Linear
) -> None:
    """T = 1 is tracked: z1 influences no cost, so its baseline from 3·z1 is sound there. A T = 2
    graph is new and untracked: the conservative credit credits z1 with each c_t, and the baseline
    biases z1's gradient by -2.9335 (exact); it was served with only the fallback warning. Through a
    named deterministic node, z1 is found among what the inputs' node h is computed from."""
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    lin = fixed_linear
    two = _steps(theta, lin, 2, lambda: True, cost_z1=False, named=named)
    fallback = scg.Declared(every_earlier, per_example=False)  # (the credit such a graph gets)
    mean = st.expected_estimate(two, [theta], graph_kwargs={"structure": fallback})[0]
    bias = mean - st.exact_gradient(two, [theta])[0]
    torch.testing.assert_close(bias, torch.tensor([-2.9334997402889504, 0.0], dtype=torch.float64))

    cached = scg.Cached(check_every=None)
    with scg.Graph(structure=cached) as g:
        _steps(theta, lin, 1, lambda: True, cost_z1=False, named=named)()
    g.surrogate_loss()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with scg.Graph(structure=cached) as g:
            two()
        with pytest.raises(scg.SCGError, match=r"conservative credit.*cost node 'c'.*Learned.*stochastic node 'z1'"):
            g.surrogate_loss()
    assert cached.stats["fallback"] == 1
    assert cached.baseline_read is not None and "stochastic node 'z1'" in cached.baseline_read
    cached.clear()
    assert cached.baseline_read is None


def test_a_later_tracked_graph_without_the_read_does_not_forget_it(fixed_linear: torch.nn.Linear) -> None:
    """``baseline_read`` is the first read any tracked graph showed: a later tracked graph whose
    baselines read no sample (here the T = 2 graph tracked after its refusal) does not clear it, so
    a new T = 3 graph that reads z1 again is still refused the conservative credit."""
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    cached = scg.Cached(check_every=None)

    def run(steps: int, reads: bool) -> None:
        with scg.Graph(structure=cached) as g:
            _steps(theta, fixed_linear, steps, lambda: reads, cost_z1=False)()
        g.surrogate_loss()

    run(1, True)  # tracked: reads z1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(scg.SCGError, match="conservative credit"):
            run(2, False)  # untracked and new: refused
        tracked = cached.stats["tracked"]
        run(2, False)  # tracked (its signature was pending), no read
        assert cached.stats["tracked"] == tracked + 1
        assert cached.baseline_read is not None and "stochastic node 'z1'" in cached.baseline_read
        with pytest.raises(scg.SCGError, match=r"conservative credit.*stochastic node 'z1'"):
            run(3, True)  # untracked and new


def test_a_baseline_computed_from_a_pathwise_node_keeps_the_conservative_credit(fixed_linear: torch.nn.Linear) -> None:
    """A pathwise node has no score term, so a cost baseline computed from it biases no credit: a
    new untracked graph after such a tracked one gets the conservative credit (with the fallback
    warning), not the refusal."""
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    cached = scg.Cached(check_every=None)

    def run(steps: int) -> None:
        with scg.Graph(structure=cached) as g:
            z0 = scg.sample(Normal(theta[0], 1.0), name="z0")  # (pathwise)
            h = (z0 * 3.0).reshape(1)
            for t in range(steps):
                z2 = scg.sample(Bernoulli(logits=theta[1]), name="z2", step=t)
                scg.cost(z2 * 2.0 + 1.0, name="c", step=t, baseline=Learned(fixed_linear).given(h))
        g.surrogate_loss()

    run(1)
    assert cached.baseline_read is None
    with pytest.warns(RuntimeWarning, match="conservative credit"):
        run(2)
    assert cached.stats["fallback"] == 1
