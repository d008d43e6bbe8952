"""Per-example credit is verified, not guessed from shapes (issue 11, class 1).

Each program below has a batch of B examples whose cost *mixes* the examples (a time-major stack,
a cumsum over the batch, batch-normalized rewards, a joint decoder of a bit vector). Crediting
each element with "its own" cost elements (the old rule: line up leading dimensions) is biased
there — shown by building that estimator by hand and letting ``scg.testing.compare`` reject it —
while scg falls back to whole-plate credit: its estimator's mean over every value of the node is
exactly the gradient (``expected_estimate``), and ``scg.testing`` accepts it on K-sample graphs.
Programs that do keep examples apart still get per-element credit (lower variance).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, OneHotCategorical

import scg
import scg.testing as st
from scg.testing import expected_estimate

Cost = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

B = 3
W = torch.tensor([[0.9, -1.3, 0.4], [0.2, 0.8, -1.1], [-0.7, 0.5, 1.6]], dtype=torch.float64)


def _theta() -> torch.Tensor:
    return torch.tensor([0.4, -0.6, 0.9], dtype=torch.float64, requires_grad=True)


def _time_major(z: torch.Tensor, th: torch.Tensor) -> torch.Tensor:
    # (..., T, B) with T == B: row t holds step t of every example
    zf = z.to(th.dtype)
    return torch.stack([zf * W[t] + th[..., t, None] for t in range(B)], dim=-2)


def _cumsum(z: torch.Tensor, th: torch.Tensor) -> torch.Tensor:
    return (z.to(th.dtype) * W[0]).cumsum(-1) ** 2 + th


def _batch_normalized(z: torch.Tensor, th: torch.Tensor) -> torch.Tensor:
    r = z.to(th.dtype) * W[1] + th
    return (r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + 1.0)


def _matmul(z: torch.Tensor, th: torch.Tensor) -> torch.Tensor:
    return (z.to(th.dtype) @ W.T - 0.5) ** 2 + th  # W @ z per example vector


def _sort(z: torch.Tensor, th: torch.Tensor) -> torch.Tensor:
    ranks = torch.tensor([4.0, -3.0, 1.0], dtype=th.dtype)
    return torch.sort(z.to(th.dtype) * W[2], dim=-1).values * ranks + th


def _permuted(z: torch.Tensor, th: torch.Tensor) -> torch.Tensor:
    perm = torch.tensor([2, 0, 1])
    return (z.to(th.dtype) * W[1])[..., perm] ** 2 + th


#: each cost takes the batch of B examples in the last dimension of z, so a leading sample
#: dimension (``scg.sample(..., n=k)``) passes through it untouched
MIXING: dict[str, Cost] = {
    "time_major": _time_major,
    "cumsum": _cumsum,
    "batch_normalized": _batch_normalized,
    "matmul": _matmul,
    "sort": _sort,
    "permuted": _permuted,
}

#: the statistical checks draw N_GRAPHS graphs of a node with K samples (``n=K``): each estimate
#: is the mean of K independent single-sample estimates, so the z-test has the power of
#: N_GRAPHS * K single draws at the price of N_GRAPHS graphs
N_GRAPHS, K = 50, 100


def _program(cost: Cost, th: torch.Tensor, n: int | None = None) -> Callable[[], None]:
    def run() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z", n=n)  # (B,), or (n, B)
        scg.cost(cost(z, th), name="c")

    return run


def _per_draw_gradients(
    th: torch.Tensor, seed: int, own: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
) -> torch.Tensor:
    """A hand-built score-function estimator of Bernoulli(logits=th), vectorised over the draws:
    ``own(z, th_rep)`` returns (the detached learning signal per element of z, the cost to
    differentiate pathwise) for N_GRAPHS * K draws z; the gradients are averaged in groups of K,
    as the multi-sample graphs of the scg checks are."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        z = Bernoulli(logits=th.detach()).sample((N_GRAPHS * K,))
    reps = th.detach().expand(N_GRAPHS * K, *th.shape).clone().requires_grad_()
    signal, cost = own(z, reps)
    log_prob = z * reps - torch.nn.functional.softplus(reps)
    (g,) = torch.autograd.grad((log_prob * signal.detach()).sum() + cost.sum(), [reps])
    return g.reshape(N_GRAPHS, K, -1).mean(1)


