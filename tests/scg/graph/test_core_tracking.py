"""Influence tracking never fails silently (issue 11, classes 2-9; class 1 is test_core_plates).

Each case is either tracked correctly (checked against exact enumeration with ``scg.testing``
where the gradient is at stake) or loud: a warning or an error naming the node and the line.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Normal

import scg
import scg.testing as st
from scg.testing import expected_estimate

W = torch.tensor([1.5, -2.0, 0.7], dtype=torch.float64)


def _theta() -> torch.Tensor:
    return torch.tensor([0.4, -0.6, 0.9], dtype=torch.float64, requires_grad=True)


# ---------------------------------------------------------------- 2. aliases
def _alias_write(kind: str, z: torch.Tensor) -> torch.Tensor:
    """Write z (..., 3) into a fresh buffer and return a tensor read through another alias."""
    zf = z.to(torch.float64)
    buf = torch.zeros(2, *z.shape, dtype=torch.float64)
    if kind == "view_before":
        v = buf[0]
        buf[0] = zf
        return v
    if kind == "sibling":
        a, b = buf[0], buf[0, :]
        a.copy_(zf)
        return b
    if kind == "view_of_view":
        v = buf[:][0]
        buf.select(0, 0).copy_(zf)
        return v[:]
    if kind == "data":
        d = buf.data
        buf[0].add_(zf)
        return d[0]
    if kind == "detach":
        d = buf.detach()
        buf[0].add_(zf)
        return d[0]
    if kind == "out":
        torch.mul(zf, 1.0, out=buf[0])
        return buf[0]
    if kind == "expand_copy":
        buf.copy_(zf.expand(2, *z.shape))
        return buf[1]
    if kind == "out_tuple":  # (each tensor of an out= tuple is written: helper-F)
        torch.sort(zf * W, out=(buf[0], torch.zeros(z.shape, dtype=torch.long)))
        return buf[0]
    if kind == "foreach":  # (each tensor of a _foreach_*_ list is written: helper-F)
        torch._foreach_add_([buf[0], buf[1]], [zf, torch.ones_like(zf)])
        return buf[0]
    raise AssertionError(kind)


ALIASES = ["view_before", "sibling", "view_of_view", "data", "detach", "out", "expand_copy", "out_tuple", "foreach"]


@pytest.mark.parametrize("kind", ALIASES)
def test_write_seen_through_another_alias_carries_influence(kind: str) -> None:
    th = _theta()
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(_alias_write(kind, z) * W, name="c")
    assert g.influences("z", "c"), kind


@pytest.mark.parametrize("kind", ["view_before", "out_tuple", "foreach"])
def test_alias_write_gradient_is_unbiased(kind: str) -> None:
    """Before: the cost read through a view taken before the write had no influence, so the
    score term was missing (a zero gradient where the exact one is not). Checked exactly: the
    estimator's mean over the node's 8 values is the exact gradient, and the same mean without
    the influence (declared away: what the missed write gave) is not. (``out_tuple``: the
    tensors of an ``out=`` tuple were marked but their storage was not recorded as written, so
    ``buf`` read again gave E[ĝ] = 0 against the exact (-0.07, -0.69, -0.13), helper-F; likewise
    the tensors of a ``torch._foreach_add_`` list: 0 against (0.36, -0.46, 0.14).)"""
    th = _theta()

    def program() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(_alias_write(kind, z) * W, name="c")

    (exact,) = st.exact_gradient(program, [th])
    assert float(exact.abs().min()) > 0.05
    torch.testing.assert_close(expected_estimate(program, [th])[0], exact, rtol=1e-9, atol=1e-12)
    missed = expected_estimate(program, [th], graph_kwargs={"structure": scg.Declared(lambda v, n: False)})[0]
    assert float((missed - exact).abs().min()) > 0.05


@pytest.mark.parametrize("norm", ["batch", "instance"])
def test_running_statistics_updated_from_a_sample_carry_its_influence(norm: str) -> None:
    """A normalization in training updates its running statistics inside torch's kernel (no write
    is seen); a later call in eval mode reads them. The cost of that call depends on every example
    of z through them: it had no influence (a zero gradient). Checked exactly against enumeration,
    with the influence declared away (what the missed update gave) as the biased twin."""
    th = _theta()
    x = torch.tensor([[0.5, -1.0, 0.3], [1.0, 0.2, -0.4]], dtype=torch.float64)

    def program() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z")  # (3,) = three channels of one example
        if norm == "batch":
            layer: torch.nn.Module = torch.nn.BatchNorm1d(3, momentum=1.0, eps=1.0).double()
            layer.train()(torch.stack([z, 2.0 * z + 1.0]))  # running statistics from z
        else:
            layer = torch.nn.InstanceNorm1d(3, momentum=1.0, eps=1.0, track_running_stats=True).double()
            layer.train()(torch.stack([z, 1.0 - z, 2.0 * z], -1)[None])
        scg.cost((layer.eval()(x[..., None] if norm == "instance" else x) ** 2).sum() * 0.1, name="c")

    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.influences("z", "c")  # (a scalar cost: every element of z credited with all of it)
    (exact,) = st.exact_gradient(program, [th])
    assert float(exact.abs().max()) > 0.01
    torch.testing.assert_close(expected_estimate(program, [th])[0], exact, rtol=1e-9, atol=1e-12)
    missed = expected_estimate(program, [th], graph_kwargs={"structure": scg.Declared(lambda v, n: False)})[0]
    assert float((missed - exact).abs().max()) > 0.01


@pytest.mark.parametrize("op", ["embedding", "embedding_bag"])
def test_an_embedding_table_renormalized_by_max_norm_carries_the_indices_influence(op: str) -> None:
    """``F.embedding(z, table, max_norm=1)`` renormalizes the rows z selects in place, inside the
    call (``embedding_renorm_`` is not seen): a later read of the table depends on z, and had no
    influence (E[ĝ] = 0 against the exact (-0.78, -1.15, -0.61), helper-F). Now the table is
    marked as written, mixing its rows (as a normalization's running statistics)."""
    th = _theta()
    table = torch.tensor([[3.0, 4.0], [0.0, 2.0]], dtype=torch.float64)

    def program() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z")  # (3,): which rows get renormalized
        t = table.clone()
        if op == "embedding":
            torch.nn.functional.embedding(z.long(), t, max_norm=1.0)
        else:
            torch.nn.functional.embedding_bag(z.long()[:, None], t, max_norm=1.0)
        scg.cost(t.sum(1)[torch.tensor([1, 0, 1])] * W, name="c")  # read after the call

    (exact,) = st.exact_gradient(program, [th])
    assert float(exact.abs().max()) > 0.1
    torch.testing.assert_close(expected_estimate(program, [th])[0], exact, rtol=1e-9, atol=1e-12)


def test_stale_view_of_a_distribution_parameter() -> None:
    th = _theta()
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        logits = torch.zeros(3, dtype=torch.float64)
        stale = logits[:]  # taken before the write
        logits.add_(z.to(torch.float64))
        scg.sample(Bernoulli(logits=stale), name="x")
    assert [n.name for n in g.parents("x")] == ["z"]


# ---------------------------------------------------------------- 3. escapes
ESCAPES: dict[str, Callable[[torch.Tensor], Any]] = {
    "contains": lambda z: 1 in z,
    "torch.equal": lambda z: torch.equal(z, z),
    "torch.allclose": lambda z: torch.allclose(z, z),
    "torch.is_nonzero": lambda z: torch.is_nonzero(z[:1]),
    "np.asarray": lambda z: np.asarray(z),
    # (numpy's Python functions read z inside numpy: taken for library code, not reported, and
    # a cost from torch.as_tensor(np.sort(z)[::-1].copy()) got d/dθ 0, helper-F)
    "np.sort": lambda z: np.sort(z),
    "np.stack": lambda z: np.stack([z[0], z[1]]),
    "np.roll": lambda z: np.roll(z, 1),
    "f-string": lambda z: f"{z}",
    "format": lambda z: format(z),
    "str": lambda z: str(z),
    "len(nonzero)": lambda z: len(z.nonzero()),
    "mask shape": lambda z: z[z > 0].shape,
    "unique().numel()": lambda z: z.unique().numel(),
    "from_dlpack": lambda z: torch.from_dlpack(z),
    "item": lambda z: z[0].item(),
    "tolist": lambda z: z.tolist(),
}


@pytest.mark.parametrize("kind", sorted(ESCAPES))
def test_every_escape_warns_naming_node_and_line(kind: str) -> None:
    th = _theta()
    with (
        scg.Graph(),
        pytest.warns(
            scg.InfluenceLostWarning,
            match=r"node\(s\) 'z'.*"
            r"test_core_tracking.py:\d+",
        ),
    ):
        z = scg.sample(Bernoulli(logits=th), name="z")
        ESCAPES[kind](z)


@pytest.mark.parametrize("kind", sorted(ESCAPES))
def test_strict_graph_raises_on_every_escape(kind: str) -> None:
    th = _theta()
    with scg.Graph(strict=True), pytest.raises(scg.InfluenceLostError, match=r"'z'"):
        z = scg.sample(Bernoulli(logits=th), name="z")
        ESCAPES[kind](z)


def test_metadata_and_control_flow_stay_usable() -> None:
    th = _theta()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with scg.Graph(strict=True) as g:
            z = scg.sample(Bernoulli(logits=th), name="z")
            assert z.shape == (3,) and z.dim() == 1 and len(z) == 3 and z.dtype == th.dtype
            y = torch.where(z > 0, W, -W)  # control flow kept in torch
            scg.cost(y, name="c")
    assert g.influences("z", "c")


# ---------------------------------------------------------------- 4. changes after registration
def test_cost_written_after_registration_raises() -> None:
    th = _theta()
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        c = scg.cost(z * W, name="c")
        c.mul_(2.0)
    with pytest.raises(scg.SCGError, match=r"cost node 'c'.*written in place after"):
        g.surrogate_loss()


def test_learned_baseline_input_written_after_the_sample_raises() -> None:
    th = _theta()
    bl = scg.baselines.Learned(torch.nn.Linear(3, 1).double())
    with scg.Graph() as g:
        h = torch.zeros(3, dtype=torch.float64)
        z = scg.sample(Bernoulli(logits=th), name="z", baseline=bl.given(h))
        h.add_(z.to(h.dtype))  # the baseline would now see the sample (Theorem 2)
        scg.cost(z * W, name="c")
    with pytest.raises(scg.SCGError, match=r"baseline of stochastic node 'z'.*written in place"):
        g.surrogate_loss()


def test_cost_added_after_the_surrogate_raises() -> None:
    th = _theta()
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(z * W, name="c")
        g.surrogate_loss()
        with pytest.raises(
            scg.SCGError,
            match=r"scg.cost\(name='late'\).*surrogate_loss\(\) was "
            r"already built",
        ):
            scg.cost(z * W, name="late")


# ---------------------------------------------------------------- 5. outside the tracker
def test_sample_of_a_nested_graph_used_in_the_outer_raises() -> None:
    th = _theta()
    with scg.Graph() as outer:
        with scg.Graph():  # (its draw is scg's own for the outer graph's tracker too: no warning)
            z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(z * W, name="c")
    with pytest.raises(scg.SCGError, match=r"cost node 'c'.*stochastic node 'z'.*nested"):
        outer.surrogate_loss()


@pytest.mark.parametrize("transform", ["vmap", "grad"])
def test_tracked_values_inside_torch_func_transforms_are_loud(transform: str) -> None:
    th = _theta()

    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * 2.0).sum()

    run = torch.func.vmap(f) if transform == "vmap" else torch.func.grad(f)
    with scg.Graph(), pytest.warns(scg.InfluenceLostWarning, match=r"'z'.*torch.func transform"):
        z = scg.sample(Normal(th, 1.0), name="z")
        run(z[:, None] if transform == "vmap" else z)
    with scg.Graph(strict=True), pytest.raises(scg.InfluenceLostError, match="torch.func"):
        z = scg.sample(Normal(th, 1.0), name="z")
        run(z[:, None] if transform == "vmap" else z)


