"""A batched node meets a cost that holds another node's sample dimension (helper-86's hunt).

``b ~ Bernoulli`` of batch (2,) drawn once, ``z`` drawn with ``n=2``: a cost ``t[z][:, None] * g(b)``
broadcasts ``b`` behind ``z``'s sample dimension. Every such broadcast used to mark ``b`` foreign
from position 0, which the plate check read as "inside the cost's sample dimensions" and credited
per element, whatever ``g`` did to ``b``'s examples before (a flip, a batch-centred reward) or
where the broadcast put them (behind another dimension). The positions now move right with the
dimensions the broadcast adds for sample dimensions (`scg.graph.sample_shifts.samples_inserted`).

A second hunt (helper-91) found four more ways to the same bias, each tested at the end: a batch
dimension laid over another node's samples by a same-rank broadcast (batch size = n), a mixing at a
position past every node's rank, dropped before later nodes filled the size-1 dimensions in front,
an ancestor's position carried unchanged into a cost that reduced a node's samples, and a node
drawn from its parent's combined samples (read as its own sample dimension). Last, two programs
where a mark inside the cost's sample dimensions (a broadcast into them, an enumerated child's
mark on its parent) hid a mixing of the batch at a later position (a mutation sweep's find).

The checks are exact: the mean of the estimator over every joint draw (intervened, weighted by its
probability) against the gradient of E[Σ costs] enumerated in plain torch.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Distribution, Normal

import scg
from scg.testing import expected_estimate

T = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
X = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)  # (T, B) with T == B
W = torch.tensor([1.0, 3.0], dtype=torch.float64)
N = 2  # z's samples

#: g(z (k,), b (2,)) -> the cost, k leading
Cost = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

MIXING: dict[str, Cost] = {
    "flip before the broadcast": lambda z, b: T[z][:, None] * b.flip(-1),
    "batch-centred reward": lambda z, b: T[z][:, None] * (b - b.mean()),
    "batch total broadcast back": lambda z, b: T[z][:, None] * b + b.sum(),
    "another dimension between (T, B)": lambda z, b: T[z][:, None, None] * X * b,
    # (conservative: copies made before the samples meet them are the program's own dimension; an
    # expand's too, which might never meet them: helper-94, b.expand(2, 2) * X was per element)
    "repeated before the broadcast": lambda z, b: T[z][:, None] * b.repeat(z.shape[0], 1),
    "expanded before the broadcast": lambda z, b: T[z][:, None] * b.expand(z.shape[0], 2),
}


def _written_whole(z: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``x[...] = x * b``: a write of the whole of x (was refused as a mixing of z's samples)."""
    x = T[z][:, None] * torch.ones(2, dtype=torch.float64)
    x[...] = x * b
    return x


LINED_UP: dict[str, Cost] = {
    "written whole, x[...] = x * b": _written_whole,
    "broadcast": lambda z, b: T[z][:, None] * b,
    "unsqueeze": lambda z, b: b.unsqueeze(0) * T[z][:, None],
    "a[None], then a reduction of a trailing dimension": lambda z, b: (b[None, :, None] * T[z][:, None, None]).sum(-1),
}


def _params() -> tuple[torch.Tensor, torch.Tensor]:
    th = torch.tensor([0.3, -0.4, 0.8], dtype=torch.float64, requires_grad=True)
    ph = torch.tensor([0.1, 0.5], dtype=torch.float64, requires_grad=True)
    return th, ph


def _program(cost: Cost, th: torch.Tensor, ph: torch.Tensor) -> None:
    b = scg.sample(Bernoulli(logits=ph), name="b")
    z = scg.sample(Categorical(logits=th), name="z", n=N)
    scg.cost(cost(z, b), name="c")


def _true_gradient(cost: Cost) -> tuple[torch.Tensor, torch.Tensor]:
    """∇ E[Σ c], enumerated in plain torch (the objective averages z's iid samples: one will do)."""
    th, ph = _params()
    expectation = torch.zeros((), dtype=torch.float64)
    for bits in itertools.product((0.0, 1.0), repeat=2):
        b = torch.tensor(bits, dtype=torch.float64)
        pb = Bernoulli(logits=ph).log_prob(b).sum().exp()
        for k in range(3):
            pz = torch.softmax(th, 0)[k]
            expectation = expectation + pb * pz * cost(torch.tensor([k]), b).sum()
    gth, gph = torch.autograd.grad(expectation, [th, ph])
    return gth, gph


