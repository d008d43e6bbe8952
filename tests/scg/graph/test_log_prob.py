"""``scg.log_prob``: a stochastic node's log-probability, equal in value and gradient to
``dist.log_prob(value)``, computed once per node (the score term's tensor where the node has
one; in a tracked graph marked as tracking would mark it, checked against tracking's own
recomputation and for unbiasedness), and refused for anything but a node of the open graph."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Distribution, Independent, MultivariateNormal, Normal

import scg
import scg.graph.log_prob
import scg.testing
from scg.estimators import ARM
from scg.graph.graph import GraphRecord
from scg.graph.influence import scored_log_prob

MODES: dict[str, Callable[[], scg.Declared | scg.Cached | None]] = {
    "tracked": lambda: None,
    "declared": scg.Declared,
    "cached": lambda: scg.Cached(check_every=None),
}


def _graphs(mode: str) -> list[scg.Graph]:
    """The graphs a mode's steps run in: for Cached, a tracked one and an untracked one."""
    structure = MODES[mode]()
    return [scg.Graph(structure=structure) for _ in range(2 if mode == "cached" else 1)]


def _grad(t: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    (g,) = torch.autograd.grad(t.sum(), theta, retain_graph=True)
    return g


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize(
    ("make", "estimator", "n"),
    [
        (lambda th: Bernoulli(logits=th), None, None),  # score function: the score term's tensor
        (lambda th: Normal(th, th.exp()), None, 3),  # pathwise: computed on demand
        (lambda th: Bernoulli(logits=th), ARM(), 2),  # a score whose gradient differs: on demand
    ],
    ids=["score", "pathwise", "arm"],
)
def test_equals_dist_log_prob_in_value_and_gradient(
    mode: str, make: Callable[[torch.Tensor], Distribution], estimator: ARM | None, n: int | None
) -> None:
    torch.manual_seed(0)
    theta = torch.linspace(-1.0, 1.0, 4).requires_grad_()
    for g in _graphs(mode):
        with g:
            dist = make(theta)
            z = scg.sample(dist, name="z", estimator=estimator, n=n)
            lp = scg.log_prob(z)
            expected = dist.log_prob(z)
            grads = _grad(lp, theta), _grad(expected, theta)
            again = scg.log_prob(z), scg.log_prob(g.node("z"))  # type: ignore[arg-type]
            scg.cost(lp + z, name="c")
        assert lp.shape == expected.shape == ((n,) if n else ()) + dist.batch_shape
        assert torch.equal(lp, expected)
        assert torch.equal(*grads)
        assert grads[0].abs().sum() > 0
        assert again[0] is lp and again[1] is lp  # computed once
        node = g.node("z")
        assert isinstance(node, scg.StochasticNode)
        if estimator is None and node.log_prob is not None:
            assert lp is node.log_prob  # not computed again: scg.sample's own (tracked too)
        g.surrogate_loss()


def test_a_cost_from_it_is_influenced_by_the_node_when_tracked() -> None:
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=theta), name="z")
        scg.cost(scg.log_prob(z), name="c")
    assert g.tracked and g.influences("z", "c")
    g.surrogate_loss()
    assert g.credit("z", "c") == "per-element"


def test_a_declared_step_gives_the_hand_written_gradient() -> None:
    """The surrogate's score term and the user's cost share one tensor: the gradient of a
    hand-written step that computes the log-probability once."""
    theta = torch.linspace(-1.0, 1.0, 5).requires_grad_()
    torch.manual_seed(1)
    with scg.Graph(structure=scg.Declared()) as g:
        z = scg.sample(Bernoulli(logits=theta), name="z")
        scg.cost(scg.log_prob(z) + 2.0 * z, name="c")
    (got,) = torch.autograd.grad(g.surrogate_loss(), theta)
    torch.manual_seed(1)
    d = Bernoulli(logits=theta)
    h = d.sample()
    lp = d.log_prob(h)
    c = lp + 2.0 * h
    (want,) = torch.autograd.grad(c.sum() + (lp * c.detach()).sum(), theta)
    assert torch.equal(got, want)


