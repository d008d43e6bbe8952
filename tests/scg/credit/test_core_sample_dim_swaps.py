"""Two sample dimensions of equal size swapped (issue 11, class 1, last bullet).

The layout of sample dimensions (newest node first) used to be checked by size only, so with
``u`` and ``v`` both drawn with ``n=2`` a cost arranged ``(u, v, ...)`` instead of ``(v, u, ...)``
passed and credited each sample with another node's samples' costs (biased, silently: shown
below by switching the new check off). ``scg.graph.sample_positions`` now follows each sample
dimension through the ops, so a swap is an error naming the cost and the node.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
from _estimators_util import check, estimates, exact_gradient_batched
from torch.distributions import Bernoulli, Categorical, Normal

import scg
import scg.credit.sample_dims

TAB = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)


def theta() -> torch.Tensor:
    return torch.tensor([0.3, -0.2, 0.5, 0.7], dtype=torch.float64, requires_grad=True)


Arrange = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

#: u (2, P), v (2, P), both n=2: the layout of a cost of both is (v, u, P)
RIGHT: dict[str, Arrange] = {
    "broadcast": lambda a, b: a[None] * (1 + b[:, None]),
    "unsqueeze": lambda a, b: a.unsqueeze(0) * (1 + b.unsqueeze(1)),
    "transpose twice": lambda a, b: (a[:, None] * (1 + b[None])).transpose(0, 1),
    "permute": lambda a, b: (a[:, None] * (1 + b[None])).permute(1, 0, 2),
    "movedim": lambda a, b: (a[:, None] * (1 + b[None])).movedim(1, 0),
    "trailing reshape": lambda a, b: (a[None] * (1 + b[:, None]))[..., None].reshape(2, 2, -1),
}
SWAPPED: dict[str, Arrange] = {
    "broadcast": lambda a, b: a[:, None] * (1 + b[None]),
    "transpose": lambda a, b: (a[None] * (1 + b[:, None])).transpose(0, 1),
    "swapaxes": lambda a, b: (a[None] * (1 + b[:, None])).swapaxes(1, 0),
    "permute": lambda a, b: (a[None] * (1 + b[:, None])).permute(1, 0, 2),
    "movedim": lambda a, b: (a[None] * (1 + b[:, None])).movedim(0, 1),
    ".mT of a (P, v, u) view": lambda a, b: (a.T[:, None] * (1 + b.T[:, :, None])).mT.permute(2, 1, 0).transpose(0, 1),
}


def program(arrange: Arrange) -> Callable[[torch.Tensor], None]:
    def run(th: torch.Tensor) -> None:
        u = scg.sample(Categorical(logits=th[:, :3]), name="u", n=2)
        v = scg.sample(Bernoulli(logits=th[:, 3]), name="v", n=2)
        scg.cost(arrange(TAB[u], v) + th[:, 0] * v[:, None], name="c")  # (2, 2, P)

    return run


def plain(th: torch.Tensor) -> None:
    u = scg.sample(Categorical(logits=th[:, :3]), name="u")
    v = scg.sample(Bernoulli(logits=th[:, 3]), name="v")
    scg.cost(TAB[u] * (1 + v) + th[:, 0] * v, name="c")


def exact(th: torch.Tensor) -> torch.Tensor:
    return exact_gradient_batched(plain, th)


@pytest.mark.parametrize("kind", sorted(SWAPPED))
def test_swapped_sample_dims_of_equal_size_raise(kind: str) -> None:
    with scg.Graph() as g:
        program(SWAPPED[kind])(theta().unsqueeze(0).expand(3, 4))
    assert g.node("c").value.shape == (2, 2, 3)  # the size check alone passes
    with pytest.raises(
        scg.SCGError,
        match=r"cost node 'c'.*sample dimension of stochastic "
        r"node '[uv]'.*swapped",
    ):
        g.surrogate_loss()


@pytest.mark.parametrize("kind", sorted(RIGHT))
def test_sample_dims_followed_through_ops_are_accepted(kind: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with scg.Graph(strict=True) as g:
            program(RIGHT[kind])(theta().unsqueeze(0).expand(3, 4))
        g.surrogate_loss().backward()


def test_right_arrangement_is_unbiased_and_the_swap_was_biased(monkeypatch: pytest.MonkeyPatch) -> None:
    th = theta()
    ex = exact(th)
    report = check(estimates(program(RIGHT["transpose twice"]), th, 3000, seed=3), ex)
    assert report.passed, str(report)
    # the old behaviour (size check only): the swap is accepted and the estimate is biased
    monkeypatch.setattr(scg.credit.sample_dims, "check_layout", lambda *a, **k: None)
    report = check(estimates(program(SWAPPED["transpose"]), th, 3000, seed=3), ex)
    assert not report.passed, str(report)


def test_nested_multi_sample_nodes_swap_is_caught() -> None:
    """w ~ q(u) with n=2 has shape (2_w, 2_u, P): its own dimension first, then u's."""
    th = theta()
    with scg.Graph() as g:
        u = scg.sample(Categorical(logits=th[:3]).expand((3,)), name="u", n=2)  # (2, 3)
        w = scg.sample(Normal(TAB[u], 1.0), name="w", n=2)  # (2, 2, 3)
        scg.cost(w * TAB[u][None], name="ok")
        scg.cost((w * TAB[u][None]).transpose(0, 1), name="bad")
    with pytest.raises(scg.SCGError, match=r"cost node 'bad'.*stochastic node '[uw]'"):
        g.surrogate_loss()


