"""Sample dimensions followed through permutations (`scg.graph.sample_positions`).

A permutation that moves a sample dimension and keeps the other dimensions in their order keeps
the examples' positions (read after the sample dimensions): ``z.transpose(0, 1)`` of ``z`` drawn
with ``n=k`` and transposed back is ``z`` again, and was refused as a mixing of z's samples (its
batch dimension, moved in front, marked every position foreign). The sample dimension is followed
as an index, so a permutation left in place is still refused at the cost; and a sample dimension
lost behind the examples (``z.T[:, 0]``) is a mixing, since the examples in front would otherwise
be read as the samples.

Each accepted program is checked exactly: the estimator's mean over every joint draw
(`scg.testing.expected_estimate`) against ∇ E[Σ costs] in closed form, plain torch.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
import torch
from torch.distributions import Bernoulli, Categorical

import scg
from scg.testing import expected_estimate

W = torch.tensor([1.0, 3.0], dtype=torch.float64)

Move = Callable[[torch.Tensor], torch.Tensor]

#: (n, B) -> (n, B), the examples and samples each back in place
ROUND_TRIPS: dict[str, Move] = {
    "transpose there and back": lambda x: (x.transpose(0, 1) * W[:, None]).transpose(0, 1),
    "movedim there and back": lambda x: x.movedim(0, -1).exp().movedim(-1, 0),
    "permute there and back": lambda x: x.permute(1, 0).sigmoid().permute(1, 0),
    ".T, then .mT": lambda x: x.T.mT,
    "swapaxes, then swapdims": lambda x: x.swapaxes(0, 1).swapdims(1, 0),
    "a trailing dimension reduced between": lambda x: x[:, :, None].movedim(0, 1).sum(-1).movedim(1, 0),
}


def _params() -> tuple[torch.Tensor, torch.Tensor]:
    th = torch.tensor([0.3, -0.4, 0.8], dtype=torch.float64, requires_grad=True)
    ph = torch.tensor([0.1, 0.5], dtype=torch.float64, requires_grad=True)
    return th, ph


def _close(got: list[torch.Tensor], want: tuple[torch.Tensor, ...]) -> None:
    for x, y in zip(got, want, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", sorted(ROUND_TRIPS))
def test_a_permutation_of_a_multi_sample_node_undone_is_per_element_and_exact(kind: str) -> None:
    move = ROUND_TRIPS[kind]
    ph = _params()[1]

    def program() -> None:
        z = scg.sample(Bernoulli(logits=ph), name="z", n=2)  # (2, B)
        scg.cost(move(z * W + 1), name="c")

    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.credit("z", "c") == "per-element"
    # E[mean over the samples of Σ_b c_b] = Σ_b Σ_{x ∈ {0, 1}} p(z_b = x) c_b(x), c elementwise in z
    p1 = torch.sigmoid(ph)
    ones, zeros = torch.ones(1, 2, dtype=torch.float64), torch.zeros(1, 2, dtype=torch.float64)
    truth = (p1 * move(ones * W + 1)[0] + (1 - p1) * move(zeros * W + 1)[0]).sum()
    _close(expected_estimate(program, [ph]), torch.autograd.grad(truth, [ph]))


@pytest.mark.parametrize(
    "move",
    [lambda x: x.transpose(1, 2), lambda x: x.permute(0, 2, 1)],
    ids=["transpose(1, 2)", "permute(0, 2, 1)"],
)
def test_a_permutation_of_the_examples_is_whole_plate_and_exact(move: Move) -> None:
    """The biased twin of a permutation of the samples: z (n, B, B) with its two batch dimensions
    swapped puts z[s, i, j] at the cost's [s, j, i]; read in place (the examples' positions kept),
    z[s, i, j] was credited with c[s, i, j] (a mutation sweep: the mean off by 0.705). Whole-plate,
    exact."""
    ph = torch.tensor([[0.2, -0.6], [0.5, 0.1]], dtype=torch.float64, requires_grad=True)
    m = torch.tensor([[1.0, 3.0], [-2.0, 0.5]], dtype=torch.float64)

    def program() -> None:
        z = scg.sample(Bernoulli(logits=ph), name="z", n=2)  # (2, 2, 2)
        scg.cost(move(z) * m, name="c")

    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.credit("z", "c") == "whole-plate"
    truth = (m * torch.sigmoid(ph).T).sum()  # E[mean_s Σ_ij m_ij z_sji]
    _close(expected_estimate(program, [ph]), torch.autograd.grad(truth, [ph]))


def test_an_enumerated_node_transposed_there_and_back_is_exact() -> None:
    """Refused before (an enumerated node's batch mixed): its enumeration is exact per example."""
    ph = _params()[1]

    def program() -> None:
        z = scg.sample(Bernoulli(logits=ph), name="z", estimator=scg.estimators.Enumerate())  # (2_values, B)
        scg.cost((z.T * W[:, None] + z.T**2).T, name="c")

    with scg.Graph() as g:
        program()
    loss = g.surrogate_loss()
    assert g.credit("z", "c") == "enumerated"
    truth = (torch.sigmoid(ph) * (W + 1)).sum()  # c_b = W_b z_b + z_b² = (W_b + 1) z_b
    torch.testing.assert_close(loss.detach(), truth.detach(), rtol=1e-12, atol=0)
    _close(expected_estimate(program, [ph], keep=("z",)), torch.autograd.grad(truth, [ph]))


@pytest.mark.parametrize("mix", [False, True], ids=["undone", "flipped between (biased twin)"])
def test_another_nodes_examples_through_a_permutation_of_the_samples(mix: bool) -> None:
    """``b`` (B,) broadcast behind z's samples, transposed and back: per element, exact. With the
    examples flipped while transposed (b's and z's), refused: z's mark, moved in front of its
    samples by the transpose, stays there (conservative), as before."""
    pz, pb = _params()[1], torch.tensor([-0.7, 0.2], dtype=torch.float64, requires_grad=True)

    def program() -> None:
        b = scg.sample(Bernoulli(logits=pb), name="b")
        z = scg.sample(Bernoulli(logits=pz), name="z", n=2)  # (2, B)
        x = (z * b).T
        scg.cost((x.flip(0) if mix else x).T * W, name="c")

    with scg.Graph() as g:
        program()
    if mix:
        with pytest.raises(scg.SCGError, match="mixes the samples"):
            g.surrogate_loss()
        return
    g.surrogate_loss()
    assert g.credit("b", "c") == "per-element"
    assert g.credit("z", "c") == "per-element"
    truth = (W * torch.sigmoid(pz) * torch.sigmoid(pb)).sum()  # E[mean_s Σ_j W_j z_sj b_j]
    _close(expected_estimate(program, [pz, pb]), torch.autograd.grad(truth, [pz, pb]))


#: (n, B) -> a cost that mixes z's samples or keeps them away from their place
REFUSED: dict[str, tuple[Move, str]] = {
    "a transpose not undone": (lambda x: x.transpose(0, 1), "holds the sample dimension"),
    "a cumsum along the samples, transposed": (
        lambda x: x.transpose(0, 1).cumsum(-1).transpose(0, 1),
        "mixes the samples",
    ),
    "the samples permuted while transposed": (lambda x: x.T[:, [1, 0]].T, "mixes the samples"),
    # the first sample of each example: (B,) read as z's two samples (per element, without the
    # loss marked as a mixing, since the transpose no longer marks the examples in front)
    "one sample, taken behind the examples": (lambda x: x.T[:, 0], "mixes the samples"),
    "one sample, taken behind and broadcast back": (lambda x: x.T[:, :1].T.expand(2, 2), "mixes the samples"),
}


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_a_permutation_that_moves_or_mixes_the_samples_is_refused(kind: str) -> None:
    move, message = REFUSED[kind]
    ph = _params()[1]
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=ph), name="z", n=2)  # (2, 2): n = B, no shape tells them apart
        scg.cost(move(z * W), name="c")
    with pytest.raises(scg.SCGError, match=message):
        g.surrogate_loss()


