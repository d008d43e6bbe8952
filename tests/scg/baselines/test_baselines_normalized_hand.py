"""``Normalized`` (NVIL) against a hand computation over several steps (issue 30).

Per step t, with the inner baseline's value b and the learning signal l_b = Ĉ_b − b:
the surrogate's score term is Σ_b ∇log p(z_b) · (l_b − m_t) / max(1, √v_t), where m_t, v_t are
the running statistics from *before* step t, then m ← m + β(mean l − m),
v ← v + β(mean (l − m_t)² − v), starting from m = 0, v = 1.
"""

from __future__ import annotations

import math

import torch
from torch.distributions import Bernoulli, Categorical

import scg

B, K, BETA, INNER = 8, 3, 0.5, 0.5
TAB = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
SCALES = [0.2, 0.1, 4.0, 3.0, 0.3]  # std below 1 (the clamp matters) and above 1


def test_normalized_matches_the_hand_computation_over_several_steps() -> None:
    logits = torch.randn(B, K, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    logits.requires_grad_()
    norm = scg.baselines.Normalized(scg.baselines.Constant(INNER), beta=BETA)
    m, v = 0.0, 1.0
    torch.manual_seed(1)
    seen_small = seen_large = False
    for scale in SCALES:
        with scg.Graph() as g:
            z = scg.sample(Categorical(logits=logits), name="z", baseline=norm)
            c = scg.cost(scale * TAB[z], name="c")
        (grad,) = torch.autograd.grad(g.surrogate_loss(), logits)
        signal = c.detach() - INNER
        factor = 1.0 / max(1.0, math.sqrt(v))
        seen_small |= v < 1.0
        seen_large |= v > 1.0
        score = torch.nn.functional.one_hot(z, K).to(logits.dtype) - logits.detach().softmax(-1)
        want = score * ((signal - m) * factor)[:, None]
        torch.testing.assert_close(grad, want)
        m, v = m + BETA * (float(signal.mean()) - m), v + BETA * (float(((signal - m) ** 2).mean()) - v)
    assert seen_small and seen_large  # both sides of the max(1, ·) clamp were exercised


def test_an_empty_batch_leaves_the_statistics_as_they_were() -> None:
    """A batch of 0 examples (a last batch, every sequence done) observes nothing: its mean over
    no element made the running mean and variance NaN, so every later step's baseline value was
    NaN (refused by check_finite; with check_finite=False a NaN gradient)."""
    norm = scg.baselines.Normalized(beta=BETA)
    for batch in (3, 0, 2):
        logits = torch.zeros(batch, dtype=torch.float64, requires_grad=True)
        before = dict(norm.stats)
        with scg.Graph() as g:
            z = scg.sample(Bernoulli(logits=logits), name="z", baseline=norm)
            scg.cost(3.0 * z - 1.0, name="c")
        (grad,) = torch.autograd.grad(g.surrogate_loss(check_finite=False), logits)
        assert bool(torch.isfinite(grad).all()), (batch, grad)
        if batch == 0:
            assert norm.stats == before
        assert all(math.isfinite(m) and math.isfinite(v) for m, v in norm.stats.values()), (batch, norm.stats)