def _estimate_and_credit(cost: Cost) -> tuple[list[torch.Tensor], str]:
    """E[∇ surrogate] over every joint draw of b and z's samples, and the credit (b, c) got."""
    th, ph = _params()
    mean = expected_estimate(lambda: _program(cost, th, ph), [th, ph])
    torch.manual_seed(0)
    with scg.Graph() as g:
        _program(cost, th, ph)
    g.surrogate_loss()
    return mean, g.credit("b", "c")


@pytest.mark.parametrize("kind", sorted(MIXING))
def test_a_mixing_before_or_around_the_broadcast_gets_whole_plate_credit(kind: str) -> None:
    (gth, gph), credit = _estimate_and_credit(MIXING[kind])
    true_th, true_ph = _true_gradient(MIXING[kind])
    assert credit == "whole-plate"
    torch.testing.assert_close(gph, true_ph, rtol=1e-9, atol=1e-12)  # (was 0 for the flip: [0.39, 0.37] expected)
    torch.testing.assert_close(gth, true_th, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", sorted(LINED_UP))
def test_a_lined_up_broadcast_keeps_per_element_credit(kind: str) -> None:
    (gth, gph), credit = _estimate_and_credit(LINED_UP[kind])
    true_th, true_ph = _true_gradient(LINED_UP[kind])
    assert credit == "per-element"
    torch.testing.assert_close(gph, true_ph, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(gth, true_th, rtol=1e-9, atol=1e-12)


def _enumerated(mix: bool, th: torch.Tensor, ph: torch.Tensor) -> scg.Graph:
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=ph), name="z", estimator=scg.estimators.Enumerate())  # (2, 2)
        v = scg.sample(Categorical(logits=th), name="v", n=2)  # (2,)
        zb = z.flip(-1) if mix else z
        scg.cost(T[v][:, None, None] * (zb * W)[None], name="c")  # (2_v, 2_z, 2)
    return g


def test_an_enumerated_node_mixed_before_another_nodes_sample_dimension_is_refused() -> None:
    """The same mixing without v is refused (lockstep enumeration is exact per example only); with
    v's sample dimension broadcast in front it was accepted, with a wrong value and gradient."""
    with pytest.raises(scg.SCGError, match=r"cost node 'c'.*mixes the batch elements of the enumerated.*'z'"):
        _enumerated(True, *_params()).surrogate_loss()


def test_an_enumerated_node_lined_up_behind_another_nodes_sample_dimension_is_exact() -> None:
    th, ph = _params()
    g = _enumerated(False, th, ph)
    loss = g.surrogate_loss()
    v = g.node("v").value
    # E[c] = E_v[T[v]] · Σ_b W_b σ(ph_b), with v's two samples averaged and z's values weighted
    expected_value = T[v].mean() * (W * torch.sigmoid(ph.detach())).sum()
    torch.testing.assert_close(loss.detach(), expected_value)
    (gph,) = torch.autograd.grad(loss, [ph])
    s = torch.sigmoid(ph.detach())
    torch.testing.assert_close(gph, T[v].mean() * W * s * (1 - s))


# ------------------------------------------------------------ helper-91's programs, exactly
# A program takes `ops`: ``ops.sample(dist, name, n=None, estimator=None)`` and ``ops.cost(x, name,
# div=1.0, reduced=None)``. Under scg they are scg.sample / scg.cost; for the truth every draw is
# enumerated jointly (a node with n=k: its k samples at once; the estimator ignored) and each cost
# summed, times 1/div (the objective's average over the sample dimensions the cost keeps).


class _Scg:
    @staticmethod
    def sample(
        dist: Distribution, name: str, n: int | None = None, estimator: scg.estimators.Estimator | None = None
    ) -> torch.Tensor:
        return scg.sample(dist, name=name, n=n, estimator=estimator)

    @staticmethod
    def cost(x: torch.Tensor, name: str, div: float = 1.0, reduced: torch.Tensor | None = None) -> None:
        scg.cost(x, name=name, reduced=reduced)