def test_unfollowed_op_on_equal_size_dims_is_reported() -> None:
    def unruled(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        x = a[None] * (1 + b[:, None])
        return torch.nn.functional.prelu(x, x.new_ones(1))  # no position rule

    th = theta().unsqueeze(0).expand(3, 4)
    with scg.Graph() as g:
        program(unruled)(th)
    with pytest.warns(scg.InfluenceLostWarning, match=r"cost node 'c'.*cannot verify.*'[uv]'"):
        g.surrogate_loss()
    with scg.Graph(strict=True) as g:
        program(unruled)(th)
    with pytest.raises(scg.InfluenceLostError, match="cannot verify"):
        g.surrogate_loss()


def test_unfollowed_op_on_sample_dims_of_different_sizes_is_not_reported() -> None:
    """The size check tells dimensions of different sizes apart: nothing to report."""
    th = theta().unsqueeze(0).expand(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with scg.Graph(strict=True) as g:
            u = scg.sample(Categorical(logits=th[:, :3]), name="u", n=3)
            v = scg.sample(Bernoulli(logits=th[:, 3]), name="v", n=2)
            c = torch.nn.functional.pad(TAB[u][None] * (1 + v[:, None]), (0, 0))  # (2, 3, P)
            scg.cost(c, name="c")
        g.surrogate_loss()


#: mixing the samples of one node while the cost keeps both sample dimensions (v, u, P)
MIXING: dict[str, Arrange] = {
    "centred over u": lambda a, b: (lambda x: x - x.mean(1, keepdim=True))(a[None] * (1 + b[:, None])),
    "cumsum over v": lambda a, b: (a[None] * (1 + b[:, None])).cumsum(0),
    "softmax over u": lambda a, b: (a[None] * (1 + b[:, None])).softmax(1),
    "flip of u": lambda a, b: (a[None] * (1 + b[:, None])).flip(1),
}


@pytest.mark.parametrize("kind", sorted(MIXING))
def test_mixing_samples_with_several_sample_dims_raises(kind: str) -> None:
    with scg.Graph() as g:
        program(MIXING[kind])(theta().unsqueeze(0).expand(3, 4))
    node = kind.split()[-1]  # the node whose samples are mixed
    with pytest.raises(
        scg.SCGError,
        match=rf"cost node 'c' \(created.*\) mixes the samples of "
        rf"stochastic node '{node}'",
    ):
        g.surrogate_loss()


def test_reductions_and_along_ops_over_other_dims_keep_the_sample_dims() -> None:
    """No false positive: a softmax/cumsum/sum over the batch keeps the sample dimensions."""
    th = theta().unsqueeze(0).expand(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with scg.Graph(strict=True) as g:
            u = scg.sample(Categorical(logits=th[:, :3]), name="u", n=2)
            v = scg.sample(Bernoulli(logits=th[:, 3]), name="v", n=2)
            x = TAB[u][None] * (1 + v[:, None])  # (2, 2, P)
            scg.cost(x.softmax(-1) + x.cumsum(2) + x.sum(-1, keepdim=True) + x.flip(-1), name="c")
            scg.cost(x.logsumexp(1), name="r", reduced=u)  # a declared reduction: (2_v, P)
        g.surrogate_loss().backward()
