"""Every exported estimator against what it declares about composing with the rest of scg
(issue 26): a ``baseline=`` is taken exactly by the score-function estimators (``score``) and
refused by name otherwise; ``surrogate_loss(dice=True)`` works where the estimator declares
``higher_order`` or adds no score / enumeration term, and is refused by name where not; and the
tracked, ``Cached`` and ``Declared`` structures give the same gradient. The table in
docs/estimators.md ("Composing with baselines, DiCE and structures") says the same."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Independent, Normal, OneHotCategorical

import scg
from scg import estimators as E

TABLE = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)


def _tanh_sum(z: torch.Tensor) -> torch.Tensor:
    return 0.3 * torch.tanh(z).sum(-1)


def _tanh(z: torch.Tensor) -> torch.Tensor:
    return 0.3 * torch.tanh(z)


#: estimator → (a factory, the node kind it takes, its n)
CASES: dict[str, tuple[Callable[[], E.Estimator], str, int | None]] = {
    "ScoreFunction": (E.ScoreFunction, "cat", None),
    "Pathwise": (E.Pathwise, "normal", None),
    "Enumerate": (E.Enumerate, "cat", None),
    "RELAX": (lambda: E.RELAX(_tanh_sum), "cat", None),
    "REBAR": (lambda: E.REBAR(_tanh), "bern", None),
    "LAX": (lambda: E.LAX(_tanh), "normal", None),
    "GumbelSoftmax": (lambda: E.GumbelSoftmax(1.0), "onehot", None),
    "GumbelRao": (lambda: E.GumbelRao(1.0), "onehot", None),
    "GumbelSparsemax": (lambda: E.GumbelSparsemax(1.0), "onehot", None),
    "GumbelEntmax": (lambda: E.GumbelEntmax(1.0), "onehot", None),
    "ARM": (E.ARM, "bern", 2),
    "DisARM": (E.DisARM, "bern", 2),
    "CategoricalDisARM": (E.CategoricalDisARM, "cat", 2),
    "ARSM": (E.ARSM, "cat", 7),  # K = 4: z and its 6 pseudo-actions
    "MeasureValued": (E.MeasureValued, "normal", None),
    "UnorderedSet": (E.UnorderedSet, "cat", 2),
    "RaoBlackwellized": (lambda: E.RaoBlackwellized(2), "cat", None),
    "IndeCateR": (E.IndeCateR, "indcat", None),
}
BASE_CLASSES = {"LearnedControl"}  # tested through RELAX, REBAR and LAX


def test_every_exported_estimator_has_a_case() -> None:
    exported = {n for n in E.__all__ if inspect.isclass(c := getattr(E, n)) and issubclass(c, E.Estimator)}
    assert exported - {"Estimator"} == set(CASES) | BASE_CLASSES


def _program(estimator: E.Estimator, kind: str, n: int | None, theta: torch.Tensor, **kw: Any) -> None:
    """One node of ``kind`` (a batch of 4) with ``estimator``, then a scored Bernoulli and costs."""
    t = theta.unsqueeze(0).expand(4, 8)
    if kind == "normal":
        x = scg.sample(Normal(t[:, 0], t[:, 1].exp()), name="x", n=n, estimator=estimator, **kw)
        v = torch.tanh(x - 0.2)
    elif kind == "bern":
        x = scg.sample(Bernoulli(logits=t[:, :3]), name="x", n=n, estimator=estimator, **kw)
        v = (x * TABLE[:3]).sum(-1)
    elif kind == "cat":
        x = scg.sample(Categorical(logits=t[:, :4]), name="x", n=n, estimator=estimator, **kw)
        v = TABLE[x]
    elif kind == "onehot":
        x = scg.sample(OneHotCategorical(logits=t[:, :4]), name="x", n=n, estimator=estimator, **kw)
        v = x @ TABLE
    else:  # indcat: two categoricals decoded jointly
        dist = Independent(Categorical(logits=t[:, :6].reshape(4, 2, 3)), 1)
        x = scg.sample(dist, name="x", n=n, estimator=estimator, **kw)
        v = TABLE[x[..., 0]] * TABLE[x[..., 1]]
    scg.cost((v - t[:, 7]) ** 2, name="c")  # before y: Declared credits a node with every later cost
    y = scg.sample(Bernoulli(logits=t[:, 6] + v), name="y")
    scg.cost(2.0 * y * v, name="d")


def _theta() -> torch.Tensor:
    return torch.tensor([0.3, -0.4, 0.2, -0.1, 0.5, 0.1, -0.2, 0.6], dtype=torch.float64, requires_grad=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_composition_matches_the_declarations(name: str, assert_same_gradient_in_every_structure: Any) -> None:
    factory, kind, n = CASES[name]
    theta = _theta()
    assert_same_gradient_in_every_structure(lambda: _program(factory(), kind, n, theta), [theta])

    # dice=True: refused by name exactly where a score or enumeration term is not higher-order
    est = factory()
    with scg.Graph() as g:
        _program(est, kind, n, theta)
    if (est.score or est.enumerates) and not est.higher_order:
        with pytest.raises(scg.SCGError, match=rf"dice=True.*'x'.*{name}\(.*higher derivatives are not unbiased"):
            g.surrogate_loss(dice=True)
    else:
        (grad,) = torch.autograd.grad(g.surrogate_loss(dice=True), theta)
        assert bool(torch.isfinite(grad).all())

    # baseline=: taken by the score-function estimators (a baseline equal within a pair, for
    # the antithetic ones), refused by name by the others
    est = factory()
    if est.score:
        with scg.Graph() as g:
            _program(est, kind, n, theta, baseline=scg.baselines.EMA(0.5))
        (grad,) = torch.autograd.grad(g.surrogate_loss(), theta)
        assert bool(torch.isfinite(grad).all())
    else:
        with scg.Graph(), pytest.raises(scg.SCGError, match=r"name='x'.*baseline= needs a score-function estimator"):
            _program(est, kind, n, theta, baseline=scg.baselines.EMA(0.5))