# ---------------------------------------------------------------- 6. randomness scg cannot see
@pytest.mark.parametrize("draw", ["bernoulli", "multinomial", "Distribution.sample"])
def test_hidden_draw_on_tracked_values_warns(draw: str) -> None:
    th = _theta()
    with (
        scg.Graph(),
        pytest.warns(
            scg.UntrackedRandomnessWarning,
            match=r"test_core_tracking"
            r".py:\d+.*node\(s\) 'z'.*scg.sample",
        ),
    ):
        z = scg.sample(Bernoulli(logits=th), name="z")
        p = torch.sigmoid(z + th)
        if draw == "bernoulli":
            torch.bernoulli(p)
        elif draw == "multinomial":
            torch.multinomial(torch.stack([p, 1 - p], -1), 1)
        else:
            Bernoulli(probs=p).sample()


def test_transformed_distribution_parameters_are_tracked() -> None:
    th = _theta()
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        base = Normal(torch.zeros(3, dtype=th.dtype), 1.0)
        shift = torch.distributions.transforms.AffineTransform(loc=z.to(th.dtype), scale=2.0)
        scg.sample(torch.distributions.TransformedDistribution(base, [shift]), name="x")
    assert [n.name for n in g.parents("x")] == ["z"]


# ---------------------------------------------------------------- 7. pathwise without a path
def _step(th: torch.Tensor, estimator: scg.estimators.Estimator | None) -> Callable[[], None]:
    return lambda: _step_batched(estimator)(th)


