"""The public API of the scg core: the issue's example, influence tracking, per-example credit."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.distributions import Bernoulli, Categorical, Normal

import scg


def test_issue_example_value_and_gradient() -> None:
    torch.manual_seed(0)
    theta = torch.zeros(4, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=theta), name="z")
        x = scg.sample(Normal(theta[z], 1.0), name="x")
        c = scg.cost((x - 1.0) ** 2, name="c")
    loss = g.surrogate_loss()
    assert torch.equal(loss.detach(), c.detach())
    loss.backward()
    assert theta.grad is not None and torch.isfinite(theta.grad).all()
    # Manual Algorithm 1: score term for z plus pathwise term for x.
    theta2 = theta.detach().clone().requires_grad_()
    logp = Categorical(logits=theta2).log_prob(z)
    x2 = theta2[z] + (x.detach() - theta.detach()[z])  # same noise
    manual = logp * ((x2 - 1.0) ** 2).detach() + (x2 - 1.0) ** 2
    manual.backward()
    torch.testing.assert_close(theta.grad, theta2.grad)
    assert isinstance(g.node("z").estimator, scg.ScoreFunction)
    assert isinstance(g.node("x").estimator, scg.Pathwise)


def _grad_of(loss: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    (gr,) = torch.autograd.grad(loss, p)
    return gr


@pytest.mark.parametrize("use", ["index", "gather", "one_hot", "compare", "where", "embedding"])
def test_discrete_influence_through_torch_ops(use: str) -> None:
    torch.manual_seed(1)
    theta = torch.randn(3, 5, requires_grad=True)
    h = torch.randn(3, 5, 4)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=theta), name="z")
        if use == "index":
            v = h[torch.arange(3), z].sum(-1)
        elif use == "gather":
            v = h.gather(1, z[:, None, None].expand(3, 1, 4)).sum((1, 2))
        elif use == "one_hot":
            v = (F.one_hot(z, 5).to(h.dtype)[..., None] * h).sum((1, 2))
        elif use == "compare":
            v = (z == 2).float() + (z > 1).float()
        elif use == "where":
            v = torch.where(z.bool(), torch.ones(3), torch.zeros(3))
        else:
            v = F.embedding(z, h[0]).sum(-1)
        scg.cost(v + 10.0, name="c")
    assert g.influences("z", "c")
    loss = g.surrogate_loss()
    gr = _grad_of(loss, theta)
    logp_grad = _grad_of(Categorical(logits=theta).log_prob(z).sum(), theta)
    assert not torch.allclose(gr, torch.zeros_like(gr))
    # Each row's score is credited with its own cost only (per-example credit).
    theta2 = theta.detach().requires_grad_()
    lp = Categorical(logits=theta2).log_prob(z)
    expected = _grad_of((lp * (v.detach() + 10.0)).sum(), theta2)
    torch.testing.assert_close(gr, expected)
    del logp_grad


def test_continuous_comparison_and_detach_keep_influence() -> None:
    mu = torch.zeros(2, requires_grad=True)
    with scg.Graph() as g:
        x = scg.sample(Normal(mu, 1.0), name="x", estimator=scg.ScoreFunction())
        step = (x > 0).float()  # no grad_fn: autograd alone would lose it
        with torch.no_grad():
            y = x * 2
        scg.cost(step, name="c1")
        scg.cost(y.detach(), name="c2")
    assert g.influences("x", "c1") and g.influences("x", "c2")


def test_costs_not_influenced_are_not_credited() -> None:
    torch.manual_seed(0)
    a = torch.zeros(3, requires_grad=True)
    with scg.Graph() as g:
        z1 = scg.sample(Categorical(logits=a), name="z1")
        z2 = scg.sample(Categorical(logits=a * 2), name="z2")
        scg.cost(z1.float() + 1.0, name="c1")
        scg.cost(z2.float() * 3.0 + 1.0, name="c2")
    assert g.influences("z1", "c1") and not g.influences("z1", "c2")
    assert not g.influences("z2", "c1") and g.influences("z2", "c2")
    gr = _grad_of(g.surrogate_loss(), a)
    b = a.detach().requires_grad_()
    manual = Categorical(logits=b).log_prob(z1) * (z1.float() + 1.0) + Categorical(logits=b * 2).log_prob(z2) * (
        z2.float() * 3.0 + 1.0
    )
    torch.testing.assert_close(gr, _grad_of(manual, b))


def test_chain_influence_is_transitive() -> None:
    p = torch.tensor([0.3, 0.6], requires_grad=True)
    with scg.Graph() as g:
        a = scg.sample(Bernoulli(probs=p[0]), name="a")
        b = scg.sample(Bernoulli(probs=p[1] * a + 0.1), name="b")
        scg.cost(b + 0.0, name="c")
    assert g.influences("a", "c") and g.influences("b", "c") and g.influences("a", "b")
    assert [n.name for n in g.parents("b")] == ["a"]
    assert [n.name for n in g.parents("c")] == ["b"]


def test_batch_elements_get_their_own_cost() -> None:
    torch.manual_seed(3)
    logits = torch.randn(4, 3, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=logits), name="z")
        cost = torch.tensor([1.0, 2.0, 3.0, 4.0]) * (z.float() + 1)
        scg.cost(cost, name="c")
    gr = _grad_of(g.surrogate_loss(), logits)
    l2 = logits.detach().requires_grad_()
    expected = _grad_of((Categorical(logits=l2).log_prob(z) * cost).sum(), l2)
    torch.testing.assert_close(gr, expected)


def test_cost_with_extra_dims_is_summed_and_scalar_cost_broadcast() -> None:
    torch.manual_seed(4)
    logits = torch.randn(2, 3, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=logits), name="z")
        per_pos = z[:, None].float() + torch.arange(5.0)  # (2, 5): summed over dim 1
        total = z.float().sum()  # scalar: credited to every element
        scg.cost(per_pos, name="c1")
        scg.cost(total, name="c2")
    gr = _grad_of(g.surrogate_loss(), logits)
    l2 = logits.detach().requires_grad_()
    credit = per_pos.sum(1) + total
    expected = _grad_of((Categorical(logits=l2).log_prob(z) * credit).sum(), l2)
    torch.testing.assert_close(gr, expected)


def test_escape_warns_and_influenced_by_declares() -> None:
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=theta), name="z")
        with pytest.warns(scg.InfluenceLostWarning, match="'z'.*item"):
            k = z.item()
        c = torch.tensor(float(k))
        scg.cost(c, name="lost")
        scg.cost(scg.influenced_by(c, z), name="declared")
    assert not g.influences("z", "lost")
    assert g.influences("z", "declared")


@pytest.mark.parametrize("escape", ["bool", "int", "float", "tolist", "index"])
def test_every_escape_warns(escape: str) -> None:
    theta = torch.zeros(3)
    with scg.Graph():
        z = scg.sample(Categorical(logits=theta), name="z")
        with pytest.warns(scg.InfluenceLostWarning):
            if escape == "bool":
                bool(z == 1)
            elif escape == "int":
                int(z)
            elif escape == "float":
                float(z)
            elif escape == "tolist":
                z.tolist()
            else:
                [0, 1, 2][z]


def test_distribution_validation_does_not_warn() -> None:
    theta = torch.zeros(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", scg.InfluenceLostWarning)
        with scg.Graph() as g:
            z = scg.sample(Categorical(logits=theta), name="z")
            x = scg.sample(Normal(z.float(), 1.0, validate_args=True), name="x")
            scg.cost(x, name="c")
        g.surrogate_loss()


def test_value_equals_sum_of_costs_with_baselines() -> None:
    theta = torch.zeros(2, 3, requires_grad=True)
    ema = scg.baselines.EMA(0.5)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=theta), name="z", baseline=ema)
        c1 = scg.cost(z.float() * 2.0, name="c1")
        c2 = scg.cost(z.float().sum() + 1.5, name="c2", baseline=scg.baselines.Constant(1.0))
    loss = g.surrogate_loss()
    torch.testing.assert_close(loss.detach(), c1.sum() + c2.sum())


def test_importing_scg_changes_nothing_in_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch before and after this process's first ``import scg, scg.testing, scg.viz``, recorded by
    tests/_scg_import_purity.py (tests/conftest.py imports it before scg); where scg had been imported
    before it, the same check in a fresh interpreter."""
    import _scg_import_purity as purity

    if purity.BEFORE is None:  # tests/ last on the path, run from the root: tests/scg must not shadow scg
        tests = Path(purity.__file__).parent
        code = f"import sys; sys.path.append({str(tests)!r}); import _scg_import_purity as p; p.check()"
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=tests.parent, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
    else:
        purity.check()
    # the comparison sees a patched method, a replaced torch function and a switched default
    monkeypatch.setattr(torch.Tensor, "add", lambda self, other: self)
    monkeypatch.setattr(torch, "exp", torch.exp2)
    monkeypatch.setattr(torch.distributions.Distribution, "_validate_args", not purity.AFTER.validate_args)
    found = purity.changes(purity.AFTER, purity.torch_state())
    assert len(found) == 3 and "'add'" in found[0] and "'exp'" in found[1], found


