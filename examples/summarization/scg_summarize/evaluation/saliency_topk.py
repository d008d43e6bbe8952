"""The analysis of Li et al.'s Table 4: how well a saliency attention finds summary words.

"We select the top-k words from the input sequence according to the salience scores in a^s and
a^u ... regard the top words as summaries and conduct ROUGE evaluation on them. Because the
order of the top words is ignored, we employ the F-measure score of ROUGE-1" (k = 10).

* :func:`top_k_words` ranks one document's source tokens by a saliency vector and keeps the
  first ``k`` distinct words (a word repeated in the source counts once, at its best
  position; special tokens and positions scored ``-inf`` — not eligible, e.g. outside the
  word graph — are skipped, so a document may get fewer than ``k`` words);
* :func:`top_k_rouge1` scores those word lists against the references (ROUGE-1 F1 x 100, max
  over references, digits and ``#`` matched, no sentence splitting);
* :func:`saliency_top_k` runs a model over a prepared split: any object with a
  ``saliency_maps(batch)`` method returning :class:`~scg_summarize.models.common.saliency_maps.SaliencyMaps`
  (:class:`SaliencyModel`) — MAL's
  :class:`~scg_summarize.models.mal.MALSummarizer` returns ``SuAtt`` (a^s) and ``UnAtt`` (a^u);
* :func:`run_saliency_top_k` does it for a loaded run on the first examples of a split: the
  ``scg-summarize evaluate --saliency-topk K`` option, which writes the result under
  ``"saliency_topk"`` in the evaluation result file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from ..data.batching import SourceBatch, collate_sources
from ..data.dataset import SummarizationDataset
from ..data.vocab import SPECIALS
from ..decoding.inputs import documents_from_split
from ..decoding.loading import LoadedRun
from ..devices import checked_device
from ..models.common.saliency_maps import SaliencyMaps
from .rouge import Rouge, RougeOptions, RougeResult

__all__ = [
    "SaliencyMaps",
    "SaliencyModel",
    "run_saliency_top_k",
    "saliency_model",
    "saliency_top_k",
    "top_k_rouge1",
    "top_k_words",
]


@runtime_checkable
class SaliencyModel(Protocol):
    """Anything that scores the source words of a batch (``src``/``src_mask`` ``(B, M, N)``)."""

    def saliency_maps(self, batch: SourceBatch) -> SaliencyMaps: ...


def top_k_words(tokens: Sequence[str], scores: Sequence[float], k: int = 10) -> list[str]:
    """The ``k`` most salient distinct words of a document, best first.

    Args:
        tokens: the source tokens.
        scores: one saliency value per token (positions beyond ``len(scores)`` are ignored).
        k: how many words.
    """
    if k < 1:
        raise ValueError(f"k must be positive, got {k}")
    if len(scores) > len(tokens):
        raise ValueError(f"{len(scores)} saliency scores for {len(tokens)} tokens")
    order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
    chosen: list[str] = []
    for i in order:
        word = tokens[i]
        if word in SPECIALS or word in chosen or float(scores[i]) == float("-inf"):
            continue
        chosen.append(word)
        if len(chosen) == k:
            break
    return chosen


def top_k_rouge1(
    words: Sequence[Sequence[str]], references: Sequence[Sequence[str]], rouge: Rouge | None = None
) -> RougeResult:
    """ROUGE-1 F1 (x 100) of each document's word list (joined by spaces) against its references."""
    rouge = rouge or Rouge(RougeOptions(metrics=("rouge1",), hash_digits=True, split_sentences=False))
    return rouge.corpus([" ".join(w) for w in words], references, keep_per_example=True)


def saliency_top_k(
    model: SaliencyModel,
    batches: Iterable[SourceBatch],
    id_to_token: Any,
    *,
    k: int = 10,
    rouge: Rouge | None = None,
) -> dict[str, Any]:
    """Table 4: ROUGE-1 F1 of the top-``k`` words of every saliency map of ``model``.

    Args:
        model: a :class:`SaliencyModel`.
        batches: batches with ``src``, ``src_mask`` and ``refs`` (the references of each example).
        id_to_token: maps an id to its word (``Vocab.id_to_token``).
        k: words per document (the paper: 10).
        rouge: the scorer (default: ROUGE-1 F1 with ``#``-digit matching).

    Returns:
        ``{"k": k, "count": n, "rouge1": {name: F1 x 100}, "examples": [first 5 word lists]}``.
    """
    words: dict[str, list[list[str]]] = {}
    refs: list[Sequence[str]] = []
    for batch in batches:
        if batch.refs is None:
            raise KeyError("saliency_top_k: the batches must carry 'refs' (load the split with its text)")
        with torch.no_grad():
            maps = model.saliency_maps(batch)
        ids = maps.ids.tolist()
        lengths = maps.mask.sum(-1).tolist()
        for name, values in maps.maps.items():
            rows = values.float().tolist()
            for row, n in enumerate(lengths):
                tokens = [id_to_token(i) for i in ids[row][:n]]
                words.setdefault(name, []).append(top_k_words(tokens, rows[row][:n], k))
        refs.extend(batch.refs)
    scores = {name: top_k_rouge1(lists, refs, rouge).scores["rouge1"] for name, lists in words.items()}
    examples = {name: lists[:5] for name, lists in words.items()}
    return {"k": k, "count": len(refs), "rouge1": scores, "examples": examples}


def saliency_model(run: LoadedRun) -> SaliencyModel:
    """The run's model if it scores its source words (``ValueError`` naming the run otherwise)."""
    model = getattr(run.decoder, "model", None)
    if not isinstance(model, SaliencyModel):
        raise ValueError(
            f"--saliency-topk: the model of {run.run_dir} ({run.model}) has no saliency attention "
            f"(saliency_maps); Table 4's analysis applies to MAL runs (model.family = 'mal')"
        )
    return model


def run_saliency_top_k(
    run: LoadedRun,
    dataset: SummarizationDataset,
    k: int,
    *,
    limit: int | None = None,
    batch_size: int = 32,
    device: str = "cpu",
) -> dict[str, Any]:
    """:func:`saliency_top_k` of a loaded run's model on the first ``limit`` examples (all when
    None) of ``dataset``, read as the run reads them (its ``regrid``).

    Raises ``ValueError`` naming the run when its model scores no source words (no
    ``saliency_maps``: every family but MAL).
    """
    checked_device(device, "run_saliency_top_k")
    model = saliency_model(run)
    count = len(dataset) if limit is None else min(limit, len(dataset))
    docs = list(run.prepare(documents_from_split(dataset, range(count))))

    def batches() -> Any:
        for first in range(0, len(docs), batch_size):
            chunk = docs[first : first + batch_size]
            yield collate_sources(chunk).to(device)

    was_training = bool(getattr(model, "training", False))
    if hasattr(model, "eval"):
        model.eval()
    try:
        return saliency_top_k(model, batches(), run.vocab.id_to_token, k=k)
    finally:
        if was_training and hasattr(model, "train"):
            model.train()