def test_refusals_name_the_argument_and_what_was_found() -> None:
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph(structure=scg.Declared()) as other:
        foreign = scg.sample(Bernoulli(logits=theta), name="z")
    with pytest.raises(
        scg.SCGError, match=r"scg.log_prob\(value\) at .*test_log_prob.py:\d+ was called outside a graph"
    ):
        scg.log_prob(foreign)
    with scg.Graph(structure=scg.Declared()):
        z = scg.sample(Bernoulli(logits=theta), name="z")
        c = scg.cost(z * 2.0, name="c")
        with pytest.raises(scg.SCGError, match=r"expected the tensor scg.sample returned, found int"):
            scg.log_prob(3)  # type: ignore[arg-type]
        with pytest.raises(scg.SCGError, match=r"found a tensor that is not the value of a node"):
            scg.log_prob(z + 1)
        with pytest.raises(scg.SCGError, match=r"found a tensor that is not the value of a node"):
            scg.log_prob(foreign)
        with pytest.raises(scg.SCGError, match=r"found the value of cost node 'c'"):
            scg.log_prob(c)
        with pytest.raises(scg.SCGError, match=r"expected a stochastic node of the open graph, found stochastic"):
            scg.log_prob(other.node("z"))  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["tracked", "declared"])
def test_a_value_written_in_place_before_the_call(mode: str) -> None:
    """A score node's log-probability was computed when it was drawn (from a private copy),
    tracked or not: the write does not change it. One computed on demand (a pathwise node's)
    would be computed from the written value: refused (tracked, the write itself is)."""
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph(structure=MODES[mode]()) as g:
        d = Bernoulli(logits=theta)
        z = scg.sample(d, name="z")
        drawn = z.clone()
        z.fill_(1.0 - z[0])  # (allowed: the node scored a private copy)
        lp = scg.log_prob(z)
        y = scg.sample(Normal(theta, 1.0), name="y")
        if g.tracked:  # (tracking refuses the write itself)
            with pytest.raises(scg.SCGError, match=r"writes into the value of stochastic node 'y'"), torch.no_grad():
                y.add_(1.0)
        else:
            with torch.no_grad():
                y.add_(1.0)
            with pytest.raises(scg.SCGError, match=r"stochastic node 'y'.* was written in place"):
                scg.log_prob(y)
    assert torch.equal(lp, d.log_prob(drawn))


def test_a_value_drawn_in_a_nested_graph_is_refused_in_the_outer_one() -> None:
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph(structure=scg.Declared()):  # (a tracked outer graph would see the inner draw)
        with scg.Graph():
            z = scg.sample(Bernoulli(logits=theta), name="z")
            inner = scg.log_prob(z)
        with pytest.raises(
            scg.SCGError, match=r"found the value of stochastic node 'z'.*, drawn in a scg.Graph nested"
        ):
            scg.log_prob(z)
    assert inner.shape == (3,)


def _tracked_marks(g: scg.Graph, t: torch.Tensor) -> tuple[int, dict[int, int]]:
    """What tracking recorded for ``t``: its mask, and its foreign positions that can be compared
    with a node's dimensions (for each node, those before its value's rank: the credit of a pair
    is decided up to the node's plate rank)."""
    out: dict[int, int] = {}
    for p, pm in g.foreign(t).items():
        for node in g.nodes:
            if pm >> node.index & 1 and p < node.value.dim():
                out[p] = out.get(p, 0) | 1 << node.index
    return g.mask(t), out


