"""A batched node meets a cost that holds another node's sample dimension (helper-86's hunt).

``b ~ Bernoulli`` of batch (2,) drawn once, ``z`` drawn with ``n=2``: a cost ``t[z][:, None] * g(b)``
broadcasts ``b`` behind ``z``'s sample dimension. Every such broadcast used to mark ``b`` foreign
from position 0, which the plate check read as "inside the cost's sample dimensions" and credited
per element, whatever ``g`` did to ``b``'s examples before (a flip, a batch-centred reward) or
where the broadcast put them (behind another dimension). The positions now move right with the
dimensions the broadcast adds for sample dimensions (`scg.graph.sample_positions.samples_inserted`).

The checks are exact: the mean of the estimator over every joint draw (intervened, weighted by its
probability) against the gradient of E[Σ costs] enumerated in plain torch.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
import torch
from torch.distributions import Bernoulli, Categorical, Distribution

import scg

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
    # (conservative: b expanded to the samples' size before it meets them; nothing says yet that
    # the new dimension is a sample dimension)
    "expanded before the broadcast": lambda z, b: T[z][:, None] * b.expand(z.shape[0], 2),
}
LINED_UP: dict[str, Cost] = {
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


def _estimator_mean(cost: Cost) -> tuple[tuple[torch.Tensor, torch.Tensor], str]:
    """E[∇ surrogate] over every joint draw of b and z's samples, and the credit (b, c) got."""
    th, ph = _params()
    mean = [torch.zeros(3, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)]
    credit = ""
    for bits in itertools.product((0.0, 1.0), repeat=2):
        for ks in itertools.product(range(3), repeat=N):
            values = {"b": torch.tensor(bits, dtype=torch.float64), "z": torch.tensor(ks)}
            logp: list[torch.Tensor] = []

            def intervene(
                name: str,
                step: int | None,
                dist: Distribution,
                shape: torch.Size,
                values: dict[str, torch.Tensor] = values,
                logp: list[torch.Tensor] = logp,
            ) -> torch.Tensor:
                value = values[name]
                logp.append(dist.log_prob(value).sum().detach())
                return value

            with scg.Graph(intervene=intervene) as g:
                _program(cost, th, ph)
            gth, gph = torch.autograd.grad(g.surrogate_loss(), [th, ph])
            p = torch.stack(logp).sum().exp()
            mean[0] += p * gth
            mean[1] += p * gph
            credit = g.credit("b", "c")
    return (mean[0], mean[1]), credit


@pytest.mark.parametrize("kind", sorted(MIXING))
def test_a_mixing_before_or_around_the_broadcast_gets_whole_plate_credit(kind: str) -> None:
    (gth, gph), credit = _estimator_mean(MIXING[kind])
    true_th, true_ph = _true_gradient(MIXING[kind])
    assert credit == "whole-plate"
    torch.testing.assert_close(gph, true_ph, rtol=1e-9, atol=1e-12)  # (was 0 for the flip: [0.39, 0.37] expected)
    torch.testing.assert_close(gth, true_th, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", sorted(LINED_UP))
def test_a_lined_up_broadcast_keeps_per_element_credit(kind: str) -> None:
    (gth, gph), credit = _estimator_mean(LINED_UP[kind])
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
