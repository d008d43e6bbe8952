"""An interpolated Kneser-Ney n-gram language model (the KN-smoothed 5-gram of Rush et al. 2015,
Table 2), and its perplexity on a token stream.

Kneser & Ney (1995), in the interpolated form of Chen & Goodman (1998). Every sentence is
padded with ``n - 1`` ``<s>`` and ends with ``</s>``. For the highest order and a context ``h``
(the previous ``n - 1`` words), with raw counts ``c``:

    P(w | h) = max(c(h w) - D, 0) / c(h ·) + D N1+(h ·) / c(h ·) · P(w | h')

where ``h'`` drops the oldest word of ``h``, ``c(h ·) = Σ_w c(h w)`` and ``N1+(h ·)`` is the
number of distinct words seen after ``h``. Lower orders use the same formula with *continuation
counts* ``c'(g) = N1+(· g)`` (the number of distinct words seen before the n-gram ``g``) in
place of ``c``, and the unigram level interpolates with the uniform distribution over the
vocabulary (every word but ``<s>``, ``</s>`` and ``<unk>`` included), so every word has
positive probability. A context never seen at an order passes all its mass to the next lower
order. ``D`` is one discount per order, ``n1 / (n1 + 2 n2)`` from the (continuation) counts of
counts at that order (Ney, Essen & Kneser 1994), unless given.

Words not in the training vocabulary (seen fewer than ``min_count`` times) are ``<unk>``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

__all__ = ["BOS", "EOS", "UNK", "KneserNeyLM"]

BOS, EOS, UNK = "<s>", "</s>", "<unk>"

Gram = tuple[str, ...]


class KneserNeyLM:
    """An interpolated Kneser-Ney language model of order ``order``.

    Args:
        sentences: the training sentences, each a sequence of tokens.
        order: n (5 in the paper).
        min_count: words seen fewer times become ``<unk>``.
        discount: a fixed ``D`` for every order (default: estimated per order).
    """

    def __init__(
        self,
        sentences: Iterable[Sequence[str]],
        order: int = 5,
        *,
        min_count: int = 1,
        discount: float | None = None,
    ) -> None:
        if order < 1:
            raise ValueError(f"order must be >= 1, got {order}")
        if discount is not None and not 0 < discount < 1:
            raise ValueError(f"discount must be in (0, 1), got {discount}")
        self.order = order
        data = [list(s) for s in sentences]
        freq = Counter(w for s in data for w in s)
        self.vocab = {w for w, c in freq.items() if c >= min_count} | {EOS, UNK}
        self.vocab.discard(BOS)
        # counts[k]: k-gram -> count (raw at the top order, continuation counts below)
        top: Counter[Gram] = Counter()
        for sentence in data:
            for gram in self._grams(self._pad(sentence)):
                top[gram] += 1
        self.counts: dict[int, Counter[Gram]] = {order: top}
        for k in range(order - 1, 0, -1):
            cont: Counter[Gram] = Counter()
            for gram in self.counts[k + 1]:
                cont[gram[1:]] += 1  # one more distinct word before gram[1:]
            self.counts[k] = cont
        # per order: context -> (total count, distinct continuations)
        self.context_stats: dict[int, dict[Gram, tuple[int, int]]] = {}
        self.discounts: dict[int, float] = {}
        for k, grams in self.counts.items():
            totals: dict[Gram, list[int]] = defaultdict(lambda: [0, 0])
            for gram, count in grams.items():
                entry = totals[gram[:-1]]
                entry[0] += count
                entry[1] += 1
            self.context_stats[k] = {h: (t, n) for h, (t, n) in totals.items()}
            self.discounts[k] = discount if discount is not None else self._estimate_discount(grams)

    @staticmethod
    def _estimate_discount(grams: Counter[Gram]) -> float:
        n1 = sum(1 for c in grams.values() if c == 1)
        n2 = sum(1 for c in grams.values() if c == 2)
        if n1 == 0 or n2 == 0:
            return 0.75
        return n1 / (n1 + 2 * n2)

    def _map(self, word: str) -> str:
        return word if word in self.vocab or word == BOS else UNK

    def _pad(self, sentence: Sequence[str]) -> list[str]:
        return [BOS] * (self.order - 1) + [self._map(w) for w in sentence] + [EOS]

    def _grams(self, padded: Sequence[str]) -> Iterable[Gram]:
        for i in range(self.order - 1, len(padded)):
            yield tuple(padded[i - self.order + 1 : i + 1])

    def prob(self, word: str, context: Sequence[str]) -> float:
        """``P(word | context)``; only the last ``order - 1`` words of ``context`` are used
        (``<s>``-padded when shorter)."""
        word = self._map(word)
        if word == BOS:
            raise ValueError("<s> is never predicted")
        history = [BOS] * (self.order - 1) + [self._map(w) for w in context]
        return self._prob(word, tuple(history[len(history) - self.order + 1 :]) if self.order > 1 else ())

    def _prob(self, word: str, context: Gram) -> float:
        # bottom-up: the uniform distribution, then every order up to len(context) + 1
        p = 1.0 / len(self.vocab)
        for k in range(1, len(context) + 2):
            h = context[len(context) - k + 1 :] if k > 1 else ()
            stats = self.context_stats[k].get(h)
            if stats is None:
                continue  # unseen context: all mass to the lower order
            total, types = stats
            d = self.discounts[k]
            count = self.counts[k].get((*h, word), 0)
            p = max(count - d, 0.0) / total + d * types / total * p
        return p

    def log_prob(self, sentence: Sequence[str]) -> tuple[float, int]:
        """The natural-log probability of a sentence (its words and ``</s>``), and the number of
        predictions (``len(sentence) + 1``)."""
        padded = self._pad(sentence)
        total = 0.0
        for gram in self._grams(padded):
            total += math.log(self._prob(gram[-1], gram[:-1]))
        return total, len(sentence) + 1

    def perplexity(self, sentences: Iterable[Sequence[str]]) -> float:
        """``exp(-Σ log p / N)`` over every word and ``</s>`` of ``sentences``."""
        total, count = 0.0, 0
        for sentence in sentences:
            lp, n = self.log_prob(sentence)
            total, count = total + lp, count + n
        if count == 0:
            raise ValueError("perplexity of an empty token stream")
        return math.exp(-total / count)