# ------------------------------------------------------------ a size-1 dimension dropped
# ``z[..., None, :].sum(-2)`` is z: the sum runs over a size-1 dimension put in as a place for
# samples, and combines nothing. It was read as a sum over z's examples (refused for an enumerated
# node, whole-plate otherwise); a reduction over, or a squeeze of, a size-1 dimension now drops it
# and z's positions move down past it.

#: (n, B) -> (n, B): a size-1 dimension put in and dropped
DROPPED: dict[str, Move] = {
    "[..., None, :].sum(-2)": lambda x: x[..., None, :].sum(-2),
    "[..., None, :].squeeze(-2)": lambda x: x[..., None, :].squeeze(-2),
    "unsqueeze(1).mean(1)": lambda x: x.unsqueeze(1).mean(1),
    "[:, None].logsumexp(1)": lambda x: x[:, None].logsumexp(1),
    "[:, None].softmax(1).squeeze(1) * x": lambda x: x[:, None].softmax(1).squeeze(1) * x,
}


@pytest.mark.parametrize("enumerate_", [True, False], ids=["Enumerate()", "n=2"])
@pytest.mark.parametrize("kind", sorted(DROPPED))
def test_a_size_1_dimension_put_in_and_dropped_keeps_the_examples(kind: str, enumerate_: bool) -> None:
    move = DROPPED[kind]
    ph = _params()[1]
    how: dict[str, object] = {"estimator": scg.estimators.Enumerate()} if enumerate_ else {"n": 2}

    def program() -> None:
        z = scg.sample(Bernoulli(logits=ph), name="z", **how)  # type: ignore[arg-type]
        scg.cost(move(z * W + 1), name="c")

    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.credit("z", "c") == ("enumerated" if enumerate_ else "per-element")
    p1 = torch.sigmoid(ph)
    ones, zeros = torch.ones(1, 2, dtype=torch.float64), torch.zeros(1, 2, dtype=torch.float64)
    truth = (p1 * move(ones * W + 1)[0] + (1 - p1) * move(zeros * W + 1)[0]).sum()
    keep = ("z",) if enumerate_ else ()
    _close(expected_estimate(program, [ph], keep=keep), torch.autograd.grad(truth, [ph]))