def _old_per_element(cost: Cost, th: torch.Tensor, seed: int) -> torch.Tensor:
    """The old rule, by hand: element i credited with the cost elements whose leading index
    (after the draw dimension) is i."""

    def own(z: torch.Tensor, reps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = cost(z, reps)  # (draws, B, ...)
        return c.reshape(c.shape[0], B, -1).sum(-1), c

    return _per_draw_gradients(th, seed, own)


@pytest.mark.parametrize("kind", sorted(MIXING))
def test_mixing_cost_falls_back_to_whole_plate_credit(kind: str) -> None:
    """scg's estimator is exactly unbiased: its mean over the node's 8 values (each weighted by its
    probability) is the exact gradient. The per-element twin is rejected at |z| >= 2x the critical
    3.59 for every kind (seed 1, N_GRAPHS * K = 5000 draws: batch_normalized 83.5, matmul 76.0,
    permuted 38.8, cumsum 23.7, time_major 15.1, sort 11.1), so its bias is real and large."""
    th = _theta()
    (exact,) = st.exact_gradient(_program(MIXING[kind], th), [th])
    torch.testing.assert_close(expected_estimate(_program(MIXING[kind], th), [th])[0], exact, rtol=1e-9, atol=1e-12)
    for n in (None, K):
        with scg.Graph() as g:
            _program(MIXING[kind], th, n)()
        g.surrogate_loss()
        assert g.credit("z", "c") == "whole-plate", n
    old = st.compare(_old_per_element(MIXING[kind], th, seed=1), exact)
    assert not old.passed, f"{kind}: the per-element rule should be biased here: {old}"
    assert abs(float(old.z[old.worst])) > 2 * old.critical, f"{kind}: {old}"


def test_mixing_cost_over_a_sample_dimension_is_unbiased() -> None:
    """The whole-plate credit of K samples (``n=K``), z-tested the way a user would (N_GRAPHS
    estimates, each the mean of K draws). One kind stands for all: each gets the same credit for
    ``n=K`` (asserted above), so the same estimator code. The per-element twin of this kind is
    rejected at |z| = 15.1 on as many draws (above)."""
    th = _theta()
    exact = st.exact_gradient(_program(_time_major, th), [th])
    report = st.check_unbiased(_program(_time_major, th, K), [th], n=N_GRAPHS, seed=1, exact=exact)
    assert report.passed, str(report)


def _separate(z: torch.Tensor, th: torch.Tensor) -> torch.Tensor:
    zf = z.to(th.dtype)
    h = torch.stack([zf, 1 - zf], dim=-1) @ W[:2, :2]  # (..., B, 2): features mixed, rows kept
    return (h.softmax(-1)[..., 0] - 0.3) ** 2 + th * zf


def test_separate_examples_keep_per_element_credit_and_lower_variance() -> None:
    th = _theta()
    exact = st.exact_gradient(_program(_separate, th), [th])
    report = st.check_unbiased(_program(_separate, th, K), [th], n=N_GRAPHS, seed=2, exact=exact)
    assert report.passed, str(report)
    for n in (None, K):
        with scg.Graph() as g:
            _program(_separate, th, n)()
        g.surrogate_loss()
        assert g.credit("z", "c") == "per-element", n


def _bits(th: torch.Tensor, plates: int | None, n: int | None = None) -> None:
    """A latent bit vector (2, D) decoded jointly: each output element depends on all D bits."""
    z = scg.sample(Bernoulli(logits=th.reshape(2, 2)), name="z", plates=plates, n=n)
    decoded = z.to(th.dtype) @ W[:2, :2]  # (..., 2, D): row i from bits z[..., i, :]
    scg.cost((decoded - 0.4) ** 2, name="c")


def _bits_per_bit(th: torch.Tensor, seed: int) -> torch.Tensor:
    """The biased twin of ``_bits``, by hand: each bit credited with its own output element only."""

    def own(z: torch.Tensor, reps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = (z.reshape(-1, 2, 2).to(th.dtype) @ W[:2, :2] - 0.4) ** 2
        return c.reshape(z.shape), torch.zeros(())

    return _per_draw_gradients(th, seed, own)


def test_bit_vector_decoded_jointly() -> None:
    th = torch.tensor([0.3, -0.5, 0.8, 0.1], dtype=torch.float64, requires_grad=True)
    (exact,) = st.exact_gradient(lambda: _bits(th, None), [th])
    # exact: the estimator's mean over the 16 joint values of the bits; the per-bit twin is
    # rejected at |z| = 352 (critical 3.66; seed 3)
    for plates in (None, 1):
        mean = expected_estimate(lambda p=plates: _bits(th, p), [th])[0]  # type: ignore[misc]
        torch.testing.assert_close(mean, exact, rtol=1e-9, atol=1e-12, msg=f"plates={plates}")
    twin = st.compare(_bits_per_bit(th, seed=3), exact)
    assert not twin.passed, f"crediting each bit with its own element only should be biased here: {twin}"
    for n in (None, K):
        with scg.Graph() as g:
            _bits(th, None, n)
        g.surrogate_loss()
        assert g.credit("z", "c") == "whole-plate"  # the decoder mixes the bits' dimension
        with scg.Graph() as g:
            _bits(th, 1, n)  # declared: examples are plates, bits share credit
        g.surrogate_loss()
        assert g.credit("z", "c") == "per-element"


def test_time_major_equal_sizes_not_confused_by_shape() -> None:
    """(T, B) costs against (B,) nodes with T == B: aligned by tracking, not by size."""
    th = _theta()
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        scg.cost(_time_major(z, th), name="tm")  # (T, B): mixed
        scg.cost(_time_major(z, th).t(), name="bm")  # (B, T): per example again? no: t()
    g.surrogate_loss()
    assert g.credit("z", "tm") == "whole-plate"
    assert g.credit("z", "bm") == "whole-plate"  # stacked at dim 0 before the transpose
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        zf = z.to(th.dtype)
        scg.cost(torch.stack([zf * W[t] for t in range(B)], dim=1), name="bm")  # (B, T)
    g.surrogate_loss()
    assert g.credit("z", "bm") == "per-element"


def test_enumerate_over_coupled_batch_raises() -> None:
    th = _theta()
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z", estimator=scg.estimators.Enumerate())
        zf = z.to(th.dtype)  # (2, B)
        scg.cost(zf.cumsum(1) * W[0], name="c")
    with pytest.raises(
        scg.SCGError,
        match=r"cost node 'c'.*mixes the batch elements of the "
        r"enumerated stochastic node 'z'",
    ):
        g.surrogate_loss()


def test_cost_mixing_the_samples_of_a_node_raises() -> None:
    th = _theta()
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z", n=4)  # (4, B)
        r = z.to(th.dtype) * W[0]
        scg.cost(r - r.mean(0), name="centred")  # keeps the sample dim, mixes its slices
    with pytest.raises(
        scg.SCGError,
        match=r"cost node 'centred'.*mixes the samples of "
        r"stochastic node 'z'.*reduced=node",
    ):
        g.surrogate_loss()


@torch.library.custom_op("scgtest::row_tanh", mutates_args=())
def _row_tanh(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x)


@_row_tanh.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _row_program(th: torch.Tensor) -> scg.Graph:
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=torch.stack([th, -th], -1)), name="z")  # (B,)
        x = torch.nn.functional.one_hot(z, 2).to(th.dtype)  # (B, 2)
        h = torch.lstm_cell(x, (x, x), torch.ones(8, 2, dtype=th.dtype), torch.ones(8, 2, dtype=th.dtype))[
            0
        ]  # rows kept
        scg.cost(_row_tanh(h).sum(-1), name="c")
    g.surrogate_loss()
    return g