def test_graph_closes_tracking_mode() -> None:
    from torch.overrides import _get_current_function_mode_stack

    with scg.Graph():
        assert len(_get_current_function_mode_stack()) == 1
    assert not _get_current_function_mode_stack()


# 100 graphs in 20 examples of 5 (hypothesis's own work per example, ~3 ms, was most of this test's CPU)
@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.lists(st.lists(st.integers(0, 2**20), min_size=1, max_size=25), min_size=5, max_size=5))
def test_closure_matches_fixpoint(graphs: list[list[int]]) -> None:
    from scg.graph.masks import closure

    for raw in graphs:
        direct = [r & ((1 << i) - 1) for i, r in enumerate(raw)]  # parents precede children
        expected = []
        for i, d in enumerate(direct):
            acc, changed = d, True
            while changed:
                changed = False
                for j in range(i):
                    if acc >> j & 1 and (acc | direct[j]) != acc:
                        acc |= direct[j]
                        changed = True
            expected.append(acc)
        assert closure(direct) == expected, raw


def test_a_finished_graph_is_freed_without_the_cyclic_garbage_collector() -> None:
    """The graph owns its tracker; the tracker must not own the graph back (a reference cycle
    would keep every node's distribution and value alive until a full gc pass)."""
    import gc
    import weakref

    from torch.distributions import Categorical

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        logits = torch.zeros(3, requires_grad=True)
        with scg.Graph() as g:
            z = scg.sample(Categorical(logits=logits), name="z")
            scg.cost(z.float(), name="c")
        g.surrogate_loss().backward()
        ref = weakref.ref(g)
        del g, z
        assert ref() is None
    finally:
        if was_enabled:
            gc.enable()


def test_escape_warnings_still_reach_the_graph() -> None:
    with scg.Graph(), pytest.warns(scg.InfluenceLostWarning):
        z = scg.sample(torch.distributions.Bernoulli(torch.tensor(0.5)), name="z")
        float(z)