def test_a_sum_over_the_examples_after_a_size_1_dimension_still_mixes_them() -> None:
    """The biased twin: ``z[..., None, :].sum(-1)`` sums z's examples (refused for an enumerated
    node, whole-plate and exact for a sampled one)."""
    ph = _params()[1]
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=ph), name="z", estimator=scg.estimators.Enumerate())
        scg.cost(z[..., None, :].sum(-1) * W, name="c")
    with pytest.raises(scg.SCGError, match="mixes the batch elements of the enumerated"):
        g.surrogate_loss()

    def program() -> None:
        z = scg.sample(Bernoulli(logits=ph), name="z", n=2)
        scg.cost(z[..., None, :].sum(-1) * W, name="c")

    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.credit("z", "c") == "whole-plate"
    truth = W.sum() * torch.sigmoid(ph).sum()  # E[mean_s Σ_j W_j Σ_b z_sb]
    _close(expected_estimate(program, [ph]), torch.autograd.grad(truth, [ph]))


def test_a_sum_over_the_first_batch_dimension_is_whole_plate_and_exact() -> None:
    """z (n, B, B) summed over its first batch dimension: the cost's (B,) are z's last dimension,
    one place left. Only a sum over sample dimensions or size-1 dimensions drops them without a
    foreign position; read as one (a mutation sweep), z[s, i, j] was credited with c[s, i]."""
    ph = torch.tensor([[0.2, -0.6], [0.5, 0.1]], dtype=torch.float64, requires_grad=True)

    def program() -> None:
        z = scg.sample(Bernoulli(logits=ph), name="z", n=2)  # (2, 2, 2)
        scg.cost(z.sum(1) * W, name="c")

    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.credit("z", "c") == "whole-plate"
    truth = (W * torch.sigmoid(ph).sum(0)).sum()  # E[mean_s Σ_j W_j Σ_i z_sij]
    _close(expected_estimate(program, [ph]), torch.autograd.grad(truth, [ph]))


def test_a_nodes_own_size_1_dimension_dropped_is_whole_plate_and_exact() -> None:
    """The other biased twin: z of batch (1, 2, 2), ``z.sum(1)`` drops z's own first batch
    dimension, so the cost's (2, 2) are z's last two, one place left. Read in place (the drop
    without the plate check's size test), ``z[0, j, k]`` was credited with ``Σ_a c[a, j]``, which
    holds its own ``c[j, k]`` only where j = k (the mean 0 off the diagonal, against 0.705 and
    -0.489); whole-plate, exact."""
    ph = torch.tensor([[[0.1, 0.5], [-0.3, 0.7]]], dtype=torch.float64, requires_grad=True)
    m = torch.tensor([[1.0, 3.0], [-2.0, 0.5]], dtype=torch.float64)

    def program() -> None:
        z = scg.sample(Bernoulli(logits=ph), name="z", n=2)  # (2, 1, 2, 2)
        scg.cost(z.sum(1) * m, name="c")

    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.credit("z", "c") == "whole-plate"
    truth = (m * torch.sigmoid(ph[0])).sum()
    _close(expected_estimate(program, [ph]), torch.autograd.grad(truth, [ph]))
    with scg.Graph() as g:
        z = scg.sample(Bernoulli(logits=ph), name="z", estimator=scg.estimators.Enumerate())
        scg.cost(z.sum(1) * m, name="c")
    with pytest.raises(scg.SCGError, match="mixes the batch elements of the enumerated"):
        g.surrogate_loss()