def test_custom_op_needs_a_rule_and_declare_rowwise_gives_it() -> None:
    th = _theta()
    assert _row_program(th).credit("z", "c") == "whole-plate"  # unknown op: mixing
    scg.declare_rowwise(_row_tanh)
    assert _row_program(th).credit("z", "c") == "per-element"


def test_unknown_op_is_treated_as_mixing() -> None:
    th = _theta()
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th), name="z")
        y = torch.fft.fft(z.to(th.dtype)).real  # no rule: mixing
        scg.cost(y**2, name="c")
    g.surrogate_loss()
    assert g.credit("z", "c") == "whole-plate"


def test_particle_batched_estimates_refuse_a_program_that_mixes_particles() -> None:
    th = _theta()

    def batched(reps: torch.Tensor) -> None:  # (P, 3)
        z = scg.sample(Bernoulli(logits=reps), name="z")  # (P, 3)
        scg.cost(z.to(reps.dtype).cumsum(0) * W[0], name="c")  # mixes particles

    with pytest.raises(scg.SCGError, match=r"mixes the particles of stochastic node 'z'"):
        st.estimate_gradients_batched(batched, [th], 8, particles=4)


def test_particle_batched_estimates_refuse_particles_declared_plates_zero() -> None:
    """``Graph(plates=0)``: each particle's score is credited with every particle's cost, so the
    per-particle gradients are not independent estimates (the z-test's standard error assumes
    they are). The pairs were reported per-element and the estimates were accepted."""
    th = _theta()

    def batched(reps: torch.Tensor) -> None:  # (P, 3)
        z = scg.sample(Bernoulli(logits=reps), name="z")
        scg.cost(z.to(reps.dtype) * W[0], name="c")

    with pytest.raises(scg.SCGError, match=r"mixes the particles of stochastic node 'z'"):
        st.estimate_gradients_batched(batched, [th], 8, particles=4, graph_kwargs={"plates": 0})


def test_a_dimension_added_after_a_reduction_is_not_aligned() -> None:
    """c[i, k] = one_hot(Σ_d z[i, d])[k] depends on every z[i, :]: not per element along dim 1."""
    th = torch.tensor([0.3, -0.5, 0.8, 0.1], dtype=torch.float64, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th.reshape(2, 2)), name="z")  # (2, 2)
        count = z.sum(-1).long()  # (2,)
        scg.cost(torch.nn.functional.one_hot(count, 3)[:, :2].to(th.dtype), name="c")  # (2, 2)
        scg.cost(z.sum(-1), name="total")  # (2,): each example's own bits
    g.surrogate_loss()
    assert g.credit("z", "c") == "whole-plate"
    assert g.credit("z", "total") == "per-element"


