"""ROUGE F1 (or recall) with ``rouge-score``, maximized over references, as in the paper.

`Rouge` wraps `rouge_score.rouge_scorer.RougeScorer` (Porter stemming on by
default) and adds what summarization papers do around it:

* several references per example: every metric is the maximum over the references, taken
  per metric (``refs="all"``); ``"first"`` scores against the first reference only,
  ``"concat"`` joins all references into one multi-sentence reference, and ``"pool"`` pools
  them as ROUGE-1.5.5 does by default (``-f A``): the hits against every reference are summed,
  recall is divided by the summed reference counts and precision by the prediction's count
  times the number of references (so DUC-style numbers are comparable with the perl script);
* ROUGE-Lsum (summary-level LCS, ``rougeLsum``) on newline-separated sentences: both sides are
  split into sentences (the data pipeline's splitter) before scoring, so multi-sentence
  summaries are scored like perl ROUGE's ROUGE-L; ``rougeL`` ignores sentence breaks;
* DUC-style limited-length evaluation: ``limit_bytes=75`` truncates every prediction to its
  first 75 bytes (UTF-8 safe) and ``measure="recall"`` reports recall instead of F1;
* ``hash_digits``: model outputs of a corpus prepared with digit mapping contain ``#`` for
  every digit; mapping digits and ``#`` to ``0`` on both sides lets numbers match.

Scores are in ``[0, 1]`` per example; `Rouge.corpus` averages them and reports
percentages (x 100), the scale of the paper's tables. An empty prediction scores 0.

Tokens are ``rouge-score``'s own (``rouge_score.tokenize.tokenize``) with nltk's Porter stemmer,
whose ``stem`` is memoised here (a word's stem is a pure function of the word; about half of
the scoring time of CNN/DM summaries is stemming the same words again): the scores are those of
``rouge-score``'s default tokenizer to the bit.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, NoReturn

from ..choices import ROUGE_SCORES as METRICS
from ..data.sentences import split_sentences
from ..typed import field_type_problem

__all__ = ["METRICS", "Rouge", "RougeOptions", "RougeResult", "RougeTokenizer", "truncate_bytes"]

RefMode = Literal["all", "first", "concat", "pool"]
Measure = Literal["f", "recall", "precision"]
_DIGIT_RE = re.compile(r"[0-9#]")
_ATTR = {"f": "fmeasure", "recall": "recall", "precision": "precision"}


def truncate_bytes(text: str, limit: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding has at most ``limit`` bytes."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


@dataclass(frozen=True)
class RougeOptions:
    """How predictions are scored (see the module docstring).

    Attributes:
        metrics: any of ``rouge1``, ``rouge2``, ``rougeL``, ``rougeLsum`` (also ``rouge3``...).
        stemming: Porter stemming (``rouge-score``'s ``use_stemmer``).
        refs: ``"all"`` (max over references), ``"first"``, ``"concat"`` or ``"pool"``.
        measure: ``"f"`` (F1), ``"recall"`` or ``"precision"``.
        limit_bytes: truncate predictions to this many bytes (75 for DUC); None = no limit.
        hash_digits: map digits and ``#`` to ``0`` in predictions and references.
        split_sentences: newline-separate sentences (for ``rougeLsum``) with the rule-based
            splitter; text already containing newlines is split on them only.
    """

    metrics: tuple[str, ...] = METRICS
    stemming: bool = True
    refs: RefMode = "all"
    measure: Measure = "f"
    limit_bytes: int | None = None
    hash_digits: bool = False
    split_sentences: bool = True

    def __post_init__(self) -> None:
        """Every field checked, each refusal as ``RougeOptions(field=...): expected ..., got ...``."""
        problem = field_type_problem(self)  # (stemming="no" was taken as true, limit_bytes=7.5 cut nothing)
        if problem is not None:
            _refuse(*problem)
        if not self.metrics:
            _refuse("metrics", "at least one metric (rouge1, rouge2, rougeL, rougeLsum, ...)", self.metrics)
        for name in self.metrics:
            if not re.fullmatch(r"rouge([1-9]|L|Lsum)", name):
                _refuse(
                    "metrics",
                    "metrics among rouge1 .. rouge9, rougeL and rougeLsum",
                    name,
                    " (an unknown ROUGE metric)",
                )
        if self.refs not in ("all", "first", "concat", "pool"):
            _refuse("refs", "'all', 'first', 'concat' or 'pool'", self.refs)
        if self.measure not in _ATTR:
            _refuse("measure", "'f', 'recall' or 'precision'", self.measure)
        if self.limit_bytes is not None and self.limit_bytes < 1:
            _refuse("limit_bytes", "a positive number of bytes (or None: no limit)", self.limit_bytes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable settings (stored with every result)."""
        out = asdict(self)
        out["metrics"] = list(self.metrics)
        return out


def _refuse(name: str, expected: str, value: Any, note: str = "") -> NoReturn:
    """``ValueError``: ``RougeOptions(name=...): expected ..., got value`` (torch.distributions' form)."""
    raise ValueError(f"RougeOptions({name}=...): expected {expected}, got {value!r}{note}")


@dataclass
class RougeResult:
    """Corpus ROUGE: the mean of each metric over examples, as percentages.

    Attributes:
        scores: metric -> mean score x 100.
        count: the number of examples.
        per_example: metric -> the per-example scores in ``[0, 1]`` (for significance tests
            and for finding good and bad examples).
    """

    scores: dict[str, float]
    count: int
    per_example: dict[str, list[float]] = field(default_factory=dict)


@functools.cache
def _porter_stemmer() -> Any:
    """One nltk Porter stemmer (imported on first use: nltk costs ~1 s of CPU to import)."""
    from nltk.stem import porter  # type: ignore[import-untyped]

    return porter.PorterStemmer()


@functools.lru_cache(maxsize=1 << 16)
def _porter_stem(word: str) -> str:
    """nltk's Porter stem of ``word``, memoised (bounded: at most 65,536 words are kept)."""
    return str(_porter_stemmer().stem(word))


class _MemoisedPorterStemmer:
    """The stemmer ``rouge_score.tokenize.tokenize`` calls: nltk's Porter ``stem`` through `_porter_stem`."""

    def stem(self, word: str) -> str:
        return _porter_stem(word)


class RougeTokenizer:
    """``rouge-score``'s default tokenization (lowercase, alphanumeric runs, Porter stems of words longer
    than 3 characters) with a memoised stemmer: the same tokens as
    ``rouge_score.tokenizers.DefaultTokenizer(use_stemmer=stemming)``, faster on real text."""

    def __init__(self, *, stemming: bool) -> None:
        from rouge_score import tokenize

        self._tokenize = tokenize.tokenize
        self._stemmer = _MemoisedPorterStemmer() if stemming else None

    def tokenize(self, text: str) -> list[str]:
        return list(self._tokenize(text, self._stemmer))


class Rouge:
    """ROUGE scoring under [`RougeOptions`][scg_summarize.evaluation.rouge.RougeOptions] (see the module docstring)."""

    def __init__(self, options: RougeOptions | None = None) -> None:
        from rouge_score import rouge_scorer

        self.options = options or RougeOptions()
        self._tokenizer = RougeTokenizer(stemming=self.options.stemming)
        self._scorer = rouge_scorer.RougeScorer(list(self.options.metrics), tokenizer=self._tokenizer)

    def _prepare(self, text: str) -> str:
        if self.options.hash_digits:
            text = _DIGIT_RE.sub("0", text)
        if not self.options.split_sentences:
            return text
        if "\n" in text:
            return "\n".join(line.strip() for line in text.split("\n") if line.strip())
        return "\n".join(split_sentences(text))

    def references(self, refs: Sequence[str]) -> list[str]:
        """The references actually scored against, after the ``refs`` option."""
        if isinstance(refs, str):
            raise TypeError("references must be a sequence of strings, not a single string")
        bad = next((r for r in refs if not isinstance(r, str)), None)
        if bad is not None:
            raise TypeError(f"references must be strings, got {type(bad).__name__} {bad!r}")
        if self.options.refs == "first":
            return list(refs[:1])
        if self.options.refs == "concat":
            return ["\n".join(r.strip() for r in refs if r.strip())] if refs else []
        return list(refs)

    def score(self, prediction: str, references: Sequence[str]) -> dict[str, float]:
        """Per-metric scores in ``[0, 1]`` of one prediction, each maximized over references.

        Raises ``ValueError`` when there is no reference.
        """
        if not isinstance(prediction, str):
            raise TypeError(f"the prediction must be a string, got {type(prediction).__name__} {prediction!r}")
        refs = self.references(references)
        if not refs:
            raise ValueError("no reference summary to score against")
        if self.options.limit_bytes is not None:
            prediction = truncate_bytes(prediction, self.options.limit_bytes)
        pred = self._prepare(prediction)
        if self.options.refs == "pool":
            return self._pooled(pred, [self._prepare(ref) for ref in refs])
        attr = _ATTR[self.options.measure]
        best = dict.fromkeys(self.options.metrics, 0.0)
        for ref in refs:
            scores = self._scorer.score(self._prepare(ref), pred)
            for name in self.options.metrics:
                best[name] = max(best[name], float(getattr(scores[name], attr)))
        return best

    def _units(self, text: str, metric: str) -> int:
        """The number of n-grams (ROUGE-N) or tokens (ROUGE-L/Lsum) ``metric`` counts in ``text``."""
        tokens = len(self._tokenizer.tokenize(text))
        n = metric[len("rouge") :]
        return max(tokens - int(n) + 1, 0) if n.isdigit() else tokens

    def _pooled(self, pred: str, refs: Sequence[str]) -> dict[str, float]:
        """ROUGE-1.5.5's multi-reference pooling (``-f A``): hits and counts summed over references.

        The hits against each reference are recovered from ``rouge-score``'s recall times the
        reference's count, so tokenization, stemming and the LCS are exactly those of the
        other modes.
        """
        out = {}
        for metric in self.options.metrics:
            hits = ref_total = pred_total = 0
            pred_units = self._units(pred, metric)
            for ref in refs:
                ref_units = self._units(ref, metric)
                recall = float(self._scorer.score(ref, pred)[metric].recall)
                hits += round(recall * ref_units)
                ref_total += ref_units
                pred_total += pred_units
            recall = hits / ref_total if ref_total else 0.0
            precision = hits / pred_total if pred_total else 0.0
            f = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
            out[metric] = {"f": f, "recall": recall, "precision": precision}[self.options.measure]
        return out

    def corpus(
        self,
        predictions: Sequence[str],
        references: Sequence[Sequence[str]],
        *,
        ids: Sequence[str] | None = None,
        keep_per_example: bool = False,
    ) -> RougeResult:
        """Mean scores (x 100) over aligned ``predictions`` and reference lists.

        Args:
            predictions: one summary per example.
            references: the references of each example.
            ids: example ids, used in error messages.
            keep_per_example: also return every example's scores.
        """
        if isinstance(predictions, str) or not hasattr(predictions, "__len__"):  # (a string: one per character)
            raise TypeError(f"Rouge.corpus(predictions): expected a list of strings, got {type(predictions).__name__}")
        if len(predictions) != len(references):
            raise ValueError(f"{len(predictions)} predictions but {len(references)} reference lists")
        if ids is not None and len(ids) != len(predictions):
            raise ValueError(f"Rouge.corpus(ids=...): {len(ids)} ids for {len(predictions)} predictions")
        totals = dict.fromkeys(self.options.metrics, 0.0)
        per: dict[str, list[float]] = {name: [] for name in self.options.metrics}
        for i, (pred, refs) in enumerate(zip(predictions, references)):
            try:
                scores = self.score(pred, refs)
            except (ValueError, TypeError) as err:
                name = ids[i] if ids is not None else f"#{i}"
                raise ValueError(f"example {name}: {err}") from err
            for name, value in scores.items():
                totals[name] += value
                if keep_per_example:
                    per[name].append(value)
        n = len(predictions)
        means = {name: (100.0 * total / n if n else 0.0) for name, total in totals.items()}
        return RougeResult(means, n, per if keep_per_example else {})