# ------------------------------------------------------------ a batched matmul behind the samples
# ``b_mats (B, R, K) @ x (n, B, K, C)``: the operands' batch dimensions broadcast from the right
# as by an elementwise op, so b's examples (the matrices' batch) line up with the cost's after z's
# samples. The position rule kept nothing of an operand of lower rank (whole-plate), and kept the
# batch dimensions of one of equal rank wherever they lay, also on another node's samples: with
# B = n, ``b_mats (n, R, K) @ x (n, K, C)`` credited b's example i with z's sample i (biased).

TM = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
M2 = torch.tensor([[1.0, 3.0], [-2.0, 0.5]], dtype=torch.float64)
V2 = torch.tensor([[0.5, -1.0], [2.0, 1.0]], dtype=torch.float64)

#: (z (n,) drawn with n=2, b (2,)) -> the cost, z's samples first
Pair = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

MATMUL: dict[str, tuple[Pair, str]] = {
    "b's matrices (B, R, K) @ (n, B, K, 1)": (
        lambda z, b: (b[:, None, None] * M2) @ (TM[z][:, None, None, None] * V2[..., None]),
        "per-element",
    ),
    "(n, B, 1, K) @ b's matrices (B, K, C)": (
        lambda z, b: (TM[z][:, None, None, None] * V2[:, None, :]) @ (b[:, None, None] * M2),
        "per-element",
    ),
    "torch.matmul, b's rows (B, K, 1) as the batch": (
        lambda z, b: torch.matmul(TM[z][:, None, None, None] * M2, (b[:, None] * V2)[..., None]),
        "per-element",
    ),
    # the biased twins: b's examples flipped, contracted, or laid over z's samples (B = n)
    "b flipped before": (
        lambda z, b: (b.flip(0)[:, None, None] * M2) @ (TM[z][:, None, None, None] * V2[..., None]),
        "whole-plate",
    ),
    "b contracted": (lambda z, b: (TM[z][:, None, None] * M2) @ b[:, None], "whole-plate"),
    "b's matrices (B, R, K) @ (n, D, B, K, 1): a new dimension D in front of b's": (
        lambda z, b: (b[:, None, None] * M2) @ (TM[z][:, None, None, None, None] * V2[:, None, :, None]),
        "whole-plate",
    ),
    "b's matrices (B, R, K) on z's samples, @ (n, K, 1)": (
        lambda z, b: (b[:, None, None] * M2) @ (TM[z][:, None, None] * V2[0][:, None]),
        "whole-plate",
    ),
}