_SWAPS: dict[str, Callable[[torch.Tensor, torch.Tensor], object]] = {  # o's rows get v's rows swapped
    "o[:].copy_": lambda o, v: o[:].copy_(v.flip(0)),
    "o.view(-1)[i] =": lambda o, v: (o.view(-1).__setitem__(0, v[1]), o.view(-1).__setitem__(1, v[0])),
    "o[0:1].copy_": lambda o, v: (o[0:1].copy_(v[1:2]), o[1:2].copy_(v[0:1])),
    "o.narrow().copy_": lambda o, v: (o.narrow(0, 0, 1).copy_(v[1:2]), o.narrow(0, 1, 1).copy_(v[0:1])),
    "o.select().copy_": lambda o, v: (o.select(0, 0).copy_(v[1]), o.select(0, 1).copy_(v[0])),
    "o[i].fill_": lambda o, v: (o[0].fill_(v[1]), o[1].fill_(v[0])),
    "o.unsqueeze(0)[0].copy_": lambda o, v: o.unsqueeze(0)[0].copy_(v.flip(0)),
    "o.view(-1).add_": lambda o, v: o.view(-1).add_(v.flip(0)),
    "o.data =": lambda o, v: setattr(o, "data", v.data.flip(0)),
}
_OFFSETS = torch.tensor([[0.0, 0.0, 0.0], [0.8, -0.5, 0.3]])  # 2 examples (a plate)
_TABLE = torch.tensor([1.0, -2.0, 3.0])


def _swap_program(th: torch.Tensor, write: Callable[[torch.Tensor, torch.Tensor], object]) -> st.Program:
    def program() -> None:
        z = scg.sample(Categorical(logits=th + _OFFSETS), name="z")
        o = torch.zeros(2)
        write(o, _TABLE[z])
        scg.cost(o * torch.tensor([1.0, 2.5]), name="c")

    return program


@pytest.mark.parametrize("how", list(_SWAPS))
def test_a_write_through_a_view_that_mixes_the_examples_is_credited_whole_plate(how: str) -> None:
    """The base of a view written in place kept its own positions: example 0's cost computed
    from example 1's draw was credited to example 0 only (max |z| = 62.6 against the exact
    gradient). The view's positions now reach the base, through the dimensions they share."""
    th = _theta()
    with scg.Graph() as g:
        _swap_program(th, _SWAPS[how])()
    g.surrogate_loss()
    assert g.credit("z", "c") == "whole-plate"


def test_a_view_write_that_mixes_is_unbiased_and_an_aligned_one_stays_per_element() -> None:
    th = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64, requires_grad=True)
    exact = st.exact_gradient(_swap_program(th, lambda o, v: o.__setitem__(slice(None), v.flip(0))), [th])
    report = st.check_unbiased(_swap_program(th, _SWAPS["o[:].copy_"]), [th], n=800, seed=1, exact=exact)
    assert report.passed, str(report)
    for write in (lambda o, v: o[:].copy_(v), lambda o, v: o.view(2, 1)[:, 0].copy_(v)):  # (row i from row i)
        with scg.Graph() as g:
            _swap_program(th, write)()
        g.surrogate_loss()
        assert g.credit("z", "c") == "per-element"
    with scg.Graph() as g:  # a per-step buffer, written a column at a time: each row from its own example
        z = scg.sample(Categorical(logits=th + _OFFSETS), name="z")
        buf = torch.zeros(2, 3)
        for t in range(3):
            buf[:, t].copy_(_TABLE[z] * t)
        scg.cost(buf.sum(1), name="c")
    g.surrogate_loss()
    assert g.credit("z", "c") == "per-element"


_E = torch.tensor([[1.0, -2.0], [3.0, 0.5]])
_M = torch.tensor([[1.0, 2.0], [-1.0, 3.0]])
_MASK = torch.tensor([[False, False], [True, True]])


