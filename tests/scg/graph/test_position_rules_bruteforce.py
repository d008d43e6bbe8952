"""The position rules of the influence tracker against a brute-force dependency check (issue 30).

For a stochastic node ``z`` with one plate (its leading dimension, the examples) and a cost
``c = f(z)``, per-example credit is sound only when row ``j`` of the cost depends on row ``j`` of
``z`` alone. The brute force states that directly: perturb one example of ``z`` and see which
cost rows move. The tracker must never claim per-example credit where the brute force sees
rows mix (that biases the gradient); for the operations whose rule is exact it must also claim
it wherever the brute force allows it (otherwise the rule is needlessly conservative: whole-plate
credit, a higher variance). A cost of one row (or none) is the same under both rules and is
only required to be credited at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.distributions import Bernoulli, Normal

import scg
import scg.testing

Fn = Callable[[torch.Tensor], torch.Tensor]
#: 25 cases per rule: 5 hypothesis examples of 5 cases each (hypothesis's own work per example cost
#: as much CPU as a case's graph and brute force)
SETTINGS = settings(max_examples=5, deadline=None, derandomize=True, database=None)
CASES = 5


def rows(x: torch.Tensor) -> torch.Tensor:
    """A per-row total: leaves rows as they are (its own rule keeps position 0)."""
    return x.reshape(x.shape[0], -1).sum(-1) if x.dim() > 1 else x


def brute_force_per_example(f: Fn, shape: tuple[int, ...]) -> bool:
    """Whether every cost row moves only with the same row of ``z`` (and the rows match)."""
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(shape, dtype=torch.float64, generator=gen)
    c0 = f(z)
    if c0.dim() == 0 or c0.shape[0] != shape[0]:
        return False
    for i in range(shape[0]):
        z1 = z.clone()
        z1[i] += 0.5 + torch.rand(shape[1:], dtype=torch.float64, generator=gen)
        moved = (f(z1) - c0).reshape(c0.shape[0], -1).abs().amax(-1) > 1e-9
        if moved.nonzero().flatten().tolist() not in ([], [i]):
            return False
    return True


def tracker_credit(f: Fn, shape: tuple[int, ...]) -> tuple[str, torch.Size]:
    torch.default_generator.manual_seed(0)  # (torch.manual_seed also formats the stack for lazy CUDA seeding)
    with scg.Graph() as g:
        z = scg.sample(
            Normal(torch.zeros(shape, dtype=torch.float64), 1.0), name="z", plates=1, estimator=scg.ScoreFunction()
        )
        c = f(z)
        scg.cost(c, name="c")
    g.surrogate_loss()
    return g.credit("z", "c"), c.shape


def check(op: Fn, shape: tuple[int, ...], exact: bool) -> None:
    def f(z: torch.Tensor) -> torch.Tensor:  # scg refuses costs of another batch size
        c = op(z)
        return c if c.dim() == 0 or c.shape[0] in (1, shape[0]) else c.sum()

    credit, cshape = tracker_credit(f, shape)
    assert credit in ("per-element", "whole-plate"), credit
    if len(cshape) == 0 or cshape[0] == 1:
        return  # one cost row: per-example and whole-plate credit are the same
    truth = brute_force_per_example(f, shape)
    if credit == "per-element":
        assert truth, f"the tracker credits per example, but the cost rows mix ({shape})"
    elif exact:
        assert not truth, f"the cost is per example, but the tracker credits whole-plate ({shape})"


@st.composite
def shapes(draw: st.DrawFn, min_dims: int = 2) -> tuple[int, ...]:
    batch = draw(st.integers(2, 3))  # other sizes often equal it: rows mixed into rows
    rest = draw(st.lists(st.sampled_from([1, 2, 3, batch, batch]), min_size=min_dims - 1, max_size=2))
    return (batch, *rest)


def _cases(check: Callable[[tuple[int, ...], st.DataObject], None], data: st.DataObject, min_dims: int = 2) -> None:
    """``check`` on CASES shapes drawn from `shapes` (one hypothesis example holds CASES cases)."""
    for _ in range(CASES):
        check(data.draw(shapes(min_dims)), data)


def _reduction_broadcast_back_matches_brute_force(shape: tuple[int, ...], data: st.DataObject) -> None:
    """``z * z.sum(k, keepdim=True)``: the reduced (size-1) dimension is expanded again; per
    example unless k is the batch dimension."""
    k = data.draw(st.integers(0, len(shape) - 1))
    mean = data.draw(st.booleans())

    def f(z: torch.Tensor) -> torch.Tensor:
        r = z.mean(k, keepdim=True) if mean else z.sum(k, keepdim=True)
        return rows(z - r if mean else z * r)

    check(f, shape, exact=True)


@SETTINGS
@given(data=st.data())
def test_reduction_broadcast_back_matches_brute_force(data: st.DataObject) -> None:
    _cases(_reduction_broadcast_back_matches_brute_force, data)


def _reduction_rule_matches_brute_force(shape: tuple[int, ...], data: st.DataObject) -> None:
    k = data.draw(st.integers(0, len(shape) - 1))
    op = data.draw(st.sampled_from(["sum", "amax", "logsumexp", "cumsum", "softmax"]))

    def f(z: torch.Tensor) -> torch.Tensor:
        return rows(getattr(torch, op)(z, k))

    check(f, shape, exact=True)


@SETTINGS
@given(data=st.data())
def test_reduction_rule_matches_brute_force(data: st.DataObject) -> None:
    _cases(_reduction_rule_matches_brute_force, data, 3)


def _transpose_rule_matches_brute_force(shape: tuple[int, ...], data: st.DataObject) -> None:
    a = data.draw(st.integers(0, len(shape) - 1))
    b = data.draw(st.integers(0, len(shape) - 1))

    def f(z: torch.Tensor) -> torch.Tensor:
        return rows(z.transpose(a, b) * 1.5)

    check(f, shape, exact=True)


@SETTINGS
@given(data=st.data())
def test_transpose_rule_matches_brute_force(data: st.DataObject) -> None:
    _cases(_transpose_rule_matches_brute_force, data, 3)


def _cat_and_stack_rules_match_brute_force(shape: tuple[int, ...], data: st.DataObject) -> None:
    """``cat``/``stack`` along the batch dimension put other rows (or other tensors) at the
    batch positions: row j is no longer example j."""
    d = data.draw(st.integers(0, len(shape) - 1))
    op = data.draw(st.sampled_from(["cat", "stack", "cat_front"]))

    def f(z: torch.Tensor) -> torch.Tensor:
        if op == "stack":
            return rows(torch.stack([z, 2.0 * z, z * z][: z.shape[0]], d))
        if op == "cat":
            return rows(torch.cat([z, 2.0 * z], d))
        pad_shape = list(z.shape)
        pad_shape[d] = 1
        return rows(torch.cat([torch.ones(pad_shape, dtype=z.dtype), z], d))

    check(f, shape, exact=d != 0)


@SETTINGS
@given(data=st.data())
def test_cat_and_stack_rules_match_brute_force(data: st.DataObject) -> None:
    _cases(_cat_and_stack_rules_match_brute_force, data)


def _gather_rule_matches_brute_force(shape: tuple[int, ...], data: st.DataObject) -> None:
    """``gather`` along the batch dimension reads other rows (a non-identity index); along a
    later dimension each row reads its own."""
    d = data.draw(st.integers(0, len(shape) - 1))
    shift = data.draw(st.integers(1, shape[d] - 1)) if shape[d] > 1 else 0

    def f(z: torch.Tensor) -> torch.Tensor:
        size = z.shape[d]
        idx = (torch.arange(size) + shift) % size
        view = [1] * z.dim()
        view[d] = size
        return rows(z.gather(d, idx.reshape(view).expand(z.shape)))

    check(f, shape, exact=True)


@SETTINGS
@given(data=st.data())
def test_gather_rule_matches_brute_force(data: st.DataObject) -> None:
    _cases(_gather_rule_matches_brute_force, data)


def _row_wise_losses_match_brute_force(shape: tuple[int, ...], data: st.DataObject) -> None:
    """Issue 24 item 4: with ``reduction="none"`` each loss row is one example's; reduced, the
    single value mixes every row."""
    name = data.draw(
        st.sampled_from(
            [
                "cross_entropy",
                "nll_loss",
                "multi_margin_loss",
                "multilabel_soft_margin_loss",
                "bce_logits",
                "mse_loss",
                "l1_loss",
                "smooth_l1_loss",
                "huber_loss",
                "kl_div",
                "cosine_similarity",
                "pairwise_distance",
            ]
        )
    )
    reduction = data.draw(st.sampled_from(["none", "none", "mean", "sum"]))
    classes = shape[1]
    gen = torch.Generator().manual_seed(1)
    fixed = torch.randint(0, classes, (shape[0], *shape[2:]), generator=gen)
    from_z = data.draw(st.booleans())  # the target is computed from the node too

    def f(z: torch.Tensor) -> torch.Tensor:
        other = torch.full_like(z, 0.25)
        target = z.argmax(1) if from_z else fixed
        if name == "cross_entropy":
            out = F.cross_entropy(z, target, reduction=reduction)
        elif name == "nll_loss":
            out = F.nll_loss(F.log_softmax(z, 1), target, reduction=reduction)
        elif name == "multi_margin_loss":
            out = F.multi_margin_loss(z.flatten(1), target[:, 0] if target.dim() > 1 else target, reduction=reduction)
        elif name == "multilabel_soft_margin_loss":
            out = F.multilabel_soft_margin_loss(z.flatten(1), other.flatten(1), reduction=reduction)
        elif name == "bce_logits":
            out = F.binary_cross_entropy_with_logits(z, other, reduction=reduction)
        elif name == "kl_div":
            kl = "batchmean" if reduction == "mean" else reduction
            out = F.kl_div(F.log_softmax(z, 1), other, reduction=kl)
        elif name in ("cosine_similarity", "pairwise_distance"):
            out = getattr(F, name)(z, other)
            out = out.sum() if reduction == "sum" else out.mean() if reduction == "mean" else out
        else:
            out = getattr(F, name)(z, other, reduction=reduction)
        return rows(out)

    check(f, shape, exact=True)


@SETTINGS
@given(data=st.data())
def test_row_wise_losses_match_brute_force(data: st.DataObject) -> None:
    _cases(_row_wise_losses_match_brute_force, data)


def test_an_expand_to_a_higher_rank_is_foreign_from_position_0(assert_credit_and_exact_mean: Any) -> None:
    """An expand that keeps the rank keeps every position; one that adds leading dimensions does
    not: ``z (3,).expand(3, 3)`` puts z[j] in column j of every row, so z needs whole-plate credit.
    Credited per row (every expand read as aligned), z[i] got w_i Σ_j z[j]: the estimator's mean
    w_i ∇E z_i instead of (Σ_k w_k) ∇E z_i (checked exactly: the mean over z's 8 values)."""
    theta = torch.tensor([0.3, -0.4, 0.5], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([[1.0], [2.0], [-4.0]], dtype=torch.float64)

    def program() -> None:
        z = scg.sample(Bernoulli(logits=theta), name="z")  # (3,)
        scg.cost(z.expand(3, 3) * w, name="c")  # c[i, j] = w[i] z[j]

    assert_credit_and_exact_mean(program, [theta], z__c="whole-plate")


def test_a_cat_along_the_examples_shifts_their_rows(assert_credit_and_exact_mean: Any) -> None:
    """``torch.cat([zeros(1), z])[:2]`` puts z[0] in row 1: the rows of the cost do not line up
    with z's examples, so z needs whole-plate credit. Credited per row, z[0] would get row 0 of the
    cost, which it does not influence: its gradient 0 instead of 2 ∇E z_0 (checked exactly: the
    mean over z's 4 values). (The slice that brings the cat back to z's size is foreign from
    position 0 by its own rule, whatever the cat's rule says: see the mutant pos-cat-batch-aligned.)"""
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([1.0, 2.0], dtype=torch.float64)

    def program() -> None:
        z = scg.sample(Bernoulli(logits=theta), name="z")  # (2,)
        shifted = torch.cat([torch.zeros(1, dtype=z.dtype), z])[:2]  # (z[-1] dropped) [0, z[0]]
        scg.cost(shifted * w, name="c")

    assert_credit_and_exact_mean(program, [theta], z__c="whole-plate")


def test_classification_cost_credits_each_example() -> None:
    """The nodes upstream of a classification cost get per-example credit (not whole-plate):
    a categorical latent picks a feature row, a network scores the classes."""
    torch.manual_seed(0)
    w = torch.randn(4, 5, requires_grad=True)
    with scg.Graph() as g:
        k = scg.sample(torch.distributions.Categorical(logits=torch.zeros(6, 3)), name="k")
        h = F.one_hot(k, 3).float() @ torch.randn(3, 4)
        y = scg.sample(torch.distributions.Categorical(logits=torch.zeros(6, 5)), name="y")
        scg.cost(F.cross_entropy(h @ w, y, reduction="none"), name="nll")
        scg.cost(F.nll_loss(F.log_softmax(h @ w, -1), y, reduction="none"), name="nll2")
    g.surrogate_loss()
    assert g.credit("k", "nll") == "per-element"
    assert g.credit("k", "nll2") == "per-element"
    assert g.credit("y", "nll") == "per-element"  # the label, a sampled target


def test_per_example_credit_through_cross_entropy_is_unbiased() -> None:
    """The per-example credit the row-wise loss rule gives is unbiased against exact enumeration,
    tracked, cached and declared. The estimates are vectorised: P particles are P copies of the two
    examples, stacked as 2P rows of one graph (so a row's loss is still one example's); four graphs
    of 100 particles each, so that the cached structure serves the graphs after its first."""
    logits = torch.tensor([[0.3, -0.2, 0.1], [-0.4, 0.2, 0.5]], requires_grad=True)
    emb = torch.tensor([[1.0, -1.0], [0.5, 2.0], [-1.5, 0.3]])
    head = torch.tensor([[0.7, -0.2, 0.1], [0.3, 0.9, -0.5]])
    labels = torch.tensor([2, 0])

    def rows_of(lg: torch.Tensor) -> torch.Tensor:  # (2, 3), or (P, 2, 3) for P particles -> (2P,) rows
        return scg.sample(torch.distributions.Categorical(logits=lg.reshape(-1, 3)), name="k")

    def batched(lg: torch.Tensor) -> None:
        k = rows_of(lg)
        scg.cost(F.cross_entropy(emb[k] @ head, labels.repeat(k.shape[0] // 2), reduction="none"), name="nll")

    def program() -> None:
        batched(logits)

    exact = scg.testing.exact_gradient(program, [logits])
    for kwargs in ({}, {"structure": scg.Cached()}, {"structure": scg.Declared()}):
        report = scg.testing.check_unbiased(
            program, [logits], n=400, exact=exact, batched=batched, particles=100, graph_kwargs=kwargs
        )
        assert report.passed, (kwargs, str(report))
    with scg.Graph() as g:
        program()
    g.surrogate_loss()
    assert g.credit("k", "nll") == "per-element"

    def swapped_batched(lg: torch.Tensor) -> None:  # row i's loss reads the other example of its particle
        k = rows_of(lg)
        other = k.reshape(-1, 2).flip(1).reshape(-1)
        scg.cost(F.cross_entropy(emb[other] @ head, labels.repeat(k.shape[0] // 2), reduction="none"), name="nll")

    twin = scg.testing.check_unbiased(
        lambda: swapped_batched(logits),
        [logits],
        n=400,
        batched=swapped_batched,
        particles=100,
        graph_kwargs={"structure": scg.Declared()},
    )
    assert not twin.passed, str(twin)  # the check sees the bias of a wrong per-example claim
