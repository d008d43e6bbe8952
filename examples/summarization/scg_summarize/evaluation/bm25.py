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
        self.lengths = [len(d) for d in documents]
        self.avgdl = sum(self.lengths) / len(documents) or 1.0
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)  # term -> (doc, tf)
        for i, doc in enumerate(documents):
            for term, tf in Counter(doc).items():
                self.postings[term].append((i, tf))

    def __len__(self) -> int:
        return len(self.lengths)

    def idf(self, term: str) -> float:
        """``ln(1 + (N - n_t + 0.5) / (n_t + 0.5))``."""
        n = len(self.postings.get(term, ()))
        return math.log(1.0 + (len(self) - n + 0.5) / (n + 0.5))

    def scores(self, query: Sequence[str]) -> dict[int, float]:
        """The BM25 score of every document sharing a word with ``query`` (others score 0)."""
        out: dict[int, float] = defaultdict(float)
        for term, qtf in Counter(query).items():
            postings = self.postings.get(term)
            if not postings:
                continue
            weight = qtf * self.idf(term)
            for doc, tf in postings:
                norm = self.k1 * (1.0 - self.b + self.b * self.lengths[doc] / self.avgdl)
                out[doc] += weight * tf * (self.k1 + 1.0) / (tf + norm)
        return dict(out)

    def best(self, query: Sequence[str]) -> int:
        """The highest-scoring document (the first one on ties; document 0 if nothing matches)."""
        scores = self.scores(query)
        if not scores:
            return 0
        return min(scores, key=lambda doc: (-scores[doc], doc))


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