_CASES: dict[str, Callable[[torch.Tensor, torch.Tensor], Distribution]] = {
    "bernoulli, params per example": lambda h, w: Bernoulli(logits=h @ w),
    "independent normal, event dims summed": lambda h, w: Independent(Normal(h @ w, 1.0), 1),
    "categorical, the classes contracted": lambda h, w: Categorical(logits=h @ w),
    "params mixing the examples": lambda h, w: Bernoulli(logits=(h @ w).sum(0) + torch.zeros(4, 3)),
    "a broadcast parameter": lambda h, w: Bernoulli(logits=(h @ w)[:, :1].expand(4, 3).contiguous()),
    "an untracked parameter": lambda h, w: Bernoulli(logits=torch.zeros(4, 3) + w.sum()),
    "one example": lambda h, w: Independent(Bernoulli(logits=h[:1] @ w), 1),
    "multivariate normal, a scale per example": lambda h, w: MultivariateNormal(
        h @ w, scale_tril=torch.diag_embed((h @ w).exp())
    ),
    "multivariate normal, one scale from three rows": lambda h, w: MultivariateNormal(
        h @ w, scale_tril=torch.eye(3) * (h[:3] @ w)[:, :1].exp()
    ),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_tracked_marks_are_those_of_the_log_prob_computed_under_tracking(case: str) -> None:
    """A tracked graph returns the score term's tensor (no second log_prob under tracking),
    marked as the same log-probability computed under tracking is: the node's bit, the
    distribution's parameters at their positions; the costs computed from it get the credit
    they got from the recomputation. (The multivariate normal's log_prob runs operations without
    a position rule, so tracking keeps none of the node's own positions there; the mark keeps
    them, by the batch contract of torch's distributions: log p(z)[b] depends on z[b] alone.)"""
    torch.manual_seed(0)
    w = torch.randn(2, 3, requires_grad=True)
    with scg.Graph() as g:
        h = scg.sample(Bernoulli(logits=torch.zeros(4, 2)), name="h")
        z = scg.sample(_CASES[case](h, w), name="z", estimator=scg.ScoreFunction())
        node = g.node("z")
        assert isinstance(node, scg.StochasticNode)
        lp = scg.log_prob(z)
        recomputed = node.dist.log_prob(z.clone())  # (the path taken before: under tracking)
        scg.cost(lp.reshape(lp.shape[0], -1).sum(-1), name="c_lp")
        scg.cost(recomputed.reshape(recomputed.shape[0], -1).sum(-1), name="c_recomputed")
    assert lp is node.log_prob  # the score term's tensor: not computed twice
    assert torch.equal(lp, recomputed)
    rules = not case.startswith("multivariate")
    if rules:
        assert _tracked_marks(g, lp) == _tracked_marks(g, recomputed)
    else:
        assert g.mask(lp) == g.mask(recomputed)
    g.surrogate_loss()
    for n in ("h", "z"):
        assert g.influences(n, "c_lp") == g.influences(n, "c_recomputed")
        if rules or n == "h":
            assert g.credit(n, "c_lp") == g.credit(n, "c_recomputed"), n
    if not rules:
        assert (g.credit("z", "c_lp"), g.credit("z", "c_recomputed")) == ("per-element", "whole-plate")


W1 = torch.tensor([[0.3, -0.6], [0.8, 0.1]], requires_grad=True)
W2 = torch.tensor([[0.5, -0.4], [-0.2, 0.7]], requires_grad=True)


def _two_layers_of(w1: torch.Tensor, w2: torch.Tensor) -> None:
    """Two examples, a second layer computed from each example's first, a cost per example from
    the second layer's log-probability alone. ``w1, w2``: (2, 2), or (P, 2, 2) for P particles
    (each its own leading row of every node and cost)."""
    h = scg.sample(Bernoulli(logits=w1), name="h")  # (..., 2, 2)
    z = scg.sample(Independent(Bernoulli(logits=h @ w2), 1), name="z")  # batch (..., 2)
    scg.cost(scg.log_prob(z) * torch.tensor([1.0, -3.0]), name="c")


def _two_layers() -> None:
    _two_layers_of(W1, W2)


def test_costs_from_a_tracked_log_prob_are_unbiased_and_a_mismarked_twin_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The z-test of ``scg.testing.check_unbiased`` against the exact gradient, tracked: the
    marked log-probability credits both layers with their example's cost; a twin whose mark
    drops the node's own bit (as if the log-probability did not depend on the sample) leaves
    the second layer's score term without that cost, and fails."""
    exact = scg.testing.exact_gradient(_two_layers, [W1, W2])
    report = scg.testing.check_unbiased(
        _two_layers, [W1, W2], n=2000, exact=exact, batched=_two_layers_of, particles=500
    )
    assert report.passed, str(report)
    real = scored_log_prob

    def mismarked(g: GraphRecord, node: scg.StochasticNode) -> torch.Tensor | None:
        lp = real(g, node)
        if lp is not None:
            g.set_mask(lp, g.mask(lp) & ~(1 << node.index), g.foreign(lp))
        return lp

    monkeypatch.setattr(scg.graph.log_prob, "scored_log_prob", mismarked)
    biased = scg.testing.check_unbiased(
        _two_layers, [W1, W2], n=2000, exact=exact, batched=_two_layers_of, particles=500
    )
    assert not biased.passed, str(biased)


# An enumerated node drawn from a score-function node, with a cost from its log-probability.
# Under tracking, ``Categorical.log_prob`` broadcast the logits over the enumerated dimension
# (``broadcast_tensors``: a new dimension that holds no samples of its own), so the parent's
# examples were foreign from the sample dimension on: whole-plate for the default surrogate and
# refused with dice=True ("mixes the batch elements of 'u'"), for a scalar u as for a batched one
# with a cost per example. The mark from the distribution's parameters keeps them in place.
A = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
TH = torch.tensor([0.1, -0.4, 0.7], dtype=torch.float64, requires_grad=True)
WU = torch.tensor([0.5, -0.2, 0.3], dtype=torch.float64, requires_grad=True)
T3 = torch.tensor([1.0, 2.0, -1.5], dtype=torch.float64)
UZ_PARAMS = [A, TH, WU]

_MIXING: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "scalar u": lambda u: u,
    "batched u, per example": lambda u: u,
    "u flipped into z's logits": lambda u: u.flip(0),
    "u's batch mean in z's logits": lambda u: u.mean() + 0 * u,
}


