"""Extractive baselines: FIRST, LEAD-3, PREFIX (75 bytes) and TextRank.

Every baseline maps a document's sentences (original text, as stored by the data pipeline)
to the sentences of its summary:

* ``first``: the first sentence;
* ``lead3``: the first ``k`` sentences (3 by default);
* ``prefix``: the first 75 bytes of the document (sentences joined by spaces), the
  DUC-style byte-limited baseline;
* ``textrank``: TextRank sentence extraction (Mihalcea & Tarau, 2004): sentences are the
  nodes of a graph whose edge weights are the overlap similarity
  ``|words(a) & words(b)| / (log |a| + log |b|)``; the ``k`` sentences with the highest
  weighted PageRank are returned in document order. PageRank is the stationary distribution
  of networkx's Google matrix (:func:`networkx.google_matrix`, damping 0.85) found by power
  iteration (``networkx.pagerank`` itself needs SciPy, which is not a dependency). Ties,
  including a graph without edges, go to the earlier sentence, so TextRank falls back to LEAD.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..choices import BASELINES
from .rouge import truncate_bytes

if TYPE_CHECKING:  # imported by the TextRank functions: a training process does not pay its ~0.3 s of CPU
    import networkx as nx

__all__ = [
    "BASELINES",
    "ExtractiveBaseline",
    "first_sentence",
    "get_baseline",
    "lead",
    "pagerank",
    "prefix_bytes",
    "sentence_graph",
    "textrank",
]

_WORD_RE = re.compile(r"[^\W_]+")


def first_sentence(sentences: Sequence[str]) -> list[str]:
    """The first sentence (empty for an empty document)."""
    return list(sentences[:1])


def lead(sentences: Sequence[str], k: int = 3) -> list[str]:
    """The first ``k`` sentences."""
    if k < 1:
        raise ValueError(f"k must be positive, got {k}")
    return list(sentences[:k])


def prefix_bytes(sentences: Sequence[str], limit: int = 75) -> list[str]:
    """The first ``limit`` bytes of the document (one "sentence"; empty for an empty document)."""
    if limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    text = truncate_bytes(" ".join(s.strip() for s in sentences if s.strip()), limit).strip()
    return [text] if text else []


def _words(sentence: str) -> set[str]:
    return set(_WORD_RE.findall(sentence.lower()))


def sentence_graph(sentences: Sequence[str]) -> nx.Graph:
    """The TextRank similarity graph: node ``i`` per sentence, weighted overlap edges."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(len(sentences)))
    bags = [_words(s) for s in sentences]
    sizes = [len(_WORD_RE.findall(s.lower())) for s in sentences]
    for i in range(len(sentences)):
        for j in range(i + 1, len(sentences)):
            overlap = len(bags[i] & bags[j])
            denominator = math.log(sizes[i]) + math.log(sizes[j]) if sizes[i] and sizes[j] else 0.0
            if overlap and denominator > 0:
                graph.add_edge(i, j, weight=overlap / denominator)
    return graph


def pagerank(graph: nx.Graph, damping: float = 0.85, tol: float = 1e-12, max_iter: int = 1000) -> dict[int, float]:
    """Weighted PageRank of ``graph`` (node -> score, summing to 1) by power iteration on
    :func:`networkx.google_matrix` (dangling nodes jump uniformly, as in ``networkx.pagerank``)."""
    import networkx as nx

    nodes = list(graph.nodes)
    if not nodes:
        return {}
    matrix = np.asarray(nx.google_matrix(graph, alpha=damping, nodelist=nodes, weight="weight"))
    rank = np.full(len(nodes), 1.0 / len(nodes))
    for _ in range(max_iter):
        new = rank @ matrix
        new /= new.sum()
        if np.abs(new - rank).sum() < tol:
            rank = new
            break
        rank = new
    return {node: float(value) for node, value in zip(nodes, rank)}


def textrank(sentences: Sequence[str], k: int = 3, damping: float = 0.85) -> list[str]:
    """The ``k`` most central sentences by weighted PageRank, in document order."""
    if k < 1:
        raise ValueError(f"k must be positive, got {k}")
    if len(sentences) <= k:
        return list(sentences)
    graph = sentence_graph(sentences)
    ranks = pagerank(graph, damping) if graph.number_of_edges() else {}
    order = sorted(range(len(sentences)), key=lambda i: (-round(ranks.get(i, 0.0), 12), i))
    return [sentences[i] for i in sorted(order[:k])]


@dataclass(frozen=True)
class ExtractiveBaseline:
    """A named extractive baseline system with its parameter (``k`` sentences or a byte limit);
    not to be confused with `scg.baselines.Baseline`, the variance-reduction term."""

    method: str
    param: int

    @property
    def name(self) -> str:
        """The row label in result tables (``FIRST``, ``LEAD-3``, ``PREFIX-75``, ``TEXTRANK-3``)."""
        if self.method == "first":
            return "FIRST"
        if self.method == "lead3":
            return f"LEAD-{self.param}"
        return f"{self.method.upper()}-{self.param}"

    def __call__(self, sentences: Sequence[str]) -> list[str]:
        fn: Callable[[Sequence[str], int], list[str]] = _FUNCTIONS[self.method]
        return fn(sentences, self.param)


_FUNCTIONS: dict[str, Callable[[Sequence[str], int], list[str]]] = {
    "first": lambda s, _: first_sentence(s),
    "lead3": lead,
    "prefix": prefix_bytes,
    "textrank": textrank,
}
_DEFAULT_PARAM = {"first": 1, "lead3": 3, "prefix": 75, "textrank": 3}


def get_baseline(method: str, param: int | None = None) -> ExtractiveBaseline:
    """The baseline ``method`` (one of :data:`BASELINES`) with its default or given parameter."""
    if method not in _FUNCTIONS:
        raise ValueError(f"unknown baseline {method!r} (choose from {', '.join(BASELINES)})")
    value = _DEFAULT_PARAM[method] if param is None else param
    if value < 1:
        raise ValueError(f"the parameter of {method} must be positive, got {value}")
    return ExtractiveBaseline(method, value)
