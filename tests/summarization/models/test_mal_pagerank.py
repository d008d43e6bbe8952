"""MAL's unsupervised attention (Li et al., eq. 10-13): the closed-form PageRank against
networkx, its gradients against finite differences, batching with padding, and the guard."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import torch
from scg_summarize.models.mal.pagerank import (
    PageRankError,
    UnsupervisedAttention,
    closed_form_pagerank,
    pagerank_system,
    word_graph,
)


def _positive_graph(n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, n, generator=gen, dtype=torch.float64) + 0.05


def _networkx_pagerank(M: torch.Tensor, damping: float) -> list[float]:
    """networkx's PageRank of the graph with an edge i → j of weight M[j, i] (column i of M is
    where vertex i sends its mass), uniform teleport: the stationary distribution of
    ``networkx.google_matrix`` by power iteration (``networkx.pagerank`` itself needs SciPy,
    which is not a dependency)."""
    n = M.shape[0]
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    for i in range(n):
        for j in range(n):
            if M[j, i] != 0:
                graph.add_edge(i, j, weight=float(M[j, i]))
    google = np.asarray(nx.google_matrix(graph, alpha=damping, nodelist=list(range(n)), weight="weight"))
    rank = np.full(n, 1.0 / n)
    for _ in range(100_000):
        new = rank @ google
        if np.abs(new - rank).sum() < 1e-15:
            break
        rank = new
    return [float(v) for v in new]


@pytest.mark.parametrize("n, seed", [(2, 0), (5, 1), (9, 2)])
@pytest.mark.parametrize("damping", [0.5, 0.9])
def test_closed_form_equals_networkx(n: int, seed: int, damping: float) -> None:
    M = _positive_graph(n, seed)
    p = closed_form_pagerank(M.unsqueeze(0), torch.ones(1, n, dtype=torch.bool), damping)[0]
    assert p.sum().item() == pytest.approx(1.0, abs=1e-12)
    assert p.tolist() == pytest.approx(_networkx_pagerank(M, damping), abs=1e-9)


def test_sparse_weighted_graph_equals_networkx() -> None:
    # a ring with a chord and unequal weights (no dangling vertex: every column has mass)
    n = 6
    M = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        M[(i + 1) % n, i] = 1.0 + i
    M[3, 0] = 5.0
    p = closed_form_pagerank(M.unsqueeze(0), torch.ones(1, n, dtype=torch.bool), 0.9)[0]
    assert p.tolist() == pytest.approx(_networkx_pagerank(M, 0.9), abs=1e-9)


def test_padding_and_non_vertices_change_nothing() -> None:
    """A batch of documents of different lengths, with non-vertices inside, gives each document
    the PageRank of its own sub-graph, and p = 0 off the graph."""
    gen = torch.Generator().manual_seed(3)
    L, E = 7, 4
    x = torch.randn(2, L, E, generator=gen, dtype=torch.float64)
    W = torch.randn(E, E, generator=gen, dtype=torch.float64)
    nodes = torch.tensor([[1, 1, 0, 1, 1, 0, 0], [1, 0, 1, 1, 1, 1, 1]], dtype=torch.bool)
    M = word_graph(x, W, nodes, "softplus")
    p = closed_form_pagerank(M, nodes, 0.9)
    for b in range(2):
        idx = nodes[b].nonzero().flatten()
        sub = word_graph(x[b : b + 1, idx], W, torch.ones(1, len(idx), dtype=torch.bool), "softplus")
        alone = closed_form_pagerank(sub, torch.ones(1, len(idx), dtype=torch.bool), 0.9)[0]
        assert torch.allclose(p[b, idx], alone, atol=1e-12)
        assert bool((p[b][~nodes[b]] == 0).all())
        assert p[b].sum().item() == pytest.approx(1.0, abs=1e-12)


def test_document_without_vertices_gets_zero() -> None:
    M = torch.zeros(1, 3, 3, dtype=torch.float64)
    p = closed_form_pagerank(M, torch.zeros(1, 3, dtype=torch.bool), 0.9)
    assert p.tolist() == [[0.0, 0.0, 0.0]]


def test_gradcheck_through_the_solve() -> None:
    gen = torch.Generator().manual_seed(4)
    M = (torch.rand(2, 5, 5, generator=gen, dtype=torch.float64) + 0.1).requires_grad_()
    nodes = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 1, 0]], dtype=torch.bool)
    assert torch.autograd.gradcheck(lambda m: closed_form_pagerank(m, nodes, 0.9), (M,))


@pytest.mark.parametrize("guard", ["none", "softplus", "abs"])
def test_gradcheck_through_the_word_graph(guard: str) -> None:
    """Gradients w.r.t. the embeddings and W^p (eq. 10-11) match finite differences."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 4, 3, generator=gen, dtype=torch.float64).requires_grad_()
    # a positive-definite-ish W keeps the signed ('none') graph away from zero column sums here
    W = torch.eye(3, dtype=torch.float64) + 0.1 * torch.randn(3, 3, generator=gen, dtype=torch.float64)
    W.requires_grad_()
    x.data = x.data.abs() + 0.5
    nodes = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)

    def f(x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        return closed_form_pagerank(word_graph(x, W, nodes, guard), nodes, 0.9)

    assert torch.autograd.gradcheck(f, (x, W))


def test_literal_signed_weights_can_fail_and_raise_a_clear_error() -> None:
    # column 0 sums to zero: D_00 = 0, D⁻¹ is infinite
    M = torch.tensor([[[1.0, 0.5, 0.2], [-1.0, 0.3, 0.1], [0.0, 0.2, 0.4]]], dtype=torch.float64)
    nodes = torch.ones(1, 3, dtype=torch.bool)
    with pytest.raises(PageRankError, match=r"batch row\(s\) \[0\].*softplus"):
        closed_form_pagerank(M, nodes, 0.9)
    assert not torch.isfinite(closed_form_pagerank(M, nodes, 0.9, check=False)).all()


def test_guarded_system_is_well_conditioned() -> None:
    """With non-negative weights P is column-stochastic and cond₁(I − dP) ≤ (1 + d)/(1 − d)."""
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(8, 12, 6, generator=gen, dtype=torch.float64) * 3
    W = torch.randn(6, 6, generator=gen, dtype=torch.float64) * 3
    nodes = torch.ones(8, 12, dtype=torch.bool)
    for guard in ("softplus", "abs"):
        A, _ = pagerank_system(word_graph(x, W, nodes, guard), nodes, 0.9)
        cond = torch.linalg.cond(A, p=1)
        assert float(cond.max()) <= (1 + 0.9) / (1 - 0.9) + 1e-9


def test_literal_attention_is_near_uniform_and_the_temperature_sharpens_it() -> None:
    """Σ p = 1 with p ≥ 0, so softmax(p) is within a factor e of uniform (eq. 12 literally);
    m p / τ with a small τ is not."""
    torch.manual_seed(7)
    x = torch.randn(1, 30, 8)
    nodes = torch.ones(1, 30, dtype=torch.bool)
    literal = UnsupervisedAttention(8, guard="softplus")
    literal.weight.data = torch.randn(8, 8)
    with torch.no_grad():
        a = literal(x, nodes).weights[0]
    assert float(a.max() / a.min()) < math.e
    sharp = UnsupervisedAttention(8, guard="softplus", temperature=0.05, scale_by_nodes=True)
    sharp.weight.data = literal.weight.data.clone()
    with torch.no_grad():
        out, base = sharp(x, nodes), literal(x, nodes)
    assert torch.allclose(out.scores, base.scores)  # same PageRank, other softmax
    assert float(out.weights[0].max() / out.weights[0].min()) > 10 * math.e
    assert torch.allclose(out.context, out.weights.unsqueeze(1).bmm(x).squeeze(1))  # c^u (eq. 13)


def test_bad_guard_is_rejected() -> None:
    with pytest.raises(ValueError, match="guard"):
        UnsupervisedAttention(4, guard="clip")


def test_conditioning_measurement_flags_a_near_zero_column_sum() -> None:
    from scg_summarize.models.mal.conditioning import document_conditioning

    # x_iᵀ W x_j with W = I: vertex 1, (0, 1), is nearly orthogonal to the sum of all vertices,
    # (2, 1e-6), so the signed column sum D_11 is about 1e-6 of the typical weight
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, -1.0 + 1e-6]], dtype=torch.float64)
    W = torch.eye(2, dtype=torch.float64)
    signed = document_conditioning(x, W, 0.9, "none")
    assert signed["min_colsum"] < 1e-5
    assert signed["cond"] > 1e4
    guarded = document_conditioning(x, W, 0.9, "softplus")
    assert guarded["cond"] < 19.0 and guarded["negative_p"] == 0.0 and guarded["float32_error"] < 1e-5