def _exact(
    program: Callable[[object], None], params: list[torch.Tensor], keep: tuple[str, ...] = ()
) -> list[torch.Tensor]:
    """E[∇ surrogate] over every joint draw (each graph intervened, weighted by its probability;
    the nodes named in ``keep`` draw as their estimator does, e.g. an enumerated one)."""
    return expected_estimate(lambda: program(_Scg), params, keep=keep)


def _joint_values(dist: Distribution, shape: Sequence[int] = ()) -> list[torch.Tensor]:
    """Every value of a finite node drawn from ``dist`` with sample shape ``shape``: each element of
    its (*shape, *batch) grid takes each value of the support, independently (K^elements tensors of
    shape (*shape, *batch, *event), the first element's choice slowest)."""
    support = dist.enumerate_support(expand=True)  # (K, *batch, *event)
    k = support.shape[0]
    full = (*shape, *dist.batch_shape)
    event = tuple(dist.event_shape)
    grid = support.reshape((k, *[1] * len(shape), *support.shape[1:])).expand((k, *full, *event))
    n = math.prod(full)
    flat = grid.reshape((k, n, *event))
    cols = torch.arange(n)
    return [flat[torch.tensor(combo), cols].reshape(full + event) for combo in itertools.product(range(k), repeat=n)]


class _Branch(Exception):
    def __init__(self, dist: Distribution, shape: tuple[int, ...]) -> None:
        self.dist, self.shape = dist, shape


def _truth(program: Callable[[object], None], params: list[torch.Tensor]) -> list[torch.Tensor]:
    """∇ E[Σ costs], every draw enumerated in plain torch."""
    expectation: list[torch.Tensor] = []

    def run(prefix: list[torch.Tensor]) -> None:
        state = {"i": 0}
        logp: list[torch.Tensor] = []
        total: list[torch.Tensor] = []

        class Plain:
            @staticmethod
            def sample(dist: Distribution, name: str, n: int | None = None, estimator: object = None) -> torch.Tensor:
                if state["i"] == len(prefix):
                    raise _Branch(dist, () if n is None else (n,))
                value = prefix[state["i"]]
                state["i"] += 1
                logp.append(dist.log_prob(value).sum())
                return value.clone()

            @staticmethod
            def cost(x: torch.Tensor, name: str, div: float = 1.0, reduced: torch.Tensor | None = None) -> None:
                total.append(x.sum() / div)

        try:
            program(Plain)
        except _Branch as b:
            for v in _joint_values(b.dist, b.shape):
                run([*prefix, v])
            return
        expectation.append(torch.stack(logp).sum().exp() * torch.stack(total).sum())

    run([])
    return list(torch.autograd.grad(torch.stack(expectation).sum(), params))


def _pb() -> torch.Tensor:
    return torch.tensor([[0.2, -0.6], [0.5, 0.1]], dtype=torch.float64, requires_grad=True)


def test_a_batch_dimension_laid_over_another_nodes_samples_is_whole_plate() -> None:
    """b (2, 2) and z (n=2): ``T[z][:, None] * b`` puts b's rows on z's samples (batch size = n:
    no shape tells); b[i, j] was credited with c[:, i] and its d/dpb[0, 1], [1, 0] were 0."""
    pb, th = _pb(), _params()[0]

    def program(ops: Any) -> None:
        b = ops.sample(Bernoulli(logits=pb), "b")
        z = ops.sample(Categorical(logits=th), "z", n=2)
        ops.cost(T[z][:, None] * b * W, "c", div=2)

    got, want = _exact(program, [pb, th]), _truth(program, [pb, th])
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-12)


