"""The ``scg-summarize abs-variants`` subcommand: a trained ABS run decoded in the paper's variants and
scored (Rush et al. 2015, Tables 1 and 3).

    scg-summarize abs-variants --run /tmp/abs-giga1k --data /tmp/giga1k --split valid --tune-fraction 0.5
    scg-summarize abs-variants --run RUN --data DATA --split test \\
        --tune-split valid --tune-limit 300 --ir --summaries RUN/variants

Variants, all with beam ``--beam`` and the fixed length ``--length``: ``abs`` (beam search),
``abs_recombine`` (with hypothesis recombination), ``abs_greedy``, ``extractive`` (only input
words), and ``abs_plus``: α tuned by MERT (:func:`~scg_summarize.evaluation.abs_tuning.tune_weights`,
ROUGE-1 F1) on the first ``--tune-limit`` examples of ``--tune-split`` (or, without it, on the
first ``--tune-fraction`` of ``--split``, every variant then scored on the rest); ``--ir`` adds
the IR baseline (the title of the BM25-nearest training input). Prints one JSON object:
ROUGE-1/2/L F1, 75-byte recall (DUC style) and Ext. % per variant. ROUGE is the ``baseline``
command's (stemming; digits mapped when the corpus maps them), so with ``--summaries DIR`` the
per-example files ``DIR/NAME.summaries.jsonl`` (F1) and ``DIR/NAME-75b.summaries.jsonl``
(75-byte recall) pair with ``scg-summarize baseline --summaries`` in ``scg-summarize compare``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import Command
from ._common import USER_ERRORS, add_overwrite_argument, error, positive_int, refuse_existing, write_json

if TYPE_CHECKING:
    from ..data.batching import SourceBatch
    from ..train.abs.examples import FlatPair

__all__ = ["COMMAND"]


def _batches(examples: Sequence[FlatPair], index: Sequence[int], size: int = 16) -> list[tuple[SourceBatch, list[int]]]:
    from ..data.batching import SourceBatch
    from ..train.abs.examples import example_tensors

    out = []
    for lo in range(0, len(index), size):
        chunk = list(index[lo : lo + size])
        src, mask, _ = example_tensors(examples, chunk)
        out.append((SourceBatch(src=src.unsqueeze(1), src_mask=mask.unsqueeze(1)), chunk))
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``abs-variants``."""
    p.add_argument("--run", required=True, metavar="RUN_DIR", help="a run of scg-summarize train --config ABS")
    p.add_argument("--data", required=True, metavar="DIR", help="its prepared corpus")
    p.add_argument("--split", default="valid", help="the split scored (default valid)")
    p.add_argument("--beam", type=positive_int, default=5, help="beam size of every variant (default 5)")
    p.add_argument("--length", type=positive_int, default=8, help="the fixed summary length in words (default 8)")
    p.add_argument(
        "--tune-fraction", type=float, default=0.5, help="without --tune-split: tune on this first part of --split"
    )
    p.add_argument("--tune-split", default=None, help="tune α on this split instead (e.g. valid)")
    p.add_argument("--tune-limit", type=int, default=0, help="tune on its first N examples (0: all)")
    p.add_argument("--limit", type=int, default=0, help="score only the first N examples of --split (0: all)")
    p.add_argument("--iterations", type=positive_int, default=3, help="MERT iterations (default 3)")
    p.add_argument("--ir", action="store_true", help="also score the IR baseline (BM25 over the training inputs)")
    p.add_argument("--summaries", default=None, metavar="DIR", help="write per-example summaries and ROUGE here")
    p.add_argument("--out", default=None, help="also write the JSON here")
    add_overwrite_argument(p, "--out and the --summaries files")


def run(args: argparse.Namespace) -> int:
    """Execute ``abs-variants``; returns 0, or 2 on bad input."""
    import torch

    try:
        with torch.no_grad():  # (not set_grad_enabled: a caller's grad mode must survive this call)
            return _run(args)
    except USER_ERRORS as err:
        return error("abs-variants", err)