def _step_batched(estimator: scg.estimators.Estimator | None) -> Callable[[torch.Tensor], None]:
    """x ~ N(θ0, 1) and the cost 2·1(x > 0); θ (3,) or (P, 3), one particle per row."""

    def run(th: torch.Tensor) -> None:
        x = scg.sample(Normal(th[..., 0], 1.0), name="x", estimator=estimator)
        scg.cost((x > 0).to(th.dtype) * 2.0, name="c")  # a step: no autograd path

    return run


def test_exact_gradient_of_a_step_cost_matches_the_closed_form() -> None:
    """d/dμ E[2·1(x > 0)], x ~ N(μ, 1), is 2φ(μ); moving quadrature points gave 0."""
    th = _theta()
    with pytest.warns(st.QuadratureWarning, match="not converged"):  # a step cost: said, and still close
        (got,) = st.exact_gradient(_step(th, scg.ScoreFunction()), [th])
    mu = float(th[0].detach())
    expected = 2.0 * math.exp(-mu * mu / 2) / math.sqrt(2 * math.pi)
    assert abs(float(got[0]) - expected) < 0.02 * expected, (float(got[0]), expected)
    # a smooth cost still matches its closed form to high precision: d/dμ E[x²] = 2μ
    (smooth,) = st.exact_gradient(lambda: scg.cost(scg.sample(Normal(th[0], 1.0)) ** 2), [th])
    assert abs(float(smooth[0]) - 2 * mu) < 1e-8


