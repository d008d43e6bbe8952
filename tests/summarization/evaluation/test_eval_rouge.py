"""The ROUGE wrapper: agreement with rouge-score, references, limits, and perl ROUGE on XSum."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scg_summarize.evaluation import Rouge, RougeOptions, truncate_bytes
from scg_summarize.evaluation.rouge import RougeTokenizer

from ..eval_support import shared_data_dir

WORDS = ["the", "cat", "sat", "on", "mat", "dogs", "running", "ran", "quickly", "big", "2", "won't", "U.S."]
text = st.lists(st.sampled_from(WORDS), min_size=0, max_size=12).map(" ".join)


def direct_scorer() -> Any:
    """rouge-score's own scorer of R-1, R-2 and R-L (stemming), the reference of these tests. Imported
    here, not at the top: rouge_score imports nltk (~2 s of CPU) that collecting the tests need not pay."""
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)


@settings(max_examples=60, deadline=None)
@given(prediction=text, reference=text)
def test_single_reference_agrees_with_rouge_score(prediction: str, reference: str) -> None:
    direct = direct_scorer().score(reference, prediction)
    ours = Rouge(RougeOptions(metrics=("rouge1", "rouge2", "rougeL"), split_sentences=False)).score(
        prediction, [reference]
    )
    for name in ("rouge1", "rouge2", "rougeL"):
        assert ours[name] == pytest.approx(direct[name].fmeasure, abs=1e-12)


# Words whose Porter stems differ from the word (suffix rules of every step, irregular forms,
# words of 3 characters or fewer that are never stemmed) and non-ASCII/punctuated tokens.
STEM_WORDS = WORDS + [
    "generously",
    "relational",
    "hopefulness",
    "dying",
    "lying",
    "skies",
    "news",
    "agreed",
    "conditional",
    "electricity",
    "adjustable",
    "Communism",
    "ponies",
    "caresses",
    "feed",
    "sky",
    "USA's",
    "naïve",
    "e-mail",
]


@settings(max_examples=40, deadline=None)
@given(
    words=st.lists(st.sampled_from(STEM_WORDS), max_size=30), case=st.sampled_from([str.lower, str.upper, str.title])
)
def test_memoised_tokenizer_gives_rouge_scores_default_tokens(words: list[str], case: Any) -> None:
    from rouge_score import tokenizers

    text = case(" ".join(words))
    for stemming in (True, False):
        # twice: the second call reads every stem from the memo
        for _ in range(2):
            assert RougeTokenizer(stemming=stemming).tokenize(text) == tokenizers.DefaultTokenizer(
                use_stemmer=stemming
            ).tokenize(text)


def test_memoised_tokenizer_gives_rouge_scores_default_tokens_on_cnndm() -> None:
    from rouge_score import tokenizers

    rows = (shared_data_dir() / "cnndm-250" / "cnndm_test250.jsonl").read_text(encoding="utf-8").splitlines()
    texts = []
    for row in map(json.loads, rows[:12]):
        texts += [row["reference"], *row["systems"].values()]
    default = tokenizers.DefaultTokenizer(use_stemmer=True)
    memoised = RougeTokenizer(stemming=True)
    assert [memoised.tokenize(t) for t in texts] == [default.tokenize(t) for t in texts]


def test_empty_prediction_scores_zero_and_missing_references_are_errors() -> None:
    rouge = Rouge()
    assert rouge.score("", ["the cat sat"]) == dict.fromkeys(("rouge1", "rouge2", "rougeL", "rougeLsum"), 0.0)
    assert rouge.corpus(["", "the cat sat"], [["the cat sat"], ["the cat sat"]]).scores["rouge1"] == 50.0
    with pytest.raises(ValueError, match="example b: no reference"):
        rouge.corpus(["x", "y"], [["x"], []], ids=["a", "b"])
    with pytest.raises(ValueError, match="2 predictions but 1"):
        rouge.corpus(["x", "y"], [["x"]])
    with pytest.raises(ValueError, match="sequence of strings"):
        rouge.corpus(["x"], ["x"])  # type: ignore[list-item]


def test_max_over_references_is_taken_per_metric() -> None:
    scorer = direct_scorer()
    prediction = "a b c d"
    refs = ["a b x c d", "d c b a"]  # the first wins ROUGE-2, ties ROUGE-1
    ours = Rouge(RougeOptions(metrics=("rouge1", "rouge2", "rougeL"))).score(prediction, refs)
    for name in ("rouge1", "rouge2", "rougeL"):
        assert ours[name] == pytest.approx(max(scorer.score(r, prediction)[name].fmeasure for r in refs))
    assert ours["rouge1"] == pytest.approx(1.0)  # the second reference has all four words
    first = Rouge(RougeOptions(metrics=("rouge1",), refs="first")).score(prediction, refs)
    assert first["rouge1"] == pytest.approx(scorer.score(refs[0], prediction)["rouge1"].fmeasure)


def test_lsum_uses_sentence_breaks_and_concat_joins_references() -> None:
    rouge = Rouge(RougeOptions(metrics=("rougeL", "rougeLsum"), refs="concat"))
    refs = ["Alpha beta gamma.", "Delta epsilon zeta."]
    prediction = "delta epsilon zeta\nalpha beta gamma"
    scores = rouge.score(prediction, refs)
    assert scores["rougeLsum"] == pytest.approx(1.0)  # every sentence matched in its own LCS
    assert scores["rougeL"] == pytest.approx(0.5)  # one LCS across the whole text


def test_duc_style_byte_limit_and_recall() -> None:
    assert truncate_bytes("héllo wörld", 3) == "hé"  # never splits a character
    assert truncate_bytes("short", 75) == "short"
    rouge = Rouge(RougeOptions(metrics=("rouge1",), limit_bytes=9, measure="recall"))
    # only "the cat" (first 9 bytes: "the cat s") counts; recall against 4 reference words
    assert rouge.score("the cat sat on the mat", ["the cat sat down"])["rouge1"] == pytest.approx(0.5)


def test_hash_digits_lets_mapped_numbers_match() -> None:
    plain = Rouge(RougeOptions(metrics=("rouge1",)))
    mapped = Rouge(RougeOptions(metrics=("rouge1",), hash_digits=True))
    assert plain.score("## people died", ["25 people died"])["rouge1"] < 1.0
    assert mapped.score("## people died", ["25 people died"])["rouge1"] == pytest.approx(1.0)


@pytest.mark.parametrize("metric", ["rouge0", "bleu", "rougeS"])
def test_unknown_metric_is_rejected(metric: str) -> None:
    with pytest.raises(ValueError, match="unknown ROUGE metric"):
        RougeOptions(metrics=(metric,))


def _xsum(system: str, n: int | None = None) -> tuple[list[str], list[str], dict[str, float]]:
    root = shared_data_dir() / "xsum-test-outputs"
    gold = (root / "gold-test-sentences.txt").read_text(encoding="utf-8").split("\n")[:11334]
    pred = (root / f"{system}-test-output.txt").read_text(encoding="utf-8").split("\n")[:11334]
    line = (root / f"{system}-test-output.rouge").read_text(encoding="utf-8").splitlines()[0]
    r1, r2, _, rl, _ = (float(x) for x in re.search(r"ROUGE\(1/2/3/L/SU4\): (\S+)", line).group(1).split("/"))
    return pred[:n], gold[:n], {"rouge1": r1, "rouge2": r2, "rougeL": rl}


def test_xsum_subset_corpus_scores_equal_rouge_score_directly() -> None:
    # an exact identity (the corpus score is the mean of rouge-score's per-pair F1): 100 real pairs show it
    pred, gold, _ = _xsum("ptgen", 100)
    ours = Rouge(RougeOptions(metrics=("rouge1", "rouge2", "rougeL"))).corpus(pred, [[g] for g in gold]).scores
    scorer = direct_scorer()
    direct = {k: 0.0 for k in ours}
    for p, g in zip(pred, gold):
        for k, v in scorer.score(g, p).items():
            direct[k] += 100 * v.fmeasure / len(pred)
    for name in ours:
        assert ours[name] == pytest.approx(direct[name], abs=1e-9)


# Measured differences (ours - perl ROUGE-1.5.5, F1 x 100) on all 11,334 pairs; see docs/evaluation.md.
PERL_TOLERANCE = {"rouge1": 0.5, "rouge2": 0.15, "rougeL": 0.3}


@pytest.mark.slow
@pytest.mark.parametrize("system", ["ptgen", "convs2s", "lead"])
def test_xsum_full_set_is_close_to_perl_rouge(system: str) -> None:
    pred, gold, perl = _xsum(system)
    ours = Rouge(RougeOptions(metrics=("rouge1", "rouge2", "rougeL"))).corpus(pred, [[g] for g in gold]).scores
    for name, tolerance in PERL_TOLERANCE.items():
        assert abs(ours[name] - perl[name]) <= tolerance, (name, ours[name], perl[name])


def test_rouge_options_are_serializable() -> None:
    options = RougeOptions(limit_bytes=75, measure="recall")
    assert options.to_dict()["limit_bytes"] == 75 and options.to_dict()["metrics"][0] == "rouge1"


def test_a_string_for_a_list_is_refused_not_scored_per_character() -> None:
    """``Rouge.corpus("ab", ...)`` scored each character as a prediction (ROUGE-1 100); a
    non-string reference or prediction failed inside the tokenizer."""
    rouge = Rouge()
    with pytest.raises(TypeError, match=r"Rouge.corpus\(predictions\): expected a list of strings, got str"):
        rouge.corpus("ab", [["a"], ["b"]])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"the prediction must be a string, got NoneType"):
        rouge.score(None, ["a b"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"references must be strings, got int 3"):
        rouge.score("a b", [3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"1 ids for 2 predictions"):
        rouge.corpus(["a", "b"], [["a"], ["b"]], ids=["x"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"stemming": "no"}, r"RougeOptions\(stemming=...\): expected true or false, got 'no'"),  # (was stemming on)
        ({"hash_digits": 1}, r"RougeOptions\(hash_digits=...\): expected true or false, got 1"),
        ({"split_sentences": None}, r"RougeOptions\(split_sentences=...\): expected true or false, got None"),
        ({"limit_bytes": 7.5}, r"RougeOptions\(limit_bytes=...\): expected an integer \(or None\), got 7.5"),
        ({"limit_bytes": True}, r"RougeOptions\(limit_bytes=...\): expected an integer \(or None\), got True"),
        ({"limit_bytes": "75"}, r"RougeOptions\(limit_bytes=...\): expected an integer \(or None\), got '75'"),
        (
            {"metrics": "rouge1"},
            r"RougeOptions\(metrics=...\): expected a tuple of strings, got 'rouge1'",
        ),  # (unknown 'r')
        ({"metrics": ["rouge1"]}, r"RougeOptions\(metrics=...\): expected a tuple of strings, got \['rouge1'\]"),
        (
            {"metrics": (1,)},
            r"RougeOptions\(metrics=...\): expected a tuple of strings, got \(1,\)",
        ),  # (a TypeError in re)
        # the older checks said "limit_bytes must be positive, got -3", "metrics must not be empty", ...: no class
        (
            {"limit_bytes": -3},
            r"RougeOptions\(limit_bytes=...\): expected a positive number of bytes \(or None: no limit\), got -3",
        ),
        ({"limit_bytes": 0}, r"RougeOptions\(limit_bytes=...\): expected a positive number of bytes .*, got 0"),
        ({"metrics": ()}, r"RougeOptions\(metrics=...\): expected at least one metric \(rouge1, .*\), got \(\)"),
        (
            {"metrics": ("rouge1", "bleu")},
            r"RougeOptions\(metrics=...\): expected metrics among rouge1 .. rouge9, rougeL and rougeLsum, got 'bleu' "
            r"\(an unknown ROUGE metric\)",
        ),
        ({"refs": "best"}, r"RougeOptions\(refs=...\): expected 'all', 'first', 'concat' or 'pool', got 'best'"),
        ({"measure": "f1"}, r"RougeOptions\(measure=...\): expected 'f', 'recall' or 'precision', got 'f1'"),
    ],
)
def test_rouge_options_of_the_wrong_type_are_refused_naming_the_field(options: dict[str, Any], message: str) -> None:
    """A string for a flag was taken as true, a float or a bool for ``limit_bytes`` was accepted, a
    list of metrics made an options object that could not be hashed. Every refusal names the class
    and the field in one form (the value checks said ``refs must be ...`` without the class)."""
    with pytest.raises(ValueError, match=message):
        RougeOptions(**options)