def _two_samples_truth(cost: Pair, th: torch.Tensor, ph: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """∇ E[Σ c] / 2 over z's two samples jointly and b, enumerated in plain torch (the cost may
    read b's example i with z's sample i: both samples are drawn)."""
    total = torch.zeros((), dtype=torch.float64)
    pz = torch.softmax(th, 0)
    for bits in itertools.product((0.0, 1.0), repeat=ph.numel()):
        b = torch.tensor(bits, dtype=torch.float64).reshape(ph.shape)
        pb = Bernoulli(logits=ph).log_prob(b).sum().exp()
        for k1 in range(3):
            for k2 in range(3):
                total = total + pb * pz[k1] * pz[k2] * cost(torch.tensor([k1, k2]), b).sum() / 2
    return torch.autograd.grad(total, [th, ph])


@pytest.mark.parametrize("kind", sorted(MATMUL))
def test_a_batched_matmul_behind_the_samples(kind: str) -> None:
    _credited_exactly(*MATMUL[kind])


# ``einsum`` with explicit subscripts: an operand's dimensions go where the output's subscripts put
# them; ``einsum("s,b->sb", t[z], b)`` is ``t[z][:, None] * b`` (whole-plate before: the rule kept
# only the subscripts' common prefix).

EINSUM: dict[str, tuple[Pair, str]] = {
    "s,b->sb": (lambda z, b: torch.einsum("s,b->sb", TM[z], b), "per-element"),
    "s,b->sb, the operands in a list": (lambda z, b: torch.einsum("s,b->sb", [TM[z], b]), "per-element"),
    "sb,b->sb": (lambda z, b: torch.einsum("sb,b->sb", TM[z][:, None] * V2, b), "per-element"),
    "bk,skc->sbc (b's k contracted)": (
        lambda z, b: torch.einsum("bk,skc->sbc", b[:, None] * V2, TM[z][:, None, None] * V2),
        "per-element",
    ),
    # the biased twins: flipped, contracted over the examples, laid over z's samples (B = n)
    "s,b->sb of b flipped": (lambda z, b: torch.einsum("s,b->sb", TM[z], b.flip(0)), "whole-plate"),
    "kb,sk->sb (b's examples contracted)": (
        lambda z, b: torch.einsum("kb,sk->sb", b[None, :] * V2, TM[z][:, None] * V2),
        "whole-plate",
    ),
    "sb,s->sb (b's examples on z's samples)": (
        lambda z, b: torch.einsum("sb,s->sb", TM[z][:, None] * V2, b),
        "whole-plate",
    ),
}


@pytest.mark.parametrize("kind", sorted(EINSUM))
def test_an_einsum_behind_the_samples(kind: str) -> None:
    _credited_exactly(*EINSUM[kind])


# b of batch (2, 2): its second dimension moved, contracted, or laid over z's samples (B = n)
V3 = torch.tensor([[[0.5, -1.0], [2.0, 1.0]], [[-0.5, 1.5], [1.0, -2.0]]], dtype=torch.float64)

MATRIX: dict[str, tuple[Pair, str]] = {
    # (the biased twins, a mutation sweep's: read in place, each was credited per element with
    # the mean off by 0.4 to 1.2)
    "einsum s,bd->sdb (b transposed behind the samples)": (
        lambda z, b: torch.einsum("s,bd->sdb", TM[z], b * M2),
        "whole-plate",
    ),
    "einsum sr,sr->sr (b's rows on z's samples, same rank)": (
        lambda z, b: torch.einsum("sr,sr->sr", b, TM[z][:, None] * V2),
        "whole-plate",
    ),
    "x.__rmatmul__(m): b's rows (B, K, C) contracted": (
        lambda z, b: (b[..., None] * M2).__rmatmul__(TM[z][:, None, None, None] * V3),
        "whole-plate",
    ),
    "einsum s,bk->sb (b's k contracted last)": (lambda z, b: torch.einsum("s,bk->sb", TM[z], b * V2), "per-element"),
}


@pytest.mark.parametrize("kind", sorted(MATRIX))
def test_an_operand_with_two_batch_dimensions_behind_the_samples(kind: str) -> None:
    _credited_exactly(*MATRIX[kind], matrix=True)


def test_an_einsum_that_puts_the_examples_before_the_samples_is_refused() -> None:
    ph = _params()[1]
    th = torch.tensor([0.3, -0.4, 0.8], dtype=torch.float64, requires_grad=True)
    with scg.Graph() as g:
        b = scg.sample(Bernoulli(logits=ph), name="b")
        z = scg.sample(Categorical(logits=th), name="z", n=2)
        scg.cost(torch.einsum("s,b->bs", TM[z], b), name="c")
    with pytest.raises(scg.SCGError, match="sample dimension"):
        g.surrogate_loss()


def _credited_exactly(cost: Pair, credit: str, matrix: bool = False) -> None:
    """b (2,) (or (2, 2): ``matrix``) and z (n=2) into ``cost``: b credited as ``credit`` says, the
    estimator exact."""
    th = torch.tensor([0.3, -0.4, 0.8], dtype=torch.float64, requires_grad=True)
    ph = _params()[1]
    if matrix:
        ph = torch.tensor([[0.1, 0.5], [-0.3, 0.7]], dtype=torch.float64, requires_grad=True)

    def program() -> None:
        b = scg.sample(Bernoulli(logits=ph), name="b")
        z = scg.sample(Categorical(logits=th), name="z", n=2)
        scg.cost(cost(z, b), name="c")

    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.credit("b", "c") == credit
    _close(expected_estimate(program, [th, ph]), _two_samples_truth(cost, th, ph))
