"""Unsupervised attention learning (Li et al., Section 2.3, eq. 10-13): a differentiable,
batched, closed-form PageRank over a learned word graph.

The vertices are the source's non-stop words (the ``nodes`` mask), the edge weights are
bilinear in the word embeddings, and the PageRank vector is a linear solve::

    M_ij = x_iᵀ W^p x_j                                  (10)
    p = (1 − d) (I − d M D⁻¹)⁻¹ q,   D_ii = Σ_j M_ji      (11)
    a^u_i = exp(p_i) / Σ_j exp(p_j)                       (12)
    c^u = Σ_j a^u_j x_j                                   (13)

with d = 0.9 and q uniform over the m vertices (q_i = 1/m). P = M D⁻¹ divides every column by
its sum, so it is column-stochastic whenever M ≥ 0, and then p is exactly the PageRank of the
directed graph with an edge i → j of weight M_ji (teleporting uniformly, no dangling vertex):
``p = d P p + (1 − d) q``, Σ p = 1.

**Batching.** A document of length L with m ≤ L vertices is padded to an L × L system whose
rows and columns outside the vertices are those of the identity (M = 0 there, q = 0), so one
batched ``torch.linalg.solve`` handles every document and the non-vertices get p = 0. The
solve is differentiable (torch's backward of a linear solve), so W^p and the embeddings learn
through eq. (11).

**Signed weights (the guard).** Taken literally, eq. (10) gives edge weights of either sign.
Then a column sum D_ii can be close to 0 (D⁻¹ explodes) and I − d M D⁻¹ can be singular or
badly conditioned; ``python -m scg_summarize.models.mal.conditioning`` measures how often on
real text (``docs/mal.md`` has the figures). ``guard`` chooses the edge weights:

* ``none``: the paper, M_ij = x_iᵀ W^p x_j. A system that the solver reports singular, or a
  non-finite p, raises :class:`PageRankError` naming the documents (never a silent NaN);
* ``softplus`` (the default of :class:`~.config.MALConfig`): M_ij = softplus(x_iᵀ W^p x_j) > 0.
  P is column-stochastic, so I − d P is strictly column diagonally dominant and invertible,
  with ‖(I − d P)⁻¹‖₁ ≤ 1/(1 − d) = 10: every system is solvable;
* ``abs``: M_ij = |x_iᵀ W^p x_j| (non-negative, same guarantee where no column is all zero).

**Near-uniform a^u.** Σ p = 1, so p_i ≈ 1/m and eq. (12) is a softmax of values that differ
by less than 1: a^u is within a factor e of uniform. ``temperature`` and ``scale_by_nodes``
(a^u = softmax(m p / τ_u)) are the configurable fix (see :class:`~.config.MALConfig`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import PAGERANK_GUARDS
from .encoder import masked_softmax

__all__ = [
    "PageRankError",
    "UnsupervisedAttention",
    "UnsupervisedOut",
    "closed_form_pagerank",
    "pagerank_system",
    "word_graph",
]


class PageRankError(FloatingPointError):
    """The closed-form PageRank could not be solved for some documents (signed edge weights)."""


def word_graph(x: torch.Tensor, weight: torch.Tensor, nodes: torch.Tensor, guard: str = "none") -> torch.Tensor:
    """The adjacency ``M`` ``(B, L, L)`` of eq. (10) over the vertices ``nodes`` ``(B, L)``
    (zero in every row and column that is not a vertex).

    Args:
        x: word embeddings ``(B, L, k_e)``.
        weight: W^p ``(k_e, k_e)``.
        nodes: bool, True at the graph's vertices (non-stop source words).
        guard: ``none`` (eq. 10), ``softplus`` or ``abs`` (see the module docstring).
    """
    if guard not in PAGERANK_GUARDS:
        raise ValueError(f"guard must be one of {PAGERANK_GUARDS}, got {guard!r}")
    scores = torch.einsum("bie,ef,bjf->bij", x, weight, x)  # x_iᵀ W^p x_j, (B, L, L)
    if guard == "softplus":
        scores = F.softplus(scores)
    elif guard == "abs":
        scores = scores.abs()
    pair = (nodes.unsqueeze(2) & nodes.unsqueeze(1)).to(scores.dtype)  # (B, L, L)
    return scores * pair


def pagerank_system(M: torch.Tensor, nodes: torch.Tensor, damping: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The system of eq. (11): ``A = I − d M D⁻¹`` ``(B, L, L)`` and ``q`` ``(B, L)``.

    Non-vertices get identity rows and columns and q = 0; a document without vertices gets
    A = I, q = 0 (so p = 0).
    """
    real = nodes.to(M.dtype)  # (B, L)
    colsum = M.sum(dim=1)  # D_ii = Σ_j M_ji, (B, L)
    D = torch.where(nodes, colsum, torch.ones_like(colsum))  # 1 outside the graph (M is 0 there)
    P = M / D.unsqueeze(1)  # column i divided by D_ii, (B, L, L)
    eye = torch.eye(M.shape[-1], dtype=M.dtype, device=M.device).expand_as(M)
    A = eye - damping * P
    m = real.sum(-1, keepdim=True)  # (B, 1)
    q = real / m.clamp(min=1.0)
    return A, q