def test_a_mixing_at_a_position_past_every_node_then_filled_by_samples_is_kept() -> None:
    """``b[None, None].flip(-1)`` flips at position 2, past every node's rank when it runs; two
    nodes drawn later fill the size-1 dimensions, so the flip is b's own position 0."""
    th, pa = _params()
    tw = torch.tensor([0.1, 0.7, -0.2], dtype=torch.float64, requires_grad=True)

    def program(ops: Any) -> None:
        z = ops.sample(Categorical(logits=th), "z", n=2)
        b = ops.sample(Bernoulli(logits=pa), "b")
        y = b[None, None].flip(-1)
        w = ops.sample(Categorical(logits=tw), "w", n=2)
        ops.cost(T[w][:, None, None] * T[z][None, :, None] * y * W, "c", div=4)

    got, want = _exact(program, [th, pa, tw]), _truth(program, [th, pa, tw])
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-12)


def test_an_ancestor_mixed_into_a_node_whose_samples_a_cost_reduced_is_whole_plate() -> None:
    """a (2,) mixed into j's parameters (n=2); ``j.mean(0)`` declared ``reduced=j``: a's
    position in j (1, after j's sample dimension) was carried into the cost unchanged, past its
    last dimension, and a was credited per element (d/dpa 0 against [0.18, 0.056])."""
    pa = _params()[1]

    def program(ops: Any) -> None:
        a = ops.sample(Bernoulli(logits=pa), "a")
        j = ops.sample(Bernoulli(logits=a.flip(-1) - 0.5), "j", n=2)
        ops.cost(j.mean(0) * W, "c", reduced=j)

    (got,), (want,) = _exact(program, [pa]), _truth(program, [pa])
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)


def test_a_node_drawn_from_its_parents_combined_samples_is_refused() -> None:
    """``i ~ Bernoulli(j.mean(0))`` with i's batch the size of j's samples: the combined samples
    were read as i's own sample dimension (half the gradient); refused as a mixing now."""
    pa = _params()[1]
    with scg.Graph() as g:
        j = scg.sample(Bernoulli(logits=pa), name="j", n=2)  # (2, 2)
        i = scg.sample(Bernoulli(logits=j.mean(0) - 0.5), name="i")  # (2,)
        scg.cost(i * W, name="c")
    with pytest.raises(scg.SCGError, match=r"stochastic node 'i'.*mixes the samples of stochastic node 'j'"):
        g.surrogate_loss()


def test_an_enumerated_node_mixed_at_a_position_past_every_node_is_refused() -> None:
    th, pa = _params()
    with scg.Graph() as g:
        e = scg.sample(Bernoulli(logits=pa), name="e", estimator=scg.estimators.Enumerate())  # (2, 2)
        y = e[:, None, None].flip(-1)  # (2, 1, 1, 2)
        w1 = scg.sample(Categorical(logits=th), name="w1", n=2)
        w2 = scg.sample(Categorical(logits=th), name="w2", n=2)
        scg.cost(T[w2][:, None, None, None] * T[w1][None, :, None, None] * y.permute(1, 2, 0, 3) * W, name="c")
    with pytest.raises(scg.SCGError, match=r"mixes the batch elements of the enumerated stochastic node 'e'"):
        g.surrogate_loss()


@pytest.mark.parametrize("loc", ["b", "b.flip(-1)", "rows"])
def test_a_parameter_broadcast_behind_another_nodes_samples_in_a_distribution(loc: str) -> None:
    """``Normal(loc=b, scale=f(z))``: ``b`` (2,) is expanded by the distribution's own
    ``broadcast_all`` before it meets z's samples, which is conservative (whole-plate, unbiased);
    so are a mixed ``b`` and a parameter whose own rows lie on z's samples (``rows``)."""
    th, ph = _params()
    with scg.Graph() as g:
        b = scg.sample(Bernoulli(logits=ph), name="b")  # (2,)
        z = scg.sample(Categorical(logits=th), name="z", n=2)  # (2,)
        mean = {"b": b, "b.flip(-1)": b.flip(-1), "rows": b[:, None] * W}[loc]
        x = scg.sample(Normal(mean, T[z][:, None].abs() + 1), name="x")  # (2_z, 2)
        scg.cost(x * W, name="c")
    g.surrogate_loss()
    assert g.credit("b", "c") == "whole-plate"


