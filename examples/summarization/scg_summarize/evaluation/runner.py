"""Evaluating a model or a baseline on a prepared split, producing a result record.

`evaluate_model` runs, batch by batch, teacher-forced scoring of the references
(perplexity, with the number of reference words scored as ``<unk>``, and coarse accuracy under
teacher forcing), then decoding (summaries with their
coarse attention), then ROUGE against all references and the attention metrics.
`evaluate_baseline` scores an extractive baseline on the stored source sentences.
Both return ``(result, outputs)``: the result record of [`report`][scg_summarize.evaluation.report]
and the per-example outputs (id, summary, per-example ROUGE) for inspection.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..data.batching import collate_examples
from ..data.dataset import SummarizationDataset
from ..data.vocab import require_same_vocab
from ..decode_options import DecodeOptions
from ..decoding.inputs import SourceDocument, documents_from_split
from ..decoding.loading import LoadedRun
from ..decoding.protocol import offered_extras
from ..decoding.summarizer import Summarizer
from ..devices import checked_device
from .baselines import ExtractiveBaseline
from .metrics import AttentionMetrics
from .perplexity import Perplexity, teacher_forced
from .report import make_result, read_training_record
from .rouge import Rouge, RougeOptions

__all__ = ["evaluate_baseline", "evaluate_model", "model_result", "select_indices"]

ATTENTION_EXTRAS: tuple[str, ...] = ("coarse_attn", "chunk_read")


def select_indices(size: int, limit: int | None) -> list[int]:
    """The first ``limit`` example positions of a split of ``size`` (all when None)."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    return list(range(size if limit is None else min(size, limit)))


def _check_refs(docs: Sequence[SourceDocument], where: str) -> None:
    for doc in docs:
        if not doc.refs:
            raise ValueError(f"{where}: example {doc.id} has no reference summary")


def model_result(
    run: LoadedRun,
    dataset: SummarizationDataset,
    decode: DecodeOptions,
    rouge: RougeOptions,
    metrics: Mapping[str, Any],
    *,
    examples: int,
    seconds: float = 0.0,
) -> dict[str, Any]:
    """`evaluate_model`'s result record of ``run`` on ``examples`` examples of ``dataset``. Its settings
    (`report.result_settings`) are known before evaluating: ``evaluate`` checks its output file with the
    record of empty ``metrics`` before it decodes a whole split."""
    topk = run.decoder.coarse_topk
    name = run.model if topk <= 1 or "MULTI" in run.model.upper() else f"{run.model}+MULTI"
    return make_result(
        "model",
        name,
        metrics,
        data=str(dataset.root),
        split=dataset.split,
        examples=examples,
        run=str(run.run_dir),
        run_info=run.info,
        decode_options=decode.to_dict(),
        rouge_options=rouge.to_dict(),
        seconds=round(seconds, 3),
    )


