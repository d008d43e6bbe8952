"""RELAX (and REBAR): the score function with a learned, sample-dependent control variate.

For a discrete node b = H(z), z ~ p(z | θ) the Gumbel-perturbed logits (H = argmax, or the sign
for Bernoulli), and a differentiable surrogate c_φ of the downstream cost, Grathwohl, Choi, Wu,
Roeder & Duvenaud (2018) show that

    ĝ = [f(b) − c_φ(z̃)] ∇_θ log p(b | θ) + ∇_θ c_φ(z) − ∇_θ c_φ(z̃),   z̃ ~ p(z | b, θ),

is unbiased for ∇_θ E[f(b)] for *any* c_φ: the score term's baseline c_φ(z̃) depends on the
sample, and the two reparameterized terms remove exactly the bias that causes (z̃ is drawn from
the conditional given b, itself reparameterized in θ). REBAR (Tucker, Mnih, Maddison, Lawson &
Sohl-Dickstein 2017) is the special case c_φ(z) = η · f(σ_λ(z)) (the relaxed cost, at a learned
temperature λ and scale η); RELAX adds a free-form network, e.g. c_φ(z) = η f(σ_λ(z)) + r_ρ(z).

Sampling (Tucker et al. 2017, Appendix): with v ~ U(0, 1)^K, for a categorical with normalized
log-probabilities log p, z = log p + G (G Gumbel) and, given b,

    z̃_b = −log(−log v_b),   z̃_i = −log(−log v_i / p_i − log v_b)   (i ≠ b);

for a Bernoulli with p = P(b = 1), z = logit p + logit u, and given b, u = (1 − p) + v p (b = 1)
or u = v (1 − p) (b = 0). ``z`` is reparameterized unconditionally (its noise G is held fixed:
z = log p(θ) + stop_gradient(z − log p)); here it is drawn from p(z | b) independently of z̃,
which is the same joint distribution as drawing z first and b = H(z).

The surrogate terms, and how φ is trained to reduce the variance, are those of
`scg.estimators.control`; [`REBAR`][scg.estimators.REBAR] builds the REBAR control.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch.distributions import Bernoulli, Categorical, Distribution, Independent, OneHotCategorical

from scg.errors import SCGError
from scg.estimators.categorical import finite_logits
from scg.estimators.control import LearnedControl

if TYPE_CHECKING:
    from scg.graph.nodes import StochasticNode

__all__ = ["RELAX", "bernoulli_given", "categorical_given", "uniform"]

_EPS = 1e-6


def uniform(shape: torch.Size, like: torch.Tensor) -> torch.Tensor:
    """U(ε, 1 − ε) noise of ``shape``, with the dtype and device of ``like``."""
    return torch.rand(shape, dtype=like.dtype, device=like.device).clamp(_EPS, 1.0 - _EPS)


def categorical_given(logp: torch.Tensor, idx: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """z ~ p(z | argmax z = idx) for z = logp + Gumbel, reparameterized in ``logp``."""
    top = -torch.log(-torch.log(v.gather(-1, idx.unsqueeze(-1))))  # Gumbel(0): logsumexp = 0
    others = -torch.log(-torch.log(v) * torch.exp(-logp) + torch.exp(-top))
    return others.scatter(-1, idx.unsqueeze(-1), top)


def bernoulli_given(logits: torch.Tensor, b: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """z = logit p + logit u with u conditioned on [z > 0] = b, reparameterized in ``logits``."""
    p = torch.sigmoid(logits)
    u = torch.where(b > 0.5, (1.0 - p) + v * p, v * (1.0 - p)).clamp(_EPS, 1.0 - _EPS)
    return logits + torch.log(u) - torch.log1p(-u)


class RELAX(LearnedControl):
    """RELAX / REBAR for Categorical, OneHotCategorical and Bernoulli nodes (unbiased).

    Args:
        control: c_φ, maps the relaxed variable z (``(*sample, *batch, K)`` Gumbel-perturbed
            normalized logits for categorical nodes, ``(*sample, *batch)`` logistic-perturbed
            logits for Bernoulli nodes, ``(*sample, *batch, D)`` for ``Independent(Bernoulli)``
            bit vectors) to a tensor of the node's log-probability shape
            ``(*sample, *batch)``. Usually a ``torch.nn.Module`` the user holds
            ([`REBAR`][scg.estimators.REBAR] builds η · f(σ_λ(z)) for you).
        parameters: φ, the tensors `backward` trains to reduce the variance; default: the
            module's ``parameters()``.
        baseline: an ordinary baseline subtracted as well (optional).
    """

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        if not isinstance(dist, (Categorical, OneHotCategorical, Bernoulli)) and not (
            isinstance(dist, Independent) and isinstance(dist.base_dist, Bernoulli)
        ):
            raise SCGError(
                f"{type(self).__name__}() supports Categorical, OneHotCategorical, "
                f"Bernoulli and Independent(Bernoulli) nodes, not "
                f"{type(dist).__name__}"
            )
        with torch.no_grad():
            out: torch.Tensor = dist.sample(sample_shape)  # type: ignore[no-untyped-call]
        return out

    def relaxations(self, node: StochasticNode) -> tuple[torch.Tensor, torch.Tensor]:
        """(z, z̃) for the node's sample: z unconditionally reparameterized, z̃ given b."""
        dist, b = node.dist, node.drawn_value()
        if isinstance(dist, Independent):  # a bit vector: z has the value's shape
            dist = dist.base_dist
        if isinstance(dist, Bernoulli):
            logits = dist.logits.expand(b.shape)
            with torch.no_grad():
                z0 = bernoulli_given(logits, b, uniform(b.shape, logits))
            z = logits + (z0 - logits).detach()
            return z, bernoulli_given(logits, b, uniform(b.shape, logits))
        idx = b.argmax(-1) if isinstance(dist, OneHotCategorical) else b.long()
        logp = finite_logits(dist.logits)  # type: ignore[attr-defined]  # (a −inf category: a NaN otherwise)
        logp = logp.expand(*idx.shape, logp.shape[-1])
        with torch.no_grad():
            z0 = categorical_given(logp, idx, uniform(logp.shape, logp))
        z = logp + (z0 - logp).detach()
        return z, categorical_given(logp, idx, uniform(logp.shape, logp))