def _assigned(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``o[:, idx] = x`` into zeros (B, 4), summed per row."""
    o = x.new_zeros(2, 4)
    o[:, idx] = x
    return o.sum(1)


#: ops whose position rule read the call wrongly (max |z| 6-99 against the exact gradient), and a
#: twin of each that keeps the rows (per-element credit must stay)
_MISREAD: dict[str, tuple[Callable[[torch.Tensor, torch.Tensor], torch.Tensor], ...]] = {
    "einsum(eq, [x, x]) (one operand twice)": (
        lambda z, x: torch.einsum("bi,ci->bc", [x, x]).sum(1),
        lambda z, x: torch.einsum("bi,bi->b", [x, x]),
    ),
    "o[:, 2-d idx] = x (x broadcast over o's rows)": (
        lambda z, x: _assigned(x, torch.tensor([[0, 1], [2, 3]])),
        lambda z, x: _assigned(x, torch.tensor([0, 2])),
    ),
    "F.embedding(idx, an integer table)": (
        lambda z, x: torch.nn.functional.embedding(torch.tensor([1, 0]), (x > 0).long()).sum(1).double(),
        lambda z, x: torch.nn.functional.embedding(z, _E).sum(1),
    ),
    "roll without dims (the flattened tensor)": (lambda z, x: x.roll(1).sum(1), lambda z, x: x.roll(1, 1).sum(1)),
    "flip(d0, d1) as separate arguments": (lambda z, x: (x * _E[0]).flip(1, 0).sum(1), lambda z, x: x.flip(1).sum(1)),
    "einsum(eq, [a, b])": (
        lambda z, x: torch.einsum("ij,jk->ik", [_M, x]).sum(1),
        lambda z, x: torch.einsum("ij,jk->ik", [x, _M]).sum(1),
    ),
    "x[..., 2-d mask]": (lambda z, x: x[..., _MASK], lambda z, x: x[..., torch.tensor([True, False])]),
    "one_hot without num_classes": (
        lambda z, x: torch.nn.functional.one_hot(z).double().mean(-1),
        lambda z, x: torch.nn.functional.one_hot(z, 3).double().mean(-1),
    ),
    "x.T of a 3-d tensor (every dim reversed)": (
        lambda z, x: (x[:, :, None] * torch.ones(2, 2, 2)).T[:, 0, 0] * torch.tensor([1.0, 5.0]),
        lambda z, x: (x[:, :, None] * torch.ones(2, 2, 2)).mT[:, 0, 0],
    ),
    "x.__rmatmul__(m) (m @ x)": (lambda z, x: x.__rmatmul__(_M).sum(1), lambda z, x: x.__matmul__(_M).sum(1)),
    "a distance_function the tracker cannot see": (
        lambda z, x: torch.nn.functional.triplet_margin_with_distance_loss(
            x,
            _M,
            _M.flip(1),
            margin=5.0,
            reduction="none",
            distance_function=lambda a, b: (a.flip(0) - b).pow(2).sum(-1),
        ),
        lambda z, x: torch.nn.functional.triplet_margin_loss(x, _M, _M.flip(1), margin=5.0, reduction="none"),
    ),
}


@pytest.mark.filterwarnings("ignore:The use of `x.T` on tensors:UserWarning")  # (torch's, for the 3-d case)
@pytest.mark.parametrize("case", list(_MISREAD))
def test_an_op_whose_arguments_were_misread_is_credited_whole_plate(case: str) -> None:
    mixing, keeping = _MISREAD[case]
    theta = torch.tensor([[0.3, -0.2], [-0.5, 0.4]], dtype=torch.float64, requires_grad=True)
    for cost, credit in ((mixing, "whole-plate"), (keeping, "per-element")):
        with scg.Graph() as g:
            z = scg.sample(Categorical(logits=theta), name="z")  # (B,) = (2,)
            scg.cost(cost(z, _E[z]), name="c")
        g.surrogate_loss()
        assert g.credit("z", "c") == credit, (case, credit)


@pytest.mark.parametrize(("loc", "credit"), [(lambda x: x[None], "whole-plate"), (lambda x: x[:, None], "per-element")])
def test_a_distribution_parameter_broadcast_along_the_batch_is_credited_whole_plate(
    loc: Callable[[torch.Tensor], torch.Tensor], credit: str
) -> None:
    """A transform that keeps its ``loc`` unexpanded, of shape (1, B), for a (B, B) base: each row of
    the samples reads every row of it (z2[i, j] = ε + x[j]). It was credited per example: the gradient
    about a third of the exact one (z of 50-58). ``loc`` of shape (B, 1) keeps the rows."""
    theta = torch.tensor([[0.3, -0.2], [-0.5, 0.4]], requires_grad=True)
    with scg.Graph() as g:
        z1 = scg.sample(Categorical(logits=theta), name="z1")  # (B,) = (2,)
        x = _E[z1][:, 0]
        affine = torch.distributions.AffineTransform(loc=loc(x), scale=1.0)
        base = torch.distributions.Normal(torch.zeros(2, 2), 1.0)
        z2 = scg.sample(torch.distributions.TransformedDistribution(base, [affine]), name="z2")
        scg.cost(z2.sum(1), name="c")
    g.surrogate_loss()
    assert g.credit("z1", "c") == credit


def test_flip_of_the_samples_as_separate_arguments_is_refused() -> None:
    theta = torch.tensor([0.3, -0.2], requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=theta.expand(2, 2)), name="z", n=2)  # (n, B)
        scg.cost(_E[z].sum(-1).flip(1, 0), name="c")
    with pytest.raises(scg.SCGError, match="mixes the samples"):
        g.surrogate_loss()


_PER_EXAMPLE_OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {  # x: (B, C, L); 2-d ops see (B, C, L, L)
    "conv1d": lambda x: torch.nn.functional.conv1d(x, x.new_ones(4, 3, 2)),
    "conv2d": lambda x: torch.nn.functional.conv2d(x[..., None] * x[:, :, None], x.new_ones(2, 3, 2, 2)),
    "conv_transpose1d": lambda x: torch.nn.functional.conv_transpose1d(x, x.new_ones(3, 2, 2)),
    "max_pool1d": lambda x: torch.nn.functional.max_pool1d(x, 2),
    "avg_pool2d": lambda x: torch.nn.functional.avg_pool2d(x[..., None] * x[:, :, None], 2),
    "adaptive_avg_pool1d": lambda x: torch.nn.functional.adaptive_avg_pool1d(x, 1),
    "group_norm": lambda x: torch.nn.functional.group_norm(x, 3),
    "instance_norm": lambda x: torch.nn.functional.instance_norm(x),
    "pad": lambda x: torch.nn.functional.pad(x, (1, 2)),
}


@pytest.mark.parametrize("op", list(_PER_EXAMPLE_OPS))
def test_ops_that_compute_each_example_alone_keep_per_element_credit(op: str) -> None:
    """Convolutions, pooling, group/instance norms and pad of a batched input were credited
    whole-plate (no rule: a variance cost). Each keeps rows by brute force (the Jacobian has no
    entry between different examples), and now per-element credit."""
    f = _PER_EXAMPLE_OPS[op]
    u = torch.randn(3, 3, 4, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(lambda v: f(v).flatten(1).sum(1), u)  # (B, B, C, L)
    off_diagonal = jac.abs().sum((2, 3)) * (1 - torch.eye(3, dtype=torch.float64))
    assert float(off_diagonal.max()) == 0.0 and float(jac.abs().sum()) > 0
    table = torch.randn(3, 3, 4, dtype=torch.float64)
    theta = torch.zeros(3, 3, dtype=torch.float64, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=theta), name="z")  # (B,)
        scg.cost(f(table[z]).flatten(1).sum(1), name="c")
    g.surrogate_loss()
    assert g.credit("z", "c") == "per-element"


def _written_after_a_view(
    write: Callable[[torch.Tensor], object],
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def cost(z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        x = x.clone()
        v = x.view(2, 2)  # an alias made before the write: it read its rows as still aligned
        write(x)
        return v.sum(1) * torch.tensor([1.0, 4.0])

    return cost


_E4 = torch.randn(2, 2, 2, 2, generator=torch.Generator().manual_seed(0))
_PERM = torch.tensor([1, 0])

#: call forms the first pass did not try (a second fuzz, ~2,800 random chains): each was credited
#: per element though the cost mixes the examples (max |z| 56-551), with a twin that keeps rows
_FORMS: dict[str, tuple[Callable[[torch.Tensor, torch.Tensor], torch.Tensor], ...]] = {
    "axis= for dim=": (
        lambda z, x: (torch.softmax(x, axis=0) * torch.tensor([[1.0], [5.0]])).sum(1),
        lambda z, x: torch.cumsum(x, axis=1).sum(1),
    ),
    "cosine_similarity(axis=0)": (
        lambda z, x: torch.nn.functional.cosine_similarity(x, _M, axis=0) * torch.tensor([1.0, 5.0]),
        lambda z, x: torch.nn.functional.cosine_similarity(x, _M, axis=1),
    ),
    "an alias made before a write that mixes": (
        _written_after_a_view(lambda x: x.copy_(x.flip(0))),
        _written_after_a_view(lambda x: x.add_(1.0)),
    ),
    "squeeze_": (
        lambda z, x: x.mean(0, keepdim=True).squeeze_(0) * torch.tensor([1.0, 5.0]),
        lambda z, x: x.unsqueeze(1).squeeze(1).sum(1),
    ),
    "advanced indices apart": (
        lambda z, x: _E4[z][:, _PERM, :, _PERM].sum((1, 2)) * torch.tensor([1.0, 5.0]),
        lambda z, x: _E4[z][:, _PERM, _PERM].sum((1, 2)),
    ),
    "index_select(input=..., index=...)": (
        lambda z, x: torch.index_select(input=x[:, 0], dim=0, index=_PERM) * torch.tensor([1.0, 5.0]),
        lambda z, x: torch.index_select(input=x, dim=1, index=_PERM).sum(1),
    ),
    "torch.embedding(weight, indices)": (
        lambda z, x: torch.embedding(x, _PERM).sum(1) * torch.tensor([1.0, 5.0]),
        lambda z, x: torch.embedding(_E, z).sum(1),
    ),
}


@pytest.mark.parametrize("case", list(_FORMS))
def test_call_forms_that_were_misread_are_credited_whole_plate(case: str) -> None:
    mixing, keeping = _FORMS[case]
    theta = torch.tensor([[0.3, -0.2], [-0.5, 0.4]], dtype=torch.float64, requires_grad=True)
    for cost, credit in ((mixing, "whole-plate"), (keeping, "per-element")):
        with scg.Graph() as g:
            z = scg.sample(Categorical(logits=theta), name="z")
            scg.cost(cost(z, _E[z]), name="c")
        g.surrogate_loss()
        assert g.credit("z", "c") == credit, (case, credit)


# ------------------------------------------------------------ foreign_closure: what a node's ancestors inherit


def _chain_through_samples(theta: torch.Tensor, phi: torch.Tensor) -> None:
    """a (2,) → b (2,) drawn from a.sum() (mixes a's plate) → v, n=2 samples of b, per element."""
    a = scg.sample(Bernoulli(logits=theta), name="a")
    b = scg.sample(Bernoulli(logits=(phi * a.sum() - 0.5).expand(2)), name="b")
    v = scg.sample(Bernoulli(logits=2.0 * b - 1.0), n=2, name="v")  # (2_v, 2)
    scg.cost(v * 1.0, name="c")


def test_a_foreign_position_inherited_through_a_multi_sample_node_moves_past_its_sample_dimension(
    assert_credit_and_exact_mean: Any,
) -> None:
    """A node drawn with ``n=k`` puts a sample dimension in front, so the foreign positions it
    inherits from its parents move one position right. a's mixing (b reads a.sum()) is at b's
    position 0, which is position 1 of c, a batch position: every c[:, j] depends on both elements
    of a, so a needs whole-plate credit. Left at 0 the mark falls inside c's sample dimension; when
    the plate check still ignored a mark there (before 3f254c3: now it is whole-plate there too),
    a was credited per element and the estimator's mean of ∇_θ was half the exact gradient
    ([0.0213, 0.0205] against [0.0426, 0.0410])."""
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    phi = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)

    def program() -> None:
        _chain_through_samples(theta, phi)

    assert_credit_and_exact_mean(program, [theta, phi], a__c="whole-plate", b__c="per-element")


def _mixed_through_a_child(theta: torch.Tensor) -> None:
    u = scg.sample(Bernoulli(logits=theta), name="u")  # (2,)
    v = scg.sample(Bernoulli(logits=2.0 * u - 1.0), name="v")  # (2,): v[i] from u[i] alone
    scg.cost(v.sum().expand(2) * torch.tensor([1.0, 3.0], dtype=torch.float64), name="c")  # c[j] reads every v[i]


def test_a_node_that_stops_lining_up_takes_its_ancestors_with_it() -> None:
    """When a node j stops lining up with a cost at a position, so do j's ancestors, whose
    influence reaches the cost through j (the tracker marks values with the node's own bit only).
    Here c[j] = w_j Σ_i v[i] mixes v's plate, and u reaches c only through v: both need
    whole-plate credit. With j's own bit alone u was credited per element: the estimator's mean
    [0.113, 0.333] against the exact [0.452, 0.444]."""
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)

    def program() -> None:
        _mixed_through_a_child(theta)

    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.credit("u", "c") == "whole-plate"
    (exact,) = st.exact_gradient(program, [theta])
    (mean,) = expected_estimate(program, [theta])
    torch.testing.assert_close(mean, exact, rtol=1e-9, atol=1e-12)