def test_pathwise_through_a_step_warns_and_score_function_is_unbiased() -> None:
    th = _theta()
    with scg.Graph() as g:
        _step(th, None)()
    with pytest.warns(
        scg.NonDifferentiablePathWarning,
        match=r"cost node 'c'.*pathwise "
        r"stochastic node 'x'.*ScoreFunction",
    ):
        g.surrogate_loss()
    with pytest.warns(st.QuadratureWarning, match="not converged"):
        exact = st.exact_gradient(_step(th, scg.ScoreFunction()), [th])
    for_score = _step_batched(scg.ScoreFunction())
    st.assert_unbiased(_step(th, scg.ScoreFunction()), [th], n=4000, exact=exact, batched=for_score, particles=4000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.NonDifferentiablePathWarning)
        pathwise = st.check_unbiased(
            _step(th, None), [th], n=4000, exact=exact, batched=_step_batched(None), particles=4000
        )
    assert not pathwise.passed  # the silent 0 the warning is about


def test_differentiable_pathwise_does_not_warn() -> None:
    th = _theta()
    with warnings.catch_warnings():
        warnings.simplefilter("error", scg.NonDifferentiablePathWarning)
        with scg.Graph() as g:
            x = scg.sample(Normal(th[0], 1.0), name="x")
            scg.cost(torch.relu(x) + (x > 0).to(th.dtype) * 0, name="c")
        g.surrogate_loss()


