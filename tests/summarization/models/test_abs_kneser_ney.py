"""The interpolated Kneser-Ney language model against hand-computed probabilities."""

from __future__ import annotations

import itertools
import math

import pytest
from scg_summarize.models.abs.kneser_ney import KneserNeyLM

CORPUS = [["a", "b"], ["a", "c"], ["b", "c"]]


def test_bigram_probabilities_by_hand() -> None:
    lm = KneserNeyLM(CORPUS, order=2, discount=0.75)

    # padded: <s> a b </s> | <s> a c </s> | <s> b c </s>
    # bigram types (7): <s>a x2, ab, b</s>, ac, c</s> x2, <s>b, bc
    # continuation counts N1+(. w): a 1 ({<s>}), b 2 ({a, <s>}), c 2 ({a, b}), </s> 2 ({b, c}); total 7
    # vocabulary a, b, c, </s>, <unk>: uniform 1/5; 4 continued types
    def p1(n: int) -> float:
        return max(n - 0.75, 0) / 7 + 0.75 * 4 / 7 / 5

    # P(b | a): c(a b) = 1, c(a .) = 2, N1+(a .) = 2
    assert lm.prob("b", ["a"]) == pytest.approx((1 - 0.75) / 2 + 0.75 * 2 / 2 * p1(2))
    # P(a | <s>): c(<s> a) = 2, c(<s> .) = 3, N1+(<s> .) = 2
    assert lm.prob("a", []) == pytest.approx((2 - 0.75) / 3 + 0.75 * 2 / 3 * p1(1))
    # P(</s> | a): unseen bigram, only the interpolation
    assert lm.prob("</s>", ["a"]) == pytest.approx(0.75 * 2 / 2 * p1(2))
    # an unseen word is <unk>: continuation count 0
    assert lm.prob("zebra", ["c"]) == pytest.approx(0.75 * 1 / 2 * p1(0))
    # a context never seen (<unk>) falls back to the unigram level
    assert lm.prob("c", ["zebra"]) == pytest.approx(p1(2))


def test_trigram_uses_continuation_counts_below_the_top() -> None:
    lm = KneserNeyLM(CORPUS, order=3, discount=0.5)
    # trigram types: <s><s>a x2, <s>ab, ab</s>, <s>ac, ac</s>, <s><s>b, <s>bc, bc</s>
    # bigram continuation counts N1+(. g): (<s>,a) 1, (a,b) 1, (b,</s>) 1, (a,c) 1, (c,</s>) 2 ({a, b}),
    #   (<s>,b) 1, (b,c) 1
    # unigram continuation counts from the bigram types: a 1, b 2, c 2, </s> 2; total 7
    p1_c = (2 - 0.5) / 7 + 0.5 * 4 / 7 / 5
    # bigram level, context a: types (a,b), (a,c), each continuation count 1: total 2, 2 types
    p2_c_a = (1 - 0.5) / 2 + 0.5 * 2 / 2 * p1_c
    # trigram level, context (<s>, a): c(<s> a b) = 1, c(<s> a c) = 1: total 2, 2 types
    assert lm.prob("c", ["a"]) == pytest.approx((1 - 0.5) / 2 + 0.5 * 2 / 2 * p2_c_a)


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_distributions_sum_to_one(order: int) -> None:
    corpus = [s.split() for s in ["the cat sat on the mat", "the dog sat", "a cat ran on the mat", "the cat"]]
    lm = KneserNeyLM(corpus, order=order)
    words = sorted(lm.vocab)
    for context in itertools.chain([[]], ([w] for w in ["the", "cat", "zebra"]), [["on", "the"], ["the", "cat"]]):
        assert sum(lm.prob(w, context) for w in words) == pytest.approx(1.0, abs=1e-9)


def test_perplexity_of_the_token_stream() -> None:
    lm = KneserNeyLM(CORPUS, order=2, discount=0.75)
    test = [["a", "b"], ["c"]]
    logs = [
        math.log(lm.prob("a", [])),
        math.log(lm.prob("b", ["a"])),
        math.log(lm.prob("</s>", ["b"])),
        math.log(lm.prob("c", [])),
        math.log(lm.prob("</s>", ["c"])),
    ]
    assert lm.perplexity(test) == pytest.approx(math.exp(-sum(logs) / 5))
    with pytest.raises(ValueError, match="empty"):
        lm.perplexity([])


def test_discount_is_estimated_from_counts_of_counts() -> None:
    lm = KneserNeyLM(CORPUS, order=2)
    # top order (bigram) counts: five types seen once, two seen twice -> 5 / (5 + 4)
    assert lm.discounts[2] == pytest.approx(5 / 9)
