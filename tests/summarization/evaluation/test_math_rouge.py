"""ROUGE-L and ROUGE-Lsum against hand-computed multi-sentence cases (issue 30).

ROUGE-L is the LCS of the two token sequences; ROUGE-Lsum sums, over the reference sentences r_i,
the size of the union of r_i's LCS with every predicted sentence, then P = hits / |prediction|,
R = hits / |reference|, F = 2PR / (P + R). The words are chosen to be their own Porter stems;
sentences end at a period before a capital (the splitter's rule), or at a newline.
"""

from __future__ import annotations

import pytest
from scg_summarize.evaluation.rouge import Rouge, RougeOptions

CASES = [
    # reference, prediction, ROUGE-L F, ROUGE-Lsum F (worked out in the comments)
    # L: LCS(cat sat mat dog ran, dog ran cat sat mat) = 3 -> 3/5. Lsum: r1 = cat sat mat meets
    # "cat sat mat" (3), r2 = dog ran meets "dog ran" (2): 5 hits -> 1.
    ("Cat sat mat. Dog ran.", "Dog ran. Cat sat mat.", 3 / 5, 1.0),
    # one reference sentence, two predicted ones: L = LCS(sun moon red blue, red blue sun moon) = 2
    # -> 1/2; Lsum: union {red blue} u {sun moon} = 4 -> 1.
    ("Sun moon red blue.", "Red blue. Sun moon.", 1 / 2, 1.0),
    # P != R: prediction "cat top sat. ran dog. fish." (6 tokens), reference "cat big sat. dog ran."
    # (5). L: LCS = cat sat + one of (ran, dog) = 3 -> P 3/6, R 3/5, F = 6/11. Lsum: r1 = cat big sat
    # meets "cat top sat" in {cat sat} (2); r2 = dog ran meets "ran dog" in one word (1): 3 hits,
    # the same P and R here -> 6/11.
    ("Cat big sat. Dog ran.", "Cat top sat. Ran dog. Fish.", 6 / 11, 6 / 11),
    # where the union beats the plain LCS with P != R: reference "cat sat dog ran." (4), prediction
    # "dog ran. cat sat. fish sun." (6): L = 2 -> P 2/6, R 2/4, F = 2/5; Lsum: {dog ran} u {cat sat}
    # = 4 hits -> P 4/6, R 1, F = 4/5.
    ("Cat sat dog ran.", "Dog ran. Cat sat. Fish sun.", 2 / 5, 4 / 5),
]


@pytest.mark.parametrize(("reference", "prediction", "rouge_l", "rouge_lsum"), CASES)
def test_rouge_l_and_lsum_hand_computed(reference: str, prediction: str, rouge_l: float, rouge_lsum: float) -> None:
    scores = Rouge(RougeOptions(metrics=("rougeL", "rougeLsum"))).score(prediction, [reference])
    assert scores["rougeL"] == pytest.approx(rouge_l, abs=1e-9)
    assert scores["rougeLsum"] == pytest.approx(rouge_lsum, abs=1e-9)


def test_newline_separated_text_is_split_on_its_newlines_only() -> None:
    """Prediction "dog. cat sat" + newline + "fish": its sentences are the two lines, so r = cat sat
    dog meets "dog cat sat" in {cat sat} (LCS 2) and "fish" in nothing: P 2/4, R 2/3, F = 4/7 (split
    at the period as well, the union would be {dog} u {cat sat} = 3 hits, F = 6/7)."""
    scores = Rouge(RougeOptions(metrics=("rougeLsum",))).score("Dog. Cat sat\nFish", ["Cat sat dog"])
    assert scores["rougeLsum"] == pytest.approx(4 / 7, abs=1e-9)


def test_several_references_take_the_best_per_metric() -> None:
    rouge = Rouge(RougeOptions(metrics=("rouge1", "rougeL", "rougeLsum")))
    scores = rouge.score("cat sat. dog ran.", ["cat sat. dog ran.", "fish swam."])
    assert scores == pytest.approx({"rouge1": 1.0, "rougeL": 1.0, "rougeLsum": 1.0})
    assert rouge.score("cat sat", ["fish swam", "cat sat"])["rouge1"] == pytest.approx(1.0)