def closed_form_pagerank(
    M: torch.Tensor, nodes: torch.Tensor, damping: float = 0.9, check: bool = True, guard: str = "none"
) -> torch.Tensor:
    """p = (1 − d)(I − d M D⁻¹)⁻¹ q (eq. 11), ``(B, L)``, 0 outside ``nodes``.

    Args:
        M: the adjacency ``(B, L, L)`` from :func:`word_graph`.
        nodes: bool ``(B, L)``, the vertices.
        damping: d.
        check: raise :class:`PageRankError` when a document's system is singular or its p is
            not finite (with signed weights, eq. 10 literally); False returns whatever the
            solver gives (for measurements).
        guard: the guard ``M`` was built with (named by the error).
    """
    A, q = pagerank_system(M, nodes, damping)
    # (solved in float32 at least: the CPU's LU has no bf16 kernel, as M has under bf16 autocast;
    # in float32 and float64 the casts are no-ops)
    work = torch.promote_types(M.dtype, torch.float32)
    solution, info = torch.linalg.solve_ex(A.to(work), q.unsqueeze(-1).to(work))  # (B, L, 1), (B,)
    p: torch.Tensor = ((1.0 - damping) * solution.squeeze(-1) * nodes.to(work)).to(M.dtype)
    if check:
        bad = (info != 0) | ~torch.isfinite(p).all(dim=-1)
        if bool(bad.any()):
            rows = bad.nonzero().flatten().tolist()
            where = (
                f"closed-form PageRank (eq. 11): the system I − d M D⁻¹ is singular or gives a non-finite p "
                f"for batch row(s) {rows}"
            )
            if guard == "none":
                raise PageRankError(
                    f"{where} (signed edge weights, guard 'none'); use model.pagerank_guard = 'softplus' or 'abs'"
                )
            raise PageRankError(
                f"{where} although guard {guard!r} keeps the edge weights positive: the weights are "
                f"not finite, i.e. the model has diverged (lower train.lr, or continue from an "
                f"earlier checkpoint)"
            )
    return p


@dataclass
class UnsupervisedOut:
    """The unsupervised attention of one batch.

    Attributes:
        scores: p ``(B, L)`` (eq. 11), 0 outside the graph.
        weights: a^u ``(B, L)`` (eq. 12, with the temperature), 0 outside the graph.
        context: c^u ``(B, k_e)`` (eq. 13).
    """

    scores: torch.Tensor
    weights: torch.Tensor
    context: torch.Tensor


class UnsupervisedAttention(nn.Module):
    """W^p and eq. (10-13).

    Args:
        emb_dim: k_e.
        damping: d (the paper: 0.9).
        guard: the edge-weight guard (module docstring).
        temperature: τ_u in a^u = softmax(p' / τ_u).
        scale_by_nodes: p' = m p (uniform PageRank → 1) instead of p' = p.
    """

    def __init__(
        self,
        emb_dim: int,
        damping: float = 0.9,
        guard: str = "softplus",
        temperature: float = 1.0,
        scale_by_nodes: bool = False,
    ) -> None:
        super().__init__()
        if guard not in PAGERANK_GUARDS:
            raise ValueError(f"guard must be one of {PAGERANK_GUARDS}, got {guard!r}")
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature!r}")
        self.weight = nn.Parameter(torch.empty(emb_dim, emb_dim))  # W^p
        nn.init.uniform_(self.weight, -0.1, 0.1)
        self.damping = float(damping)
        self.guard = guard
        self.temperature = float(temperature)
        self.scale_by_nodes = scale_by_nodes

    def forward(self, x: torch.Tensor, nodes: torch.Tensor) -> UnsupervisedOut:
        """From embeddings ``x`` ``(B, L, k_e)`` and the vertex mask ``nodes`` ``(B, L)``."""
        M = word_graph(x, self.weight, nodes, self.guard)  # (B, L, L)
        p = closed_form_pagerank(M, nodes, self.damping, guard=self.guard)  # (B, L)
        logits = p * nodes.sum(-1, keepdim=True).to(p.dtype) if self.scale_by_nodes else p
        weights = masked_softmax(logits / self.temperature, nodes)  # a^u (eq. 12)
        context = torch.bmm(weights.unsqueeze(1), x).squeeze(1)  # c^u (eq. 13), (B, k_e)
        return UnsupervisedOut(p, weights, context)