def _u_then_enumerated_z(case: str) -> Callable[[], None]:
    def program() -> None:
        shift = (
            torch.zeros((), dtype=torch.float64)
            if case == "scalar u"
            else torch.tensor([0.0, 0.4], dtype=torch.float64)
        )
        u = scg.sample(Bernoulli(torch.sigmoid(A + shift)), name="u")
        g = _MIXING[case](u)
        logits = TH + (g if g.dim() == 0 else g[:, None]) * WU
        z = scg.sample(Categorical(logits=logits), name="z", estimator=scg.estimators.Enumerate())
        scg.cost(T3[z] + 0.7 * scg.log_prob(z), name="c")

    return program


def _expected_dice_hessian(program: Callable[[], None], shape: tuple[int, ...]) -> torch.Tensor:
    """E over u of the Hessian of the DiCE objective (z enumerated in it): u forced to each of
    its values, each run weighted by its probability (held fixed), as `expected_estimate` does for
    the gradient."""
    flat = torch.cat([p.reshape(-1) for p in UZ_PARAMS])
    total = torch.zeros(flat.numel(), flat.numel(), dtype=torch.float64)
    for values in itertools.product([0.0, 1.0], repeat=math.prod(shape)):
        value = torch.tensor(values, dtype=torch.float64).reshape(shape)
        weight: list[torch.Tensor] = []

        def intervene(
            name: str,
            step: int | None,
            dist: Distribution,
            sample_shape: torch.Size,
            value: torch.Tensor = value,
            weight: list[torch.Tensor] = weight,
        ) -> torch.Tensor | None:
            if name != "u":
                return None
            weight.append(dist.log_prob(value).sum().exp().detach())
            return value.clone()

        with scg.Graph(intervene=intervene) as g:
            program()
        loss = g.surrogate_loss(dice=True)
        grad = torch.cat([x.reshape(-1) for x in torch.autograd.grad(loss, UZ_PARAMS, create_graph=True)])
        rows = [
            torch.cat([x.reshape(-1) for x in torch.autograd.grad(gi, UZ_PARAMS, retain_graph=True)]) for gi in grad
        ]
        total += weight[0] * torch.stack(rows)
    return total


@pytest.mark.parametrize("case", ["scalar u", "batched u, per example"])
def test_a_cost_from_an_enumerated_nodes_log_prob_keeps_its_parents_examples(case: str) -> None:
    """u ~ Bernoulli(sigmoid(a)), z ~ Categorical(logits=θ + u·w) enumerated, c = t[z] + 0.7·log p(z):
    per-element credit for u, and the exact gradient with each surrogate (dice=True: the exact
    Hessian too; it was refused). Scalar u: d/da -0.00845, d/dθ [0.363255, 0.205789, -0.569044],
    d/dw [0.240328, 0.082297, -0.322624], the estimator's mean with either surrogate."""
    program = _u_then_enumerated_z(case)
    with scg.Graph() as g:
        program()
    g.surrogate_loss(dice=True)
    assert g.credit("u", "c") == "per-element"
    exact = scg.testing.exact_gradient(program, UZ_PARAMS)
    for kwargs in ({"dice": True}, {"dice": False}):
        got = scg.testing.expected_estimate(program, UZ_PARAMS, keep=("z",), surrogate_kwargs=kwargs)
        for e, x in zip(exact, got):
            torch.testing.assert_close(x, e, rtol=1e-9, atol=1e-12)
    hessian = scg.testing.exact_hessian(program, UZ_PARAMS)
    torch.testing.assert_close(
        _expected_dice_hessian(program, () if case == "scalar u" else (2,)), hessian, rtol=1e-9, atol=1e-12
    )


@pytest.mark.parametrize("case", ["u flipped into z's logits", "u's batch mean in z's logits"])
def test_an_enumerated_node_whose_logits_mix_its_parents_examples_stays_whole_plate(case: str) -> None:
    """The twins: z's example i drawn from u's other example (or from u's mean) mixes u's
    examples: whole-plate credit and the exact gradient by default, refused with dice=True."""
    program = _u_then_enumerated_z(case)
    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.credit("u", "c") == "whole-plate"
    exact = scg.testing.exact_gradient(program, UZ_PARAMS)
    got = scg.testing.expected_estimate(program, UZ_PARAMS, keep=("z",))
    for e, x in zip(exact, got):
        torch.testing.assert_close(x, e, rtol=1e-9, atol=1e-12)
    with scg.Graph() as g:
        program()
    with pytest.raises(scg.SCGError, match="mixes the batch elements of stochastic node 'u'"):
        g.surrogate_loss(dice=True)
