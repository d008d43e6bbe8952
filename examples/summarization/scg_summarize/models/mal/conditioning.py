"""How often the literal closed-form PageRank (eq. 10-11) is singular or ill-conditioned on
real text, with each edge-weight guard.

For every document of a prepared split the word graph's vertices are its content words
(:mod:`scg_summarize.data.saliency_labels`); the embeddings and W^p are those of a MAL model,
freshly initialized (``MALConfig.init_range``) or trained (``--run``). Per document and guard
the system A = I − d M D⁻¹ is built in float64 and we record:

* ``cond``: the 2-norm condition number of A (on the document's own m × m system);
* ``min_colsum``: min_i |D_ii| / mean_ij |M_ij|, how close a column sum is to zero;
* ``negative_p``: p has negative entries (it is then no distribution);
* ``float32_error``: ‖p₃₂ − p₆₄‖∞ / ‖p₆₄‖∞ of the float32 solve the model uses (inf when the
  float32 solve fails or is not finite).

Scaling M by a constant leaves P = M D⁻¹ unchanged, so only the *signs and directions* of the
embeddings matter, not their scale. ::

    scg-summarize mal-conditioning --data DIR --split valid --docs 500 [--run RUN_DIR] [--out result.json]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ...data import SummarizationDataset
from ...data.chunking import pack_words
from .config import PAGERANK_GUARDS
from .model import MALSummarizer
from .pagerank import pagerank_system, word_graph

__all__ = ["THRESHOLDS", "document_conditioning", "measure_conditioning"]

#: Condition numbers reported as fractions of documents above each.
THRESHOLDS: tuple[float, ...] = (1e2, 1e4, 1e6)


def document_conditioning(x: torch.Tensor, weight: torch.Tensor, damping: float, guard: str) -> dict[str, float]:
    """The numbers of the module docstring for one document's vertex embeddings ``x`` ``(m, k_e)``."""
    x64, w64 = x.double().unsqueeze(0), weight.double()
    nodes = torch.ones(1, x.shape[0], dtype=torch.bool)
    M = word_graph(x64, w64, nodes, guard)  # (1, m, m)
    A, q = pagerank_system(M, nodes, damping)
    colsum = M.sum(1).abs().min() / M.abs().mean().clamp(min=1e-300)
    cond = float(torch.linalg.cond(A[0]))
    p64, info64 = torch.linalg.solve_ex(A, q.unsqueeze(-1))
    M32 = word_graph(x.float().unsqueeze(0), weight.float(), nodes, guard)
    A32, q32 = pagerank_system(M32, nodes, damping)
    p32, info32 = torch.linalg.solve_ex(A32, q32.unsqueeze(-1))
    good = int(info32) == 0 and bool(torch.isfinite(p32).all()) and int(info64) == 0
    scale = float(p64.abs().max()) if good else 1.0
    error = float((p32.double() - p64).abs().max()) / max(scale, 1e-300) if good else math.inf
    if not math.isfinite(cond):
        cond = math.inf
    return {
        "cond": cond,
        "min_colsum": float(colsum),
        "negative_p": float(bool((p64 < 0).any())),
        "float32_error": error,
    }


def measure_conditioning(
    model: MALSummarizer, dataset: SummarizationDataset, docs: int, guards: Sequence[str] = PAGERANK_GUARDS
) -> dict[str, Any]:
    """Fractions of the first ``docs`` documents (with ≥ 2 vertices) per guard (see the module docstring)."""
    emb = model.src_embedding.weight.detach()
    weight = (
        model.unsupervised.weight.detach()
        if model.unsupervised is not None
        else torch.empty(emb.shape[1], emb.shape[1]).uniform_(-model.config.init_range, model.config.init_range)
    )
    rows: dict[str, list[dict[str, float]]] = {g: [] for g in guards}
    sizes: list[int] = []
    for index in range(min(docs, len(dataset))):
        item = dataset[index]
        src, mask, _ = pack_words(item.src.unsqueeze(0), item.src_mask.unsqueeze(0), model.config.max_src_len)
        nodes = model.nodes(src, mask)[0]
        if int(nodes.sum()) < 2:
            continue
        x = emb[src[0][nodes]]  # (m, k_e)
        sizes.append(int(nodes.sum()))
        for guard in guards:
            rows[guard].append(document_conditioning(x, weight, model.config.damping, guard))
    result: dict[str, Any] = {
        "documents": len(sizes),
        "vertices_median": sorted(sizes)[len(sizes) // 2] if sizes else 0,
        "damping": model.config.damping,
        "guards": {},
    }
    for guard, values in rows.items():
        n = max(len(values), 1)
        conds = sorted(v["cond"] for v in values)
        summary: dict[str, Any] = {f"cond>{t:g}": sum(v["cond"] > t for v in values) / n for t in THRESHOLDS}
        summary["cond_median"] = conds[len(conds) // 2] if conds else None
        summary["cond_max"] = conds[-1] if conds else None
        summary["negative_p"] = sum(v["negative_p"] for v in values) / n
        summary["float32_error>1e-3"] = sum(v["float32_error"] > 1e-3 for v in values) / n
        summary["float32_failed"] = sum(not math.isfinite(v["float32_error"]) for v in values) / n
        colsums = sorted(v["min_colsum"] for v in values)
        summary["min_colsum_median"] = colsums[len(colsums) // 2] if colsums else None
        result["guards"][guard] = summary
    return result
