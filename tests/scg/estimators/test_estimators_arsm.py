"""ARSM (augment-REINFORCE-swap-merge, categorical nodes): unbiased against exact enumeration for
K = 2, 3, 5 with causal credit across a scored node after it (one and two draws per node), for
one-hot and Independent nodes; a twin whose weights ignore the swap is caught; every evaluation
has the categorical marginals; its variance beside CategoricalDisARM and the score function."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch
from _estimators_util import check, estimates
from torch.distributions import Bernoulli, Categorical, Independent, OneHotCategorical

import scg
import scg.testing as st
from scg.estimators import ARSM, CategoricalDisARM, ScoreFunction
from scg.estimators.arsm import pseudo_action_count, swap_pairs, swap_weights

TABLE = torch.tensor([1.5, -2.0, 0.7, 3.0, -0.4], dtype=torch.float64)
LOGITS = [0.4, -1.1, 0.9, 0.3, -0.2]


def theta(k: int) -> torch.Tensor:
    return torch.tensor([*LOGITS[:k], 0.6], dtype=torch.float64, requires_grad=True)


def program(k: int, estimator: Any = None, n: int | None = None):  # type: ignore[no-untyped-def]
    """z ~ Cat(softmax(θ[:k])); y ~ Bern(σ(θk + table[z])) scored; a cost that couples z, θ and y."""

    def run(th: torch.Tensor) -> None:
        est = {} if estimator is None else {"estimator": estimator}
        z = scg.sample(Categorical(logits=th[:, :k]), name="z", n=n, **est)
        t = TABLE[z]
        y = scg.sample(Bernoulli(logits=th[:, k] + t), name="y", estimator=ScoreFunction())
        scg.cost((t + th[:, k]) ** 2 + 2.0 * y * t, name="c")

    return run


class UnswappedWeights(ARSM):
    """The swap (m, j) weighted by 1/K − π_m (π before the swap) instead of 1/K − π_j."""

    def merged(self, pi: torch.Tensor) -> torch.Tensor:
        k = pi.shape[-1]
        w, eye = 1.0 / k - pi, torch.eye(k, dtype=pi.dtype)
        m, j = swap_pairs(k)[1:].T
        swaps = w[..., m, None] * (eye[m] - 1.0 / k) + w[..., j, None] * (eye[j] - 1.0 / k)
        return torch.cat([w.unsqueeze(-2), swaps], -2)


def _check_unbiased(estimator: ARSM, k: int, draws: int, n: int = 3000) -> st.UnbiasedReport:
    """``scg.testing.check_unbiased``: ``n`` particle-batched estimates against enumeration."""
    th = theta(k)
    plain = program(k)
    batched = program(k, estimator, draws * pseudo_action_count(k))
    return st.check_unbiased(lambda: plain(th.unsqueeze(0)), [th], n, seed=11, batched=batched, particles=n)


@pytest.mark.parametrize(("k", "draws"), [(2, 1), (3, 1), (3, 2), (5, 1)])
def test_unbiased(k: int, draws: int) -> None:
    report = _check_unbiased(ARSM(), k, draws)
    assert report.passed, str(report)


def test_broken_twin_is_caught() -> None:
    # its mean is 0 on the categorical's logits (the swapped terms cancel z's own)
    report = _check_unbiased(UnswappedWeights(), 3, 1)
    assert not report.passed, str(report)


def test_every_evaluation_has_the_categorical_marginals_and_the_weights_sum_to_zero() -> None:
    logits = torch.tensor(LOGITS, dtype=torch.float64)
    torch.manual_seed(0)
    z = ARSM().draw(Categorical(logits=logits.expand(20000, 5)), torch.Size([11]))  # (11, 20000)
    p = logits.softmax(-1)
    sd = float((p * (1 - p) / z.shape[1]).sqrt().max())
    for evaluation in z:  # z, then the pseudo-actions of the 10 swaps
        freq = torch.bincount(evaluation, minlength=5).double() / evaluation.numel()
        assert float((freq - p).abs().max()) < 4.5 * sd, (freq, p)
    assert bool((z[1:] != z[0]).any(0).float().mean() > 0.5)  # the swaps move most draws
    # the weight vectors of a draw sum to zero (a baseline equal on all G evaluations cancels), and
    # each sums to zero over the categories (softmax is shift invariant)
    pi = torch.distributions.Dirichlet(torch.ones(4, dtype=torch.float64)).sample(torch.Size([7]))
    w = swap_weights(pi)
    assert w.shape == (7, pseudo_action_count(4), 4)
    assert float(w.sum(-2).abs().max()) < 1e-12
    assert float(w.sum(-1).abs().max()) < 1e-12


def test_onehot_and_independent_nodes_are_unbiased() -> None:
    table = torch.tensor([[1.0, -2.0, 0.5], [0.3, 2.0, -1.0]], dtype=torch.float64)

    def run(th: torch.Tensor, estimator: Any = None, n: int | None = None) -> None:
        logits = th.view(-1, 2, 3)
        if estimator is None:  # enumerated coordinate by coordinate for the exact gradient
            z = scg.sample(OneHotCategorical(logits=logits), name="z", plates=1)
        else:  # both coordinates swapped at once: 4 evaluations, not 4²
            z = scg.sample(Independent(OneHotCategorical(logits=logits), 1), name="z", n=n, estimator=estimator)
        s = (z * table).sum((-1, -2))
        scg.cost((s - 0.5) ** 2 + z[..., 0, 0] * z[..., 1, 2] * 4.0, name="c")

    th = torch.tensor([0.2, -0.5, 0.4, 1.0, 0.0, -0.7], dtype=torch.float64, requires_grad=True)
    want = st.exact_gradient(lambda: run(th.unsqueeze(0)), [th])[0]
    got = estimates(lambda t: run(t, ARSM(), 4), th, 3000, seed=3, particles=3000)
    report = check(got, want)
    assert report.passed, str(report)


def test_a_baseline_equal_on_every_evaluation_cancels() -> None:
    th = theta(3)
    grads = []
    for baseline in (None, scg.baselines.Constant(2.5)):
        torch.manual_seed(4)
        with scg.Graph() as g:
            z = scg.sample(Categorical(logits=th[:3]), name="z", n=4, estimator=ARSM(), baseline=baseline)
            scg.cost(TABLE[z] * th[3], name="c")
        grads.append(torch.autograd.grad(g.surrogate_loss(), th)[0])
    assert float((grads[0] - grads[1]).abs().max()) < 1e-12, grads
    assert float(grads[0].abs().max()) > 0.0


def test_errors_name_the_node() -> None:
    logits = torch.zeros(3, requires_grad=True)
    with scg.Graph():
        with pytest.raises(scg.SCGError, match=r"name='z'.*n=4 = 1 \+ K\(K-1\)/2.*got n=None"):
            scg.sample(Categorical(logits=logits), name="z", estimator=ARSM())
        with pytest.raises(scg.SCGError, match=r"name='z'.*one draw per 4 slices.*got n=6"):
            scg.sample(Categorical(logits=logits), name="z", n=6, estimator=ARSM())
        with pytest.raises(scg.SCGError, match=r"name='b'.*supports Categorical.*not Bernoulli"):
            scg.sample(Bernoulli(logits=logits), name="b", n=4, estimator=ARSM())

    def intervene(name: str, step: int | None, dist: Any, shape: torch.Size) -> torch.Tensor:
        return torch.zeros(shape, dtype=torch.long)

    with scg.Graph(intervene=intervene):
        with pytest.raises(scg.SCGError, match=r"name='z'.*ARSM\(\) scores only the values of its own draw"):
            scg.sample(Categorical(logits=logits), name="z", n=4, estimator=ARSM())
    with scg.Graph() as g:
        z = scg.sample(
            Categorical(logits=logits), name="z", n=4, estimator=ARSM(), baseline=scg.baselines.LeaveOneOut()
        )
        scg.cost(z.double(), name="c")
    with pytest.raises(scg.SCGError, match=r"ARSM\(\) on .*'z'.*LeaveOneOut"):
        g.surrogate_loss()
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=logits), name="z", n=4, estimator=ARSM())
        scg.cost(z.double(), name="c")
    with pytest.raises(scg.SCGError, match=r"dice=True.*ARSM"):
        g.surrogate_loss(dice=True)


def test_declared_and_cached_structure_give_the_same_estimate(assert_same_gradient_in_every_structure: Any) -> None:
    th = theta(5)

    def run() -> None:
        program(5, ARSM(), 11)(th.unsqueeze(0).expand(64, 6))

    assert_same_gradient_in_every_structure(run, [th])


#: the estimators of the variance comparison: (label, estimator, n)
ROWS: list[tuple[str, Any, int | None]] = [
    ("ScoreFunction(), 1 evaluation", ScoreFunction(), None),
    ("ScoreFunction(LeaveOneOut()), n=2", ScoreFunction(scg.baselines.LeaveOneOut()), 2),
    ("CategoricalDisARM(), n=2", CategoricalDisARM(), 2),
    ("ARSM(), n=11", ARSM(), 11),
    ("CategoricalDisARM(), n=10 (5 pairs)", CategoricalDisARM(), 10),
    ("ScoreFunction(LeaveOneOut()), n=11", ScoreFunction(scg.baselines.LeaveOneOut()), 11),
]


def _variances(rows: list[tuple[str, Any, int | None]]) -> dict[str, tuple[float, float, float]]:
    """label -> (variance: trace over the categorical's logits, max |z| against enumeration, CPU s)."""
    th = theta(5)
    want = st.exact_gradient(lambda: program(5)(th.unsqueeze(0)), [th])[0]
    out = {}
    for label, est, n in rows:
        start = time.process_time()
        got = estimates(program(5, est, n), th, 3000, seed=12, particles=3000)
        seconds = time.process_time() - start
        out[label] = (float(got[:, :5].var(0).sum()), float(check(got, want).z.abs().max()), seconds)
    return out


def test_variance_below_the_score_function_and_a_disarm_pair() -> None:
    var = {label: v for label, (v, _, _) in _variances([ROWS[0], ROWS[2], ROWS[3]]).items()}
    # measured (seed 12): ARSM 13.2, CategoricalDisARM (n=2) 18.1, the score function 62.8
    assert var[ROWS[3][0]] < 0.9 * var[ROWS[2][0]] < 0.9 * var[ROWS[0][0]], var


@pytest.mark.slow
def test_variance_table() -> None:
    """The table of docs/estimators.md (print it with ``-s``): ARSM at its 11 evaluations has more
    variance than leave-one-out or five DisARM pairs at the same count."""
    table = _variances(ROWS)
    print("\n| estimator (K = 5, a scored Bernoulli after it) | variance | max abs z | CPU ms / 1000 estimates |")
    for label, (v, z, seconds) in table.items():
        print(f"| {label} | {v:.3g} | {z:.2f} | {seconds * 1000 / 3:.1f} |")
    torch.manual_seed(0)
    draws = ARSM().draw(Categorical(logits=theta(5)[:5].detach().expand(3000, 5)), torch.Size([11]))
    distinct = torch.nn.functional.one_hot(draws, 5).amax(0).sum(-1).double().mean()
    print(f"ARSM's 11 evaluations hold {float(distinct):.2f} distinct categories on average")
    assert all(z < 3.76 for _, z, _ in table.values()), table
    assert table[ROWS[5][0]][0] < table[ROWS[3][0]][0] < table[ROWS[0][0]][0], table