def _run(args: argparse.Namespace) -> int:
    from ..data.storage import read_meta
    from ..decoding import DecodeOptions, beam_search, greedy_search
    from ..decoding.abs_features import LogLinearDecoder
    from ..decoding.loading import load_run
    from ..decoding.protocol import StepDecoder
    from ..evaluation.abs_tuning import tune_weights
    from ..evaluation.bm25 import IRBaseline, extractive_percent
    from ..evaluation.rouge import Rouge, RougeOptions
    from ..train.abs.examples import load_examples

    if not args.tune_split and not 0.0 < args.tune_fraction < 1.0:
        raise ValueError(f"--tune-fraction: expected a number between 0 and 1 (exclusive), got {args.tune_fraction}")
    refuse_existing("--out", [args.out], args.overwrite)
    written = sorted(Path(args.summaries).glob("*.summaries.jsonl")) if args.summaries else []
    refuse_existing("--summaries", written, args.overwrite)
    examples, data = load_examples(args.data, args.split)
    loaded = load_run(args.run, data_dir=args.data)
    if loaded.family != "abs":  # (the variants' features and recombination are ABS's: a Markov window)
        raise ValueError(
            f"--run {args.run}: abs-variants needs an ABS run (model.family = 'abs'), got {loaded.family!r}"
        )
    inner = loaded.decoder
    vocab = data.vocab
    stored = [data.text(i) for i in range(len(examples))]
    refs, ids = [text.refs for text in stored], [text.id for text in stored]
    if args.tune_split:
        tune_examples, tune_data = load_examples(args.data, args.tune_split)
        n_tune = min(args.tune_limit or len(tune_examples), len(tune_examples))
        tune_refs = [tune_data.text(i).refs for i in range(n_tune)]
        test_idx = list(range(min(args.limit or len(examples), len(examples))))
    else:
        tune_examples, n_tune = examples, int(len(examples) * args.tune_fraction)
        tune_refs = refs[:n_tune]
        test_idx = list(range(n_tune, len(examples)))[: args.limit or None]
    options = DecodeOptions(
        beam_size=args.beam,
        n_best=args.beam,
        min_len=args.length,
        max_len=args.length,
        length_penalty=0.0,
        no_repeat_ngram=0,
        unk="allow",
    )

    def detok(ids: list[int]) -> str:
        return " ".join(vocab.decode(ids))

    result: dict[str, Any] = {
        "run": args.run,
        "data": args.data,
        "split": args.split,
        "tune_split": args.tune_split or args.split,
        "tune": n_tune,
        "test": len(test_idx),
        "beam": args.beam,
        "length": args.length,
    }
    start = time.perf_counter()
    tune_batches = _batches(tune_examples, list(range(n_tune)))
    tuned = tune_weights(
        inner,
        [(b, [tune_refs[i] for i in idx]) for b, idx in tune_batches],
        detok,
        options,
        rouge=Rouge(RougeOptions(metrics=("rouge1",))),
        iterations=args.iterations,
    )
    result["mert"] = {
        "weights": tuned.weights,
        "tuning_rouge1": 100 * tuned.metric,
        "history": tuned.history,
        "seconds": time.perf_counter() - start,
    }
    variants: dict[str, tuple[StepDecoder[Any], DecodeOptions]] = {
        "abs": (inner, options),
        "abs_recombine": (inner, replace(options, recombine=True)),
        "abs_greedy": (inner, replace(options, greedy=True, n_best=1)),
        "extractive": (LogLinearDecoder(inner, extractive=True), options),
        "abs_plus": (LogLinearDecoder(inner, tuned.weights), options),
    }
    digits = bool(read_meta(args.data)["options"].get("digits_to_hash", False))
    metrics = ("rouge1", "rouge2", "rougeL")
    f1 = Rouge(RougeOptions(metrics=metrics, hash_digits=digits))
    duc = Rouge(RougeOptions(metrics=metrics, limit_bytes=75, measure="recall", hash_digits=digits))
    inputs = [vocab.decode(examples[i].src, stop_at_eos=False) for i in test_idx]
    gold = [refs[i] for i in test_idx]
    chosen = [ids[i] for i in test_idx]
    systems: dict[str, Any] = dict(variants)
    if args.ir:
        train_set, _ = load_examples(args.data, "train")
        systems["ir"] = IRBaseline(
            [vocab.decode(e.src, stop_at_eos=False) for e in train_set],
            [" ".join(vocab.decode(e.tgt)) for e in train_set],
        )
    out_dir = Path(args.summaries) if args.summaries else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    for name, system in systems.items():
        start = time.perf_counter()
        outputs: list[list[str]] = []
        if name == "ir":
            outputs = [system(x).split() for x in inputs]
        else:
            decoder, opts = system
            for batch, _ in _batches(examples, test_idx):
                search = greedy_search if opts.greedy else beam_search
                outputs += [vocab.decode(h[0].tokens) for h in search(decoder, batch, opts)]
        texts = [" ".join(o) for o in outputs]
        scored = {
            kind: scorer.corpus(texts, gold, ids=chosen, keep_per_example=True)
            for kind, scorer in (("f1", f1), ("75b", duc))
        }
        result[name] = {
            "rouge_f1": scored["f1"].scores,
            "rouge_recall_75b": scored["75b"].scores,
            "ext_percent": extractive_percent(outputs, inputs),
            "mean_words": sum(map(len, outputs)) / max(len(outputs), 1),
            "seconds": time.perf_counter() - start,
            "first_outputs": texts[:3],
        }
        if out_dir is not None:
            for kind, suffix in (("f1", ""), ("75b", "-75b")):
                per = scored[kind].per_example
                lines = [
                    json.dumps({"id": chosen[i], "summary": texts[i], "rouge": {k: v[i] for k, v in per.items()}})
                    for i in range(len(texts))
                ]
                (out_dir / f"{name}{suffix}.summaries.jsonl").write_text(
                    "".join(x + "\n" for x in lines), encoding="utf-8"
                )
    print(write_json(result, args.out) if args.out else json.dumps(result, indent=2))
    return 0


COMMAND = Command(
    name="abs-variants",
    help="decode a trained ABS run as ABS, +recombination, greedy, extractive and ABS+ (MERT) and score them",
    add_arguments=add_arguments,
    run=run,
)