# ---------------------------------------------------------------- 8. editing a sample in place
def test_editing_a_sample_in_place_works_and_is_unbiased() -> None:
    th = _theta()
    pad = torch.tensor(2)

    def run(th: torch.Tensor) -> None:  # θ (3,) or (P, 3): one particle per row
        logits = torch.stack([th, -th, 0 * th], -1)  # (..., 3, 3)
        tok = scg.sample(Categorical(logits=logits), name="tok")  # (..., 3)
        finished = torch.tensor([True, False, False])
        tok.masked_fill_(finished, pad)  # the decoder's idiom
        scg.cost(W[tok] * th.detach(), name="c")

    exact = st.exact_gradient(lambda: run(th), [th])
    st.assert_unbiased(lambda: run(th), [th], n=4000, exact=exact, batched=run, particles=4000)


def test_writing_into_a_pathwise_sample_raises_at_the_write() -> None:
    th = _theta()
    with scg.Graph():
        x = scg.sample(Normal(th, 1.0), name="x")
        with pytest.raises(
            scg.SCGError,
            match=r"test_core_tracking.py:\d+ writes into the value "
            r"of stochastic node 'x'",
        ):
            x.clamp_(min=0.0)


# ---------------------------------------------------------------- 9. stateful estimators
def _vimco_graph(th: torch.Tensor, vimco: scg.baselines.VIMCO, shift: float) -> scg.Graph:
    with scg.Graph() as g:
        h = scg.sample(Bernoulli(logits=th[0]), name="h", n=3, baseline=vimco)
        scg.cost(vimco.objective(th[1] * h + shift), name="c", reduced=h)
    return g


def test_vimco_shared_by_two_graphs_uses_each_graphs_log_weights() -> None:
    th = _theta()
    vimco = scg.baselines.VIMCO()
    torch.manual_seed(0)
    g1 = _vimco_graph(th, vimco, 0.0)
    g2 = _vimco_graph(th, vimco, 5.0)  # built before g1's surrogate
    (a,) = torch.autograd.grad(g1.surrogate_loss(), [th])
    torch.manual_seed(0)
    alone = _vimco_graph(th, scg.baselines.VIMCO(), 0.0)
    (b,) = torch.autograd.grad(alone.surrogate_loss(), [th])
    torch.testing.assert_close(a, b)
    g2.surrogate_loss()


def test_vimco_objective_called_twice_in_one_graph_raises_clearly() -> None:
    """One VIMCO serves latents of any shape (tests/scg/baselines/test_baselines_vimco_ema.py), but
    one objective per graph: a second call is refused."""
    th = _theta()
    vimco = scg.baselines.VIMCO()
    with scg.Graph():
        scg.sample(Bernoulli(logits=th[0]), name="h", n=3, baseline=vimco)
        with pytest.raises(scg.SCGError, match=r"called twice in one graph.*one VIMCO\(\) per"):
            vimco.objective(torch.zeros(3))
            vimco.objective(torch.zeros(3))


