"""The IR baseline of Rush et al. (2015) and their "Ext. %" statistic.

IR (Section 7.2) indexes the training set and answers every input with the title of the
training article of highest BM25 match (Okapi BM25, Manning, Raghavan & Schütze 2008, eq. 11.32):

    score(q, d) = Σ_{t in q} qtf(t) · idf(t) · tf(t, d) (k1 + 1) / (tf(t, d) + k1 (1 - b + b |d| / avgdl))
    idf(t)      = ln(1 + (N - n_t + 0.5) / (n_t + 0.5))

with ``N`` documents, ``n_t`` of them containing ``t``, ``|d|`` the length of ``d`` in tokens,
``qtf(t)`` the count of ``t`` in the query (repeated query words count again), and the usual
``k1 = 1.2``, ``b = 0.75``. The ``1 +`` inside the logarithm (as in Lucene) keeps idf positive
for words in more than half the documents. Ties go to the earlier training document.

"Ext. %" (Table 1) is the percentage of the summary tokens, over the whole test set, that also
appear in their input.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["BM25Index", "IRBaseline", "extractive_percent"]


class BM25Index:
    """An inverted index of tokenized documents scored with Okapi BM25.

    Args:
        documents: the documents, each a token list.
        k1: term-frequency saturation.
        b: length normalization.
    """

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75) -> None:
        if not documents:
            raise ValueError("BM25Index needs at least one document")
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.k1, self.b = k1, b
        self.lengths = np.array([len(d) for d in documents], dtype=np.float64)
        self.avgdl = float(self.lengths.mean()) or 1.0
        postings: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))  # term -> (docs, tfs)
        for i, doc in enumerate(documents):
            for term, tf in Counter(doc).items():
                entry = postings[term]
                entry[0].append(i)
                entry[1].append(tf)
        # per term: its documents and the tf part of the score, tf (k1 + 1) / (tf + k1 (1 - b + b |d| / avgdl))
        self.postings: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = {}
        for term, (docs, tfs) in postings.items():
            d, freq = np.array(docs, dtype=np.int64), np.array(tfs, dtype=np.float64)
            norm = k1 * (1.0 - b + b * self.lengths[d] / self.avgdl)
            self.postings[term] = (d, freq * (k1 + 1.0) / (freq + norm))

    def __len__(self) -> int:
        return len(self.lengths)

    def idf(self, term: str) -> float:
        """``ln(1 + (N - n_t + 0.5) / (n_t + 0.5))``."""
        entry = self.postings.get(term)
        n = len(entry[0]) if entry is not None else 0
        return math.log(1.0 + (len(self) - n + 0.5) / (n + 0.5))

    def score_all(self, query: Sequence[str]) -> npt.NDArray[np.float64]:
        """The BM25 score of every document ``(N,)`` (0 for documents sharing no word)."""
        out = np.zeros(len(self))
        for term, qtf in Counter(query).items():
            entry = self.postings.get(term)
            if entry is not None:
                out[entry[0]] += qtf * self.idf(term) * entry[1]
        return out

    def scores(self, query: Sequence[str]) -> dict[int, float]:
        """The BM25 score of every document sharing a word with ``query``."""
        docs = sorted({int(d) for term in set(query) if term in self.postings for d in self.postings[term][0]})
        all_scores = self.score_all(query)
        return {d: float(all_scores[d]) for d in docs}

    def best(self, query: Sequence[str]) -> int:
        """The highest-scoring document (the first one on ties; document 0 if nothing matches)."""
        return int(np.argmax(self.score_all(query)))  # argmax returns the first maximum


class IRBaseline:
    """Answer an input with the title of its BM25-nearest training article.

    Args:
        articles: the training inputs, tokenized.
        titles: their titles (any strings), aligned with ``articles``.
    """

    def __init__(self, articles: Sequence[Sequence[str]], titles: Sequence[str], k1: float = 1.2, b: float = 0.75):
        if len(articles) != len(titles):
            raise ValueError(f"{len(articles)} articles but {len(titles)} titles")
        self.index = BM25Index(articles, k1=k1, b=b)
        self.titles = list(titles)

    def __call__(self, article: Sequence[str]) -> str:
        return self.titles[self.index.best(article)]


def extractive_percent(summaries: Sequence[Sequence[str]], inputs: Sequence[Sequence[str]]) -> float:
    """100 × (summary tokens that occur in their input) / (all summary tokens), over a test set
    (0 when there is no summary token)."""
    if len(summaries) != len(inputs):
        raise ValueError(f"{len(summaries)} summaries but {len(inputs)} inputs")
    total = hits = 0
    for summary, source in zip(summaries, inputs):
        vocab = set(source)
        total += len(summary)
        hits += sum(1 for w in summary if w in vocab)
    return 100.0 * hits / total if total else 0.0
