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

In the surrogate the node contributes (ω the node's sample weights, 1 without sample dims)

    (log p − ⊥log p) · ω (⊥Ĉ_v − b_v − c_φ(z̃))  +  ω [c_φ(z) − c_φ(⊥z)] − ω [c_φ(z̃) − c_φ(⊥z̃)],

whose value is 0 and whose gradient in θ is ĝ. Its gradient in φ is zero too (each bracket is a
difference of two equal values), so ``surrogate.backward()`` does not train φ. The variance of ĝ
is trained in a separate step: since E[ĝ] does not depend on φ, ∇_φ Var(ĝ) = ∇_φ E[‖ĝ‖²], and
ĝ keeps its dependence on φ when it is computed with ``create_graph=True`` (c_φ(z̃) enters the
score term undetached). :meth:`RELAX.backward` does both steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, ClassVar

import torch
from torch.distributions import Bernoulli, Categorical, Distribution, OneHotCategorical

from scg.errors import SCGError
from scg.estimators.base import Estimator

if TYPE_CHECKING:
    from scg.baselines.base import Baseline
    from scg.graph.nodes import StochasticNode

__all__ = ["RELAX"]

_EPS = 1e-6


def _uniform(shape: torch.Size, like: torch.Tensor) -> torch.Tensor:
    return torch.rand(shape, dtype=like.dtype, device=like.device).clamp(_EPS, 1.0 - _EPS)


def _categorical_given(logp: torch.Tensor, idx: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """z ~ p(z | argmax z = idx) for z = logp + Gumbel, reparameterized in ``logp``."""
    top = -torch.log(-torch.log(v.gather(-1, idx.unsqueeze(-1))))  # Gumbel(0): logsumexp = 0
    others = -torch.log(-torch.log(v) * torch.exp(-logp) + torch.exp(-top))
    return others.scatter(-1, idx.unsqueeze(-1), top)


def _bernoulli_given(logits: torch.Tensor, b: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """z = logit p + logit u with u conditioned on [z > 0] = b, reparameterized in ``logits``."""
    p = torch.sigmoid(logits)
    u = torch.where(b > 0.5, (1.0 - p) + v * p, v * (1.0 - p)).clamp(_EPS, 1.0 - _EPS)
    return logits + torch.log(u) - torch.log1p(-u)


class RELAX(Estimator):
    """RELAX / REBAR for Categorical, OneHotCategorical and Bernoulli nodes (unbiased).

    Args:
        control: c_φ, maps the relaxed variable z (``(*sample, *batch, K)`` Gumbel-perturbed
            normalized logits for categorical nodes, ``(*sample, *batch)`` logistic-perturbed
            logits for Bernoulli nodes) to a tensor of the node's log-probability shape
            ``(*sample, *batch)``. Usually a ``torch.nn.Module`` the user holds. For REBAR pass
            ``lambda z: eta * f(torch.softmax(z / temp, -1))``.
        parameters: φ, the tensors :meth:`backward` trains to reduce the variance; default: the
            module's ``parameters()``.
        baseline: an ordinary baseline subtracted as well (optional).
    """

    unbiased: ClassVar[bool] = True
    needs_rsample: ClassVar[bool] = False
    score: ClassVar[bool] = True
    higher_order: ClassVar[bool] = False
    multi_sample: ClassVar[bool] = True

    def __init__(self, control: Callable[[torch.Tensor], torch.Tensor], *,
                 parameters: Iterable[torch.Tensor] | None = None,
                 baseline: Baseline | None = None) -> None:
        if not callable(control):
            raise SCGError(f"RELAX(control): expected a callable (e.g. a torch.nn.Module), got "
                           f"{type(control).__name__}")
        self.control = control
        if parameters is None:
            parameters = control.parameters() if isinstance(control, torch.nn.Module) else ()
        self.parameters = [p for p in parameters if p.requires_grad]
        self.baseline = baseline

    def draw(self, dist: Distribution, sample_shape: torch.Size) -> torch.Tensor:
        if not isinstance(dist, (Categorical, OneHotCategorical, Bernoulli)):
            raise SCGError(f"RELAX() supports Categorical, OneHotCategorical and Bernoulli nodes, "
                           f"not {type(dist).__name__}")
        with torch.no_grad():
            out: torch.Tensor = dist.sample(sample_shape)  # type: ignore[no-untyped-call]
        return out

    def relaxed(self, node: StochasticNode) -> tuple[torch.Tensor, torch.Tensor]:
        """(z, z̃) for the node's sample: z unconditionally reparameterized, z̃ given b."""
        dist, b = node.dist, node.value.detach()
        if isinstance(dist, Bernoulli):
            logits = dist.logits.expand(b.shape)
            with torch.no_grad():
                z0 = _bernoulli_given(logits, b, _uniform(b.shape, logits))
            z = logits + (z0 - logits).detach()
            return z, _bernoulli_given(logits, b, _uniform(b.shape, logits))
        idx = b.argmax(-1) if isinstance(dist, OneHotCategorical) else b.long()
        logp = dist.logits  # type: ignore[attr-defined]
        logp = logp.expand(*idx.shape, logp.shape[-1])
        with torch.no_grad():
            z0 = _categorical_given(logp, idx, _uniform(logp.shape, logp))
        z = logp + (z0 - logp).detach()
        return z, _categorical_given(logp, idx, _uniform(logp.shape, logp))

    def _c(self, z: torch.Tensor, node: StochasticNode) -> torch.Tensor:
        out = self.control(z)
        assert node.log_prob is not None
        want = node.log_prob.shape
        if not isinstance(out, torch.Tensor) or out.shape != want:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise SCGError(f"RELAX control of {node.describe()}: returned {got}, expected the "
                           f"node's log-probability shape {tuple(want)}")
        return out

    def control_variate(self, node: StochasticNode) -> tuple[torch.Tensor, torch.Tensor]:
        z, zt = self.relaxed(node)
        c_zt = self._c(zt, node)
        path = (self._c(z, node) - self._c(z.detach(), node)) - (c_zt - self._c(zt.detach(), node))
        return c_zt, path

    @staticmethod
    def variance_loss(grads: Sequence[torch.Tensor | None]) -> torch.Tensor:
        """‖ĝ‖² = Σ ĝ²: its φ-gradient is ∇_φ Var(ĝ) when ĝ was built with ``create_graph``."""
        terms = [(g**2).sum() for g in grads if g is not None]
        if not terms:
            raise SCGError("RELAX.variance_loss: no gradients")
        return torch.stack(terms).sum()

    def backward(self, loss: torch.Tensor, params: Sequence[torch.Tensor]) -> torch.Tensor:
        """Accumulate ĝ into ``params``' ``.grad`` and ∇_φ ‖ĝ‖² into φ's; return ‖ĝ‖².

        ``params`` are the model parameters θ (not φ). One call replaces ``loss.backward()``.
        """
        params = list(params)
        grads = torch.autograd.grad(loss, params, create_graph=True, allow_unused=True)
        var = self.variance_loss(grads)
        if self.parameters and var.requires_grad:
            gphi = torch.autograd.grad(var, self.parameters, allow_unused=True, retain_graph=True)
            _accumulate(self.parameters, gphi)
        _accumulate(params, grads)
        return var.detach()

    def __repr__(self) -> str:
        return f"RELAX(control={self.control!r})"


def _accumulate(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor | None]) -> None:
    for p, g in zip(params, grads, strict=True):
        if g is None:
            continue
        g = g.detach()
        p.grad = g.clone() if p.grad is None else p.grad + g