class _Shift(torch.distributions.transforms.Transform):
    """A user transform whose parameter lives in a dict (not a tensor attribute)."""

    bijective = True
    domain = torch.distributions.constraints.real
    codomain = torch.distributions.constraints.real

    def __init__(self, params: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.params = params

    def _call(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.params["loc"]

    def _inverse(self, y: torch.Tensor) -> torch.Tensor:
        return y - self.params["loc"]

    def log_abs_det_jacobian(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


def test_transform_with_parameters_in_a_dict_is_tracked() -> None:
    th = _theta()
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        base = Normal(torch.zeros(3, dtype=th.dtype), 1.0)
        dist = torch.distributions.TransformedDistribution(base, [_Shift({"loc": z * 2.0})])
        scg.sample(dist, name="x")
    assert [n.name for n in g.parents("x")] == ["z"]


def test_a_tensor_bounding_a_slice_carries_its_influence() -> None:
    """``D[: z + 1].sum()``: the slice's bound was not read, so z did not influence the cost and its
    gradient was 0 against 0.49 (helper-94)."""
    th = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
    d = torch.tensor([1.0, 2.0], dtype=torch.float64)

    def program() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z")  # (1,)
        scg.cost(d[: z.long()[0] + 1].sum(), name="c")

    exact = st.exact_gradient(program, [th])[0]
    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.influences("z", "c")
    p = torch.sigmoid(th.detach())
    torch.testing.assert_close(exact, 2.0 * p * (1 - p))  # E[c] = 1 + 2 sigmoid(θ)
    torch.testing.assert_close(expected_estimate(program, [th])[0], exact, rtol=1e-9, atol=1e-12)


def _listed(kind: str, z: torch.Tensor) -> torch.Tensor:
    """z (3,) given to a torch call inside a list or tuple that the call's keyword holds, or inside
    a list nested in its arguments; the result reordered, so each element reads another one."""
    zf = z.to(torch.float64)
    if kind == "cat_keyword":
        return torch.cat(tensors=[zf[2:], zf[:2]])
    if kind == "stack_keyword":
        return torch.stack(tensors=[zf[2], zf[0], zf[1]])
    if kind == "index_put_keyword":
        return torch.zeros(3, dtype=torch.float64).index_put_(indices=(z.long(),), values=W, accumulate=True)
    if kind == "tensor_nested_list":
        return torch.tensor([[zf[2]], [zf[0]], [zf[1]]], dtype=torch.float64)[:, 0]
    if kind == "index_list_in_tuple":
        d = torch.arange(9.0, dtype=torch.float64).view(3, 3)
        return d[:, [z[0].long(), z[1].long(), z[2].long()]].sum(0)
    if kind == "setitem_list_in_tuple":
        x = torch.zeros(3, 3, dtype=torch.float64)
        x[:, [z[0].long(), z[2].long()]] = 1.0
        return x.sum(0)
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "cat_keyword",
        "stack_keyword",
        "index_put_keyword",
        "tensor_nested_list",
        "index_list_in_tuple",
        "setitem_list_in_tuple",
    ],
)
def test_tensors_in_a_keyword_list_or_a_nested_list_carry_their_influence(kind: str) -> None:
    """Only the tensors of a positional list were read: ``torch.cat(tensors=[...])``,
    ``index_put_(indices=(z,), ...)``, ``torch.tensor([[z[0]], ...])`` and ``D[:, [z[0], ...]]``
    gave a cost without z's influence and a zero gradient, no warning (``cat_keyword``: E[ĝ] = 0
    against the exact (-0.48, 0.16, 0.31)). Now read at any depth, whole-plate where the rule
    cannot place them."""
    th = _theta()

    def program() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(_listed(kind, z) * W, name="c")

    (exact,) = st.exact_gradient(program, [th])
    assert float(exact.abs().max()) > 0.1
    torch.testing.assert_close(expected_estimate(program, [th])[0], exact, rtol=1e-9, atol=1e-12)


def _nested(kind: str, z: torch.Tensor) -> torch.Tensor:
    """z (3,) through a strided nested tensor (torch.nested), read out reordered."""
    zf = z.to(torch.float64)
    if kind == "nested_tensor":  # (copies z's values without a torch call the tracker sees)
        parts = torch.nested.nested_tensor([zf[:1], zf[1:]]).unbind()
        return torch.cat([parts[1], parts[0]])
    if kind == "as_nested_tensor":
        return torch.nested.as_nested_tensor([zf[:1], zf[1:]]).to_padded_tensor(0.0).sum(1).repeat(2)[:3]
    if kind == "data_times_sample":
        nt = torch.nested.nested_tensor([W[:1], W[1:]]) * zf[0]
        return torch.cat(nt.unbind()) + zf.flip(0)
    raise AssertionError(kind)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_an_unseen_nested_tensor_met_by_another_nodes_value_keeps_every_influence() -> None:
    """``nested_tensor([u[:1], u[1:]]) * (z[0] + 1)``: the product carried z's influence only (the
    nested tensor, made without a torch call, had none), and u's gradient was 0 against the exact
    (0.29, -0.78, 0.53) (helper-F). A nested tensor without marks in a tracked call now adds every
    node drawn so far, as when it is read out alone."""
    th0, th1 = _theta(), _theta().detach().flip(0).requires_grad_()

    def program() -> None:
        u = scg.sample(Bernoulli(logits=th0), name="u")
        z = scg.sample(Bernoulli(logits=th1), name="z")
        nt = torch.nested.nested_tensor([u[:1].to(torch.float64), u[1:].to(torch.float64)])
        scg.cost(torch.cat((nt * (z[0] + 1.0)).unbind()).flip(0) * W, name="c")

    exact = st.exact_gradient(program, [th0, th1])
    assert float(exact[0].abs().max()) > 0.1
    for got, want in zip(expected_estimate(program, [th0, th1]), exact):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("kind", ["nested_tensor", "as_nested_tensor", "data_times_sample"])
def test_values_through_a_nested_tensor_keep_their_influence(kind: str) -> None:
    """``torch.nested.nested_tensor([z[:1], z[1:]])`` copies without a torch call the tracker sees:
    a cost read from it had no influence (E[ĝ] = 0 against the exact (0.17, 0.34, -0.41) for
    ``nested_tensor``, no warning); a nested tensor reaching a tracked call failed inside scg
    (torch: 'NestedTensorImpl doesn't support sizes'). A strided nested tensor's sizes cannot be
    read, so what it carries is whole-plate; one read with no marks is taken to hold every node
    drawn so far (conservative: unbiased)."""
    th = _theta()

    def program() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(_nested(kind, z) * W, name="c")

    (exact,) = st.exact_gradient(program, [th])
    assert float(exact.abs().max()) > 0.1
    torch.testing.assert_close(expected_estimate(program, [th])[0], exact, rtol=1e-9, atol=1e-12)
    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.credit("z", "c") == "whole-plate"


def _gradient(kind: str, z: torch.Tensor) -> torch.Tensor:
    """A gradient computed inside the graph from a function of z (3,), reordered."""
    v = torch.ones(3, dtype=torch.float64, requires_grad=True)
    zf = z.flip(0).to(torch.float64)
    if kind == "autograd_grad":
        return torch.autograd.grad((v * v * zf).sum(), v)[0]
    if kind == "grad_outputs":
        return torch.autograd.grad(v * 2.0, v, grad_outputs=zf)[0]
    if kind == "backward":
        (v * v * zf).sum().backward()
        assert v.grad is not None
        return v.grad
    if kind == "jacobian":
        return torch.autograd.functional.jacobian(lambda u: u * u * zf, v.detach()).sum(0)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["autograd_grad", "grad_outputs", "backward", "jacobian"])