def evaluate_model(
    run: LoadedRun,
    dataset: SummarizationDataset,
    decode: DecodeOptions,
    rouge: RougeOptions,
    *,
    limit: int | None = None,
    batch_size: int = 32,
    device: str = "cpu",
    progress: Callable[[int], None] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Perplexity, ROUGE and attention metrics of ``run`` on ``dataset``.

    Args:
        run: the loaded model.
        dataset: a prepared split (with text, for the references).
        decode: search options (the attention extras are recorded in addition).
        rouge: ROUGE options.
        limit: evaluate only the first ``limit`` examples.
        batch_size: documents per batch.
        device: where batches go.
        progress: called with the number of examples finished after every batch.
    """
    checked_device(device, "evaluate_model")
    require_same_vocab(run.vocab, dataset.vocab, dataset.root, run.run_dir)
    start = time.perf_counter()
    # (the attention the metrics read, where the model has it; the options' own names are checked)
    decode = replace(
        decode, extras=tuple(dict.fromkeys((*decode.extras, *offered_extras(run.decoder, ATTENTION_EXTRAS))))
    )
    summarizer = Summarizer(run.decoder, run.vocab, decode, batch_size=batch_size, device=device)
    scorer = Rouge(rouge)
    ppl, gen_metrics, tf_metrics = Perplexity(), AttentionMetrics(), AttentionMetrics()
    predictions: list[str] = []
    references: list[list[str]] = []
    outputs: list[dict[str, Any]] = []
    indices = select_indices(len(dataset), limit)
    docs = list(run.prepare(documents_from_split(dataset, indices)))
    _check_refs(docs, str(dataset.root))
    for first in range(0, len(docs), batch_size):
        chunk = docs[first : first + batch_size]
        batch = collate_examples(chunk, run.vocab.pad_id).to(device)
        scored = teacher_forced(run.decoder, batch, keep_extras=offered_extras(run.decoder, ("coarse_attn",)))
        ppl.add(scored)
        for doc, extras, count in zip(chunk, scored.extras, scored.tokens):
            tf_metrics.add(extras, count - 1, doc.src_mask, doc.salient)
        for doc, summaries in zip(chunk, summarizer.summarize_batch(chunk)):
            best = summaries[0]
            gen_metrics.add(best.extras, len(best.tokens), doc.src_mask, doc.salient)
            predictions.append(best.lines)
            references.append(doc.refs)
            outputs.append({"id": doc.id, "summary": best.text, "score": best.score})
        if progress is not None:
            progress(len(chunk))
    rouge_result = scorer.corpus(predictions, references, ids=[o["id"] for o in outputs], keep_per_example=True)
    for i, out in enumerate(outputs):
        out["rouge"] = {k: v[i] for k, v in rouge_result.per_example.items()}
    metrics: dict[str, Any] = {
        "ppl": ppl.value,
        "ppl_tokens": ppl.tokens,
        "ppl_unk_scored": ppl.unk_scored,
        **rouge_result.scores,
        **gen_metrics.result(),
    }
    metrics["coarse_accuracy_tf"] = tf_metrics.result()["coarse_accuracy"]
    metrics["mean_length"] = sum(len(o["summary"].split()) for o in outputs) / max(len(outputs), 1)
    result = model_result(
        run, dataset, decode, rouge, metrics, examples=len(outputs), seconds=time.perf_counter() - start
    )
    training = read_training_record(run.run_dir)  # what the training did (and whether a time budget stopped it)
    if training is not None:
        result["training"] = training
    return result, outputs


def evaluate_baseline(
    baseline: ExtractiveBaseline,
    dataset: SummarizationDataset,
    rouge: RougeOptions,
    *,
    limit: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """ROUGE of an extractive baseline on the stored source sentences of ``dataset``
    (``progress`` is called with 1 after every example)."""
    start = time.perf_counter()
    scorer = Rouge(rouge)
    predictions: list[str] = []
    references: list[list[str]] = []
    outputs: list[dict[str, Any]] = []
    for index in select_indices(len(dataset), limit):
        text = dataset.text(index)
        if not text.refs:
            raise ValueError(f"{dataset.root}/{dataset.split}: example {text.id} has no reference")
        sentences = baseline(text.src_sentences)
        predictions.append("\n".join(sentences))
        references.append(list(text.refs))
        outputs.append({"id": text.id, "summary": " ".join(sentences)})
        if progress is not None:
            progress(1)
    rouge_result = scorer.corpus(predictions, references, ids=[o["id"] for o in outputs], keep_per_example=True)
    for i, out in enumerate(outputs):
        out["rouge"] = {k: v[i] for k, v in rouge_result.per_example.items()}
    result = make_result(
        "baseline",
        baseline.name,
        rouge_result.scores,
        data=str(dataset.root),
        split=dataset.split,
        examples=len(outputs),
        baseline={"method": baseline.method, "param": baseline.param},
        rouge_options=rouge.to_dict(),
        seconds=round(time.perf_counter() - start, 3),
    )
    return result, outputs