def test_a_parameter_whose_own_rows_lie_on_another_nodes_samples_is_whole_plate() -> None:
    """``Normal(loc=b2, scale=f(z))`` with ``b2`` a (2, 2) node and z's n = 2 samples: b2's rows
    lie on z's samples (it was credited per element: x[s] was read as b2's row s's alone)."""
    th = _params()[0]
    with scg.Graph() as g:
        b2 = scg.sample(Bernoulli(logits=_pb()), name="b2")  # (2, 2)
        z = scg.sample(Categorical(logits=th), name="z", n=2)  # (2,)
        x = scg.sample(Normal(b2, T[z][:, None].abs() + 1), name="x")  # (2_z, 2)
        scg.cost(x * W, name="c")
    g.surrogate_loss()
    assert g.credit("b2", "c") == "whole-plate"


def test_an_expanded_node_that_never_meets_a_sample_dimension_is_whole_plate() -> None:
    """``b.expand(2, 2) * X`` with a node drawn with ``n=2`` elsewhere in the graph: b's examples
    lie along dimension 1; taking the expand's new dimension for a place of samples credited b's
    element j with row j (helper-94: d/dφ [0.25, 0.94] against [1.00, 1.41])."""
    th, ph = _params()

    def program(ops: Any) -> None:
        ops.sample(Categorical(logits=th), "z", n=2)
        b = ops.sample(Bernoulli(logits=ph), "b")
        ops.cost(b.expand(2, 2) * X, "c")

    got, want = _exact(program, [th, ph]), _truth(program, [th, ph])
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["flip before the broadcast", "batch-centred reward"])
def test_a_named_deterministic_node_between_keeps_the_mixing_seen(kind: str) -> None:
    """``d = scg.deterministic(T[z][:, None] * b.flip(-1))``, then a cost of d: d had no sample
    dimensions in the plan, so b's position in d moved past b's rank (helper-94: d/dφ 0 against
    [1.18, 0.37])."""
    th, ph = _params()

    class Named:
        @staticmethod
        def sample(dist: Distribution, name: str, n: int | None = None) -> torch.Tensor:
            return scg.sample(dist, name=name, n=n)

        @staticmethod
        def cost(x: torch.Tensor, name: str, div: float = 1.0, reduced: torch.Tensor | None = None) -> None:
            scg.cost(scg.deterministic(x, name="d") * 1.0, name=name)

    def program(ops: Any) -> None:
        b = ops.sample(Bernoulli(logits=ph), "b")
        z = ops.sample(Categorical(logits=th), "z", n=N)
        ops.cost(MIXING[kind](z, b) * W, "c", div=N)

    got = _exact(lambda ops: program(Named if ops is _Scg else ops), [th, ph])
    want = _truth(program, [th, ph])
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------ a mark inside a sample dimension
# A node can be foreign at a position inside the cost's sample dimensions for a harmless reason (a
# broadcast into them, or the mark an enumerated child puts on its parents at its support
# dimension) and also mix the batch at a later position through another path. positions.normalize
# keeps a node's smallest position only, and the plate check read a position among the cost's
# sample dimensions as "not mixed": the later mark was lost and the pair credited per element.
# (Found by a mutation sweep of the credit core; both programs were biased before the fix.)


def test_a_node_broadcast_into_a_sample_dimension_still_mixes_through_another_path() -> None:
    """u (2,) is broadcast into v's sample dimension by ``v * (1 + u)`` (a mark at position 0) and
    mixes the batch through v's logits φ·Σu (position 1). The mark at 0 hid the mixing: u was
    credited per element, and the estimator's mean of ∇_θ was [0.204, 0.207] against the exact
    [0.267, 0.275]."""
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    phi = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)

    def program(ops: Any) -> None:
        u = ops.sample(Bernoulli(logits=theta), "u")  # (2,)
        v = ops.sample(Bernoulli(logits=(phi * u.sum() - 0.5).expand(2)), "v", n=2)  # (2_v, 2): mixes u
        ops.cost(v * (1.0 + u), "c", div=2)  # u broadcast into (2_v, 2): marked at 0, in the sample dim

    with scg.Graph() as g:
        program(_Scg)
    g.surrogate_loss()
    assert g.credit("u", "c") == "whole-plate"
    for x, y in zip(_exact(program, [theta, phi]), _truth(program, [theta, phi])):
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-12)