def test_a_gradient_computed_inside_the_graph_carries_its_influence(kind: str) -> None:
    """torch's autograd engine computes gradients with no torch call the tracker sees (and
    ``torch.autograd.grad`` was read as the ``.grad`` getter, metadata): a cost computed from
    ``torch.autograd.grad``, ``backward`` then ``.grad``, or ``autograd.functional`` of a
    function of z had no influence, E[ĝ] = 0 against the exact (0.34, -0.92, 0.62) (helper-F).
    Now whole-plate: the gradient takes every influence it was computed from."""
    th = _theta()

    def program() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(_gradient(kind, z) * W, name="c")

    (exact,) = st.exact_gradient(program, [th])
    assert float(exact.abs().max()) > 0.1
    torch.testing.assert_close(expected_estimate(program, [th])[0], exact, rtol=1e-9, atol=1e-12)


def test_a_result_holding_a_list_of_tensors_is_tracked_not_an_escape() -> None:
    """``torch.histogramdd`` returns (hist, [bin edges]): the list inside made the result a
    non-tensor, reported as an escape, and its tensors carried no influence (helper-F sweep of
    torch's functions). Now each tensor in it is marked."""
    th = _theta()

    def program() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z")
        edges = torch.histogramdd(z.to(torch.float64)[:, None] * W[:, None], 2).bin_edges[0]
        scg.cost(edges.sum() * torch.ones(3, dtype=torch.float64), name="c")

    (exact,) = st.exact_gradient(program, [th])
    assert float(exact.abs().max()) > 0.1
    torch.testing.assert_close(expected_estimate(program, [th], graph_kwargs={"strict": True})[0], exact)
