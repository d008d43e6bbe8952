"""Tracked values in worker threads (issue 11, class 5): tracked under ``g.wrap``/``g.in_thread``,
and loud when a cost computed from a node outside the tracker reaches ``scg.cost``."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Normal

import scg
import scg.testing as st

W = torch.tensor([1.5, -2.0, 0.7], dtype=torch.float64)


@pytest.fixture(scope="module")
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=2) as ex:
        yield ex


def _reward(z: torch.Tensor) -> torch.Tensor:
    return z.to(torch.float64) * W  # (..., 3): per-element


def _theta() -> torch.Tensor:
    return torch.tensor([0.4, -0.6, 0.9], dtype=torch.float64, requires_grad=True)


def test_worker_under_wrap_is_tracked_and_unbiased(pool: ThreadPoolExecutor) -> None:
    th = _theta()

    def run(th: torch.Tensor) -> None:  # θ (3,) or (P, 3): one particle per row
        g = scg.graph.current_graph()
        assert g is not None
        z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(pool.submit(g.wrap(_reward), z).result(), name="r")

    with scg.Graph() as g:
        run(th)
    g.surrogate_loss()
    assert g.influences("z", "r") and g.credit("z", "r") == "per-element"
    exact = st.exact_gradient(lambda: run(th), [th])
    assert float(exact[0].abs().min()) > 0.1
    st.assert_unbiased(lambda: run(th), [th], n=4000, exact=exact, batched=run, particles=4000)


def test_without_wrap_a_discrete_reward_loses_its_influence(pool: ThreadPoolExecutor) -> None:
    """Why the worker must be wrapped: the same program with a bare worker is biased (the
    limitation that g.wrap answers; no autograd trace is left to detect it)."""
    th = _theta()

    def run(th: torch.Tensor) -> None:  # θ (3,) or (P, 3): one particle per row
        z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(pool.submit(_reward, z).result(), name="r")

    report = st.check_unbiased(lambda: run(th), [th], n=4000, batched=run, particles=4000)
    assert not report.passed


def test_in_thread_tracks_and_escapes_in_the_worker_warn(pool: ThreadPoolExecutor) -> None:
    th = _theta()

    def work(g: scg.Graph, z: torch.Tensor) -> torch.Tensor:
        with g.in_thread():
            ones = z.tolist()  # an escape, in the worker
            return _reward(z) + torch.tensor(ones, dtype=torch.float64).sum() * 0.0

    with scg.Graph() as g, pytest.warns(scg.InfluenceLostWarning, match=r"'z'.*test_core_threads.py:\d+"):
        z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(pool.submit(work, g, z).result(), name="r")
    assert g.influences("z", "r")

    with scg.Graph(strict=True) as g, pytest.raises(scg.InfluenceLostError, match="'z'"):
        z = scg.sample(Bernoulli(logits=th), name="z")
        pool.submit(work, g, z).result()


def test_scg_calls_in_a_worker_under_wrap(pool: ThreadPoolExecutor) -> None:
    th = _theta()
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        pool.submit(g.wrap(lambda v: scg.cost(_reward(v), name="r")), z).result()
        with pytest.raises(scg.SCGError, match=r"outside a graph.*g\.wrap"):
            pool.submit(lambda v: scg.cost(_reward(v), name="bare"), z).result()
    assert [c.name for c in g.cost_nodes] == ["r"] and g.influences("z", "r")


def test_in_thread_in_the_graph_thread_is_a_no_op() -> None:
    th = _theta()
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        with g.in_thread():
            a = z * 2.0
        b = a + 1.0  # still tracked after the block (the tracker was not popped)
        scg.cost(b.to(torch.float64), name="c")
    assert g.influences("z", "c")


def test_in_thread_refuses_a_closed_graph(pool: ThreadPoolExecutor) -> None:
    with scg.Graph() as g:
        scg.sample(Bernoulli(logits=_theta()), name="z")
    with pytest.raises(scg.SCGError, match="not open"):
        pool.submit(g.wrap(lambda: None)).result()
    with pytest.raises(scg.SCGError, match="expected a callable"):
        g.wrap(3)  # type: ignore[arg-type]


def _lost_program(pool: ThreadPoolExecutor, strict: bool) -> scg.Graph:
    logits = torch.zeros(3, requires_grad=True)
    mu = torch.tensor([0.0, 1.0, -1.0], requires_grad=True)
    with scg.Graph(strict=strict) as g:
        k = scg.sample(Categorical(logits=logits), name="k")
        x = scg.sample(Normal(mu[k], 1.0), name="x")
        scg.cost(pool.submit(lambda v: v**2, x).result(), name="r")  # not wrapped
    return g


def test_cost_computed_from_a_node_outside_the_tracker_warns(pool: ThreadPoolExecutor) -> None:
    """k influences r through x, but a bare worker computed r: k would not be credited."""
    with pytest.warns(scg.InfluenceLostWarning, match=r"cost node 'r' .*node\(s\) 'x'.*g\.wrap"):
        _lost_program(pool, strict=False)
    with pytest.raises(scg.InfluenceLostError, match=r"cost node 'r'.*'x'"):
        _lost_program(pool, strict=True)


def test_node_drawn_from_parameters_computed_outside_the_tracker_warns(pool: ThreadPoolExecutor) -> None:
    """A value reaching a node: y's parameters computed from x in a bare worker."""
    mu = torch.zeros(2, requires_grad=True)
    for strict in (False, True):
        with scg.Graph(strict=strict):
            x = scg.sample(Normal(mu, 1.0), name="x")
            loc = pool.submit(lambda v: v * 2.0, x).result()
            if strict:
                with pytest.raises(scg.InfluenceLostError, match=r"stochastic node 'y'.*'x'"):
                    scg.sample(Bernoulli(logits=loc), name="y")
            else:
                with pytest.warns(scg.InfluenceLostWarning, match=r"stochastic node 'y'.*parameters.*'x'"):
                    scg.sample(Bernoulli(logits=loc), name="y")


def test_costs_from_data_and_parameters_are_not_reported(pool: ThreadPoolExecutor) -> None:
    """No false positive: costs without influence built from data and parameters (before the
    graph, inside it, in a bare worker), next to pathwise nodes whose values have grad_fns."""
    w = torch.randn(3, requires_grad=True)
    data = torch.randn(3)
    before = (w * data).sum()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with scg.Graph(strict=True) as g:
            x = scg.sample(Normal(w, 1.0), name="x")
            scg.sample(Normal(w * data, 1.0), name="y")  # parameters without influence
            scg.cost((x - data).pow(2).sum(), name="fit")
            scg.cost(before, name="before")
            scg.cost(w.pow(2).sum(), name="decay")
            scg.cost(pool.submit(lambda: (w * data).exp().sum()).result(), name="worker")
        g.surrogate_loss().backward()
    assert g.influences("x", "fit") and not g.influences("x", "worker")


def test_wrap_in_an_untracked_graph_pushes_no_mode(pool: ThreadPoolExecutor) -> None:
    # a Declared graph watches no torch call: g.wrap only makes the graph current in the worker
    th = _theta()

    def worker(v: torch.Tensor) -> int:
        scg.cost(_reward(v), name="r")
        return int(torch._C._len_torch_function_stack())

    with scg.Graph(structure=scg.Declared()) as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        depth = pool.submit(g.wrap(worker), z).result()
    assert depth == 0
    assert [c.name for c in g.cost_nodes] == ["r"] and g.influences("z", "r")