def test_the_parent_of_an_enumerated_node_that_mixes_the_batch_gets_whole_plate_credit() -> None:
    """e ~ Categorical((φ·Σu)·[1, 0, −1] expanded to (2, 3)), ``Enumerate()``: e marks its parent
    u at its support dimension (position 0 of the cost), and u also mixes the batch through Σu.
    The mark at 0 hid the mixing: u was credited per element, and the estimator's mean of ∇_θ
    was exactly half the exact gradient ([0.0399, 0.0251] against [0.0798, 0.0501])."""
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    phi = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    table = torch.tensor([1.0, 3.0, -1.0], dtype=torch.float64)

    def program(ops: Any) -> None:
        u = ops.sample(Bernoulli(logits=theta), "u")  # (2,)
        logits = (phi * u.sum() * torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64)).expand(2, 3)
        e = ops.sample(Categorical(logits=logits), "e", estimator=scg.estimators.Enumerate())  # (3_e, 2)
        ops.cost(table[e], "c")

    with scg.Graph() as g:
        program(_Scg)
    g.surrogate_loss()
    assert g.credit("u", "c") == "whole-plate"
    for x, y in zip(_exact(program, [theta, phi], keep=("e",)), _truth(program, [theta, phi])):
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------ a place for samples left unfilled
# ``z[:, None]`` of z (n, B, D) puts a size-1 dimension in front of z's examples as a place for
# samples (a later broadcast may fill it): z's positions move right with its dimensions and stay
# unmarked. When nothing fills it, the cost (n, 1, B, D) has z's examples one place right of the
# cost's: the plate check compared them place by place and aligned the cost by leading dimensions,
# crediting z[s, b, d] with c[s, 0, d, :] (found by helper hB; biased since the places were
# introduced: the estimator's mean had 0 where d/dφ[0, 1] = 0.705 and d/dφ[1, 0] = -0.489).

M = torch.tensor([[1.0, 3.0], [-2.0, 0.5]], dtype=torch.float64)

UNFILLED: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "z[:, None] * M": lambda z: z[:, None] * M,
    "z[:, None] * M, then a trailing sum": lambda z: (z[:, None] * M).sum(-1),
    "z.unsqueeze(1), a trailing sum, * M[:, 0]": lambda z: z.unsqueeze(1).sum(-1) * M[:, 0],
}


@pytest.mark.parametrize("kind", sorted(UNFILLED))
def test_a_place_for_samples_left_unfilled_is_whole_plate_and_exact(kind: str) -> None:
    pb = _pb()
    cost = UNFILLED[kind]

    def program(ops: Any) -> None:
        z = ops.sample(Bernoulli(logits=pb), "z", n=2)  # (2, 2, 2)
        ops.cost(cost(z), "c", div=2)

    with scg.Graph() as g:
        program(_Scg)
    g.surrogate_loss()
    assert g.credit("z", "c") == "whole-plate"
    (got,), (want,) = _exact(program, [pb]), _truth(program, [pb])
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("filled", [False, True], ids=["no place", "the place filled by w's samples"])
def test_examples_in_line_with_the_cost_keep_per_element_credit(filled: bool) -> None:
    """The sound twins: the same cost without the place, and with w's samples in it."""
    pb, tw = _pb(), _params()[0]

    def program(ops: Any) -> None:
        z = ops.sample(Bernoulli(logits=pb), "z", n=2)  # (2, 2, 2)
        if filled:
            w = ops.sample(Categorical(logits=tw[:2]), "w", n=2)  # (K = 2: 1024 joint draws)
            ops.cost(T[w][:, None, None, None] * z[None] * M, "c", div=4)  # (2_w, 2_z, 2, 2)
        else:
            ops.cost(z * M, "c", div=2)

    params = [pb, tw] if filled else [pb]
    with scg.Graph() as g:
        program(_Scg)
    g.surrogate_loss()
    assert g.credit("z", "c") == "per-element"
    for x, y in zip(_exact(program, params), _truth(program, params)):
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-12)