def test_a_scalar_node_has_no_examples_to_mix() -> None:
    """u scalar, z enumerated from it, c = t[z] + log p(z) + log p(u): log p(u) is a scalar marked
    foreign from its position 0 (past u's dimensions, none), which the broadcast over z's
    samples left on the sample dimension, read as a mixing of u's examples (whole-plate, refused
    with dice=True). A node without batch dimensions has none to mix: per-element, exact."""
    a = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    th = torch.tensor([0.1, -0.4, 0.7], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([0.5, -0.2, 0.3], dtype=torch.float64, requires_grad=True)
    t = torch.tensor([1.0, 2.0, -1.5], dtype=torch.float64)

    def program() -> None:
        u = scg.sample(Bernoulli(torch.sigmoid(a)), name="u")
        z = scg.sample(Categorical(logits=th + u * w), name="z", estimator=scg.estimators.Enumerate())
        scg.cost(t[z] + 0.7 * scg.log_prob(z) + scg.log_prob(u), name="c")

    with scg.Graph() as g:
        program()
    g.surrogate_loss(dice=True)
    assert g.credit("u", "c") == "per-element"
    exact = st.exact_gradient(program, [a, th, w])
    for kwargs in ({"dice": True}, {"dice": False}):
        got = expected_estimate(program, [a, th, w], keep=("z",), surrogate_kwargs=kwargs)
        for e, x in zip(exact, got):
            torch.testing.assert_close(x, e, rtol=1e-9, atol=1e-12)


def test_plates_zero_is_reported_whole_plate_and_refused_by_dice() -> None:
    """``plates=0``: every element of the node shares the credit of the whole cost. The surrogate
    did so (one draw's gradient below: Σ_i ∇log p(z_i) · Σ_j c_j), while ``g.credit`` said
    "per-element" (for a cost that mixes the elements, as for one that does not) and
    ``dice=True`` refused the node: it is "whole-plate" now, the report DiCE's refusal reads."""
    th = torch.tensor([0.3, -0.5], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([1.0, 2.5], dtype=torch.float64)
    drawn = torch.tensor([1.0, 0.0], dtype=torch.float64)
    for mix in (False, True):
        with scg.Graph(intervene=lambda name, step, dist, shape: drawn.clone()) as g:
            z = scg.sample(Bernoulli(logits=th), name="z", plates=0)
            scg.cost((z.flip(0) if mix else z) * w, name="c")
        (grad,) = torch.autograd.grad(g.surrogate_loss(), th)
        assert g.credit("z", "c") == "whole-plate", (mix, g.credit("z", "c"))
        whole = float(((drawn.flip(0) if mix else drawn) * w).sum())
        torch.testing.assert_close(grad, (drawn - torch.sigmoid(th.detach())) * whole, rtol=1e-12, atol=0.0)
        with scg.Graph() as g:
            z = scg.sample(Bernoulli(logits=th), name="z", plates=0)
            scg.cost((z.flip(0) if mix else z) * w, name="c")
        with pytest.raises(scg.SCGError, match=r"dice=True.*batch elements of stochastic node 'z'.*plates="):
            g.surrogate_loss(dice=True)
    with scg.Graph() as g:  # one element: nothing to share
        z = scg.sample(Bernoulli(logits=th[:1]), name="z", plates=0)
        scg.cost(z * w[:1], name="c")
    g.surrogate_loss(dice=True)
    assert g.credit("z", "c") == "per-element"


def test_plates_covering_every_batch_dimension_are_accepted_by_dice() -> None:
    """``plates=1`` on a (B,) node declares what ``plates=None`` does (every batch dimension a
    plate): ``dice=True`` refused any declared plates; it refuses only those that leave batch
    dimensions to share, and its mean here is the exact gradient."""
    th = torch.tensor([0.3, -0.5], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([1.0, 2.5], dtype=torch.float64)

    def program() -> None:
        z = scg.sample(Bernoulli(logits=th), name="z", plates=1)
        scg.cost(z * (w + th), name="c")

    (mean,) = expected_estimate(program, [th], surrogate_kwargs={"dice": True})
    torch.testing.assert_close(mean, st.exact_gradient(program, [th])[0], rtol=1e-9, atol=1e-12)
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=th[None].expand(2, 2)), name="z", plates=1)  # (2, 2): dim 1 shared
        scg.cost(z * w, name="c")
    with pytest.raises(scg.SCGError, match=r"dice=True.*declares plates="):
        g.surrogate_loss(dice=True)


def _one_hot_plates(th: torch.Tensor) -> None:
    z = scg.sample(OneHotCategorical(logits=th.reshape(2, 3)), name="z", plates=1)  # (2, 3): event dim 3
    scg.cost((z * torch.tensor([1.0, -2.0, 0.5], dtype=th.dtype)).sum(-1) + th[:2], name="c")


def _sampled_plates(th: torch.Tensor) -> None:
    z = scg.sample(Bernoulli(logits=th[:2]), name="z", n=2, plates=1)  # (2, 2): sample dim 2
    scg.cost(z * (th[2:4] + 1.0), name="c")


@pytest.mark.parametrize("run", [_one_hot_plates, _sampled_plates], ids=["event-dim", "sample-dim"])
def test_plates_covering_the_batch_leave_event_and_sample_dims_to_dice(run: Callable[[torch.Tensor], None]) -> None:
    """``plates=1`` on a node of one batch dimension shares nothing: its event dimension (a one-hot
    value's K) and its sample dimension (``n=2``) are not batch dimensions, so ``dice=True``
    accepts it and its mean is the exact gradient."""
    th = torch.tensor([0.3, -0.5, 0.8, 0.1, -0.2, 0.6], dtype=torch.float64, requires_grad=True)
    (mean,) = expected_estimate(lambda: run(th), [th], surrogate_kwargs={"dice": True})
    torch.testing.assert_close(mean, st.exact_gradient(lambda: run(th), [th])[0], rtol=1e-9, atol=1e-12)
