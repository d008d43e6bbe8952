"""Decode a trained ABS run in the paper's variants and score them (Rush et al. 2015, Tables 1 and 3).

    python -m scg_summarize.train.abs.variants --run /tmp/abs-giga1k --data /tmp/giga1k \\
        --split valid --tune-fraction 0.5

Variants, all with beam ``--beam`` and the fixed length ``--length``: ``abs`` (beam search),
``abs_recombine`` (with hypothesis recombination), ``abs_greedy``, ``extractive`` (only input
words), and ``abs_plus``: α tuned by MERT (:func:`~scg_summarize.evaluation.abs_tuning.tune_weights`,
ROUGE-1 F1) on the first ``--tune-fraction`` of the split and every variant scored on the rest.
Prints one JSON object: ROUGE-1/2/L F1, 75-byte recall (DUC style) and Ext. % per variant.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from ...decoding import DecodeOptions, beam_search, greedy_search
from ...decoding.abs_features import LogLinearDecoder
from ...decoding.protocol import StepDecoder
from ...evaluation.abs_tuning import tune_weights
from ...evaluation.bm25 import extractive_percent
from ...evaluation.rouge import Rouge, RougeOptions
from ...models.abs.nnlm import AbsConfig, AbsModel
from ...models.abs.step import AbsStepDecoder
from .loop import Example, _tensors, load_examples

__all__ = ["load_abs_run", "main"]


def load_abs_run(run: str | Path) -> AbsModel:
    """The model saved by ``python -m scg_summarize.train.abs.loop --out RUN`` (eval mode)."""
    run = Path(run)
    spec = json.loads((run / "abs.json").read_text(encoding="utf-8"))
    model = AbsModel(AbsConfig(**spec["model"]))
    model.load_state_dict(torch.load(run / "abs.pt", map_location="cpu", weights_only=True))
    return model.eval()


def _batches(
    examples: Sequence[Example], index: Sequence[int], size: int = 16
) -> list[tuple[dict[str, Any], list[int]]]:
    out = []
    for lo in range(0, len(index), size):
        chunk = list(index[lo : lo + size])
        src, mask, _ = _tensors(examples, chunk)
        out.append(({"src": src.unsqueeze(1), "src_mask": mask.unsqueeze(1)}, chunk))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scg_summarize.train.abs.variants", description=__doc__.split("\n")[0])
    p.add_argument("--run", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--split", default="valid")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--length", type=int, default=8)
    p.add_argument("--tune-fraction", type=float, default=0.5)
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    with torch.no_grad():  # (not set_grad_enabled: a caller's grad mode must survive this call)
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    inner = AbsStepDecoder(load_abs_run(args.run))
    examples, data = load_examples(args.data, args.split)
    vocab = data.vocab
    n_tune = int(len(examples) * args.tune_fraction)
    tune_idx, test_idx = list(range(n_tune)), list(range(n_tune, len(examples)))
    refs = [list(data.text(i)["refs"]) for i in range(len(examples))]
    options = DecodeOptions(beam_size=args.beam, n_best=args.beam, min_len=args.length, max_len=args.length,
                            length_penalty=0.0, no_repeat_ngram=0, unk="allow")

    def detok(ids: list[int]) -> str:
        return " ".join(vocab.decode(ids))

    result: dict[str, Any] = {"run": args.run, "data": args.data, "split": args.split, "tune": n_tune,
                              "test": len(test_idx), "beam": args.beam, "length": args.length}
    start = time.perf_counter()
    tuned = tune_weights(inner, [(b, [refs[i] for i in idx]) for b, idx in _batches(examples, tune_idx)], detok,
                         options, rouge=Rouge(RougeOptions(metrics=("rouge1",))), iterations=args.iterations)
    result["mert"] = {"weights": tuned.weights, "tuning_rouge1": 100 * tuned.metric, "history": tuned.history,
                      "seconds": time.perf_counter() - start}
    variants: dict[str, tuple[StepDecoder[Any], DecodeOptions]] = {
        "abs": (inner, options),
        "abs_recombine": (inner, replace(options, recombine=True)),
        "abs_greedy": (inner, replace(options, greedy=True, n_best=1)),
        "extractive": (LogLinearDecoder(inner, extractive=True), options),
        "abs_plus": (LogLinearDecoder(inner, tuned.weights), options),
    }
    f1 = Rouge(RougeOptions(metrics=("rouge1", "rouge2", "rougeL")))
    duc = Rouge(RougeOptions(metrics=("rouge1", "rouge2", "rougeL"), limit_bytes=75, measure="recall"))
    for name, (decoder, opts) in variants.items():
        start = time.perf_counter()
        outputs: list[list[str]] = []
        for batch, _ in _batches(examples, test_idx):
            search = greedy_search if opts.greedy else beam_search
            outputs += [vocab.decode(h[0].tokens) for h in search(decoder, batch, opts)]
        texts = [" ".join(o) for o in outputs]
        inputs = [vocab.decode(examples[i].src, stop_at_eos=False) for i in test_idx]
        gold = [refs[i] for i in test_idx]
        result[name] = {"rouge_f1": f1.corpus(texts, gold).scores, "rouge_recall_75b": duc.corpus(texts, gold).scores,
                        "ext_percent": extractive_percent(outputs, inputs),
                        "seconds": time.perf_counter() - start, "first_outputs": texts[:3]}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    from ...subcommand import script_main

    raise SystemExit(script_main("python -m scg_summarize.train.abs.variants", main))
