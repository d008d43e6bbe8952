"""The ``scg-summarize abs-baselines`` subcommand: the count-based rows of Rush et al.'s tables on a
prepared corpus: the KN 5-gram perplexity
(Table 2) and the IR baseline with its ROUGE and "Ext. %" (Table 1), plus the Ext. % of the
reference titles.

    scg-summarize abs-baselines --data /tmp/giga1k --eval-split valid

The KN model is trained on the training titles and scored on the evaluation split's first
references (words and ``</s>``, as the neural models' perplexity); IR indexes the training
inputs (flattened, as ABS reads them) and answers with the title of the BM25-nearest one.
Prints (and with ``--out``, writes) one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import Command
from ._common import USER_ERRORS, add_overwrite_argument, error, positive_int, refuse_existing, write_json

__all__ = ["COMMAND", "count_baselines"]


def count_baselines(
    root: str | Path, train_split: str = "train", eval_split: str = "valid", order: int = 5
) -> dict[str, Any]:
    """KN perplexity, IR ROUGE-1/2/L F1 and Ext. % (IR and references) on ``eval_split``."""
    from ..evaluation.bm25 import IRBaseline, extractive_percent
    from ..evaluation.rouge import Rouge, RougeOptions
    from ..models.abs.kneser_ney import KneserNeyLM
    from ..train.abs.examples import load_examples

    train_set, train_data = load_examples(root, train_split)
    eval_set, eval_data = load_examples(root, eval_split)
    vocab = train_data.vocab

    def words(ids: Sequence[int]) -> list[str]:
        return vocab.decode(ids, stop_at_eos=False)  # inputs may hold </s> between sentences

    start = time.perf_counter()
    lm = KneserNeyLM([words(e.tgt) for e in train_set], order=order)
    ppl = lm.perplexity([words(e.tgt) for e in eval_set])
    kn_seconds = time.perf_counter() - start

    start = time.perf_counter()
    ir = IRBaseline([words(e.src) for e in train_set], [" ".join(words(e.tgt)) for e in train_set])
    inputs = [words(e.src) for e in eval_set]
    outputs = [ir(x) for x in inputs]
    ir_seconds = time.perf_counter() - start
    refs = [eval_data.text(i).refs for i in range(len(eval_set))]
    rouge = Rouge(RougeOptions(metrics=("rouge1", "rouge2", "rougeL"))).corpus(outputs, refs)
    return {
        "data": str(root),
        "train_split": train_split,
        "eval_split": eval_split,
        "examples": len(eval_set),
        "kn_order": order,
        "kn_perplexity": ppl,
        "kn_discounts": lm.discounts,
        "kn_seconds": kn_seconds,
        "ir_rouge_f1": rouge.scores,
        "ir_ext_percent": extractive_percent([o.split() for o in outputs], inputs),
        "ir_seconds": ir_seconds,
        "reference_ext_percent": extractive_percent([words(e.tgt) for e in eval_set], inputs),
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``abs-baselines``."""
    p.add_argument("--data", required=True, metavar="DIR", help="a prepared corpus")
    p.add_argument("--train-split", default="train", help="the split the KN model and IR index read (default train)")
    p.add_argument("--eval-split", default="valid", help="the split scored (default valid)")
    p.add_argument("--order", type=positive_int, default=5, help="the KN n-gram order (default 5)")
    p.add_argument("--out", default=None, help="also write the JSON here")
    add_overwrite_argument(p, "--out")


def run(args: argparse.Namespace) -> int:
    """Execute ``abs-baselines``; returns 0, or 2 on bad input."""
    try:
        refuse_existing("--out", [args.out], args.overwrite)
        result = count_baselines(args.data, args.train_split, args.eval_split, args.order)
        text = write_json(result, args.out) if args.out else json.dumps(result, indent=2)
    except USER_ERRORS as err:
        return error("abs-baselines", err)
    print(text)
    return 0


COMMAND = Command(
    name="abs-baselines",
    help="KN 5-gram perplexity, the IR baseline and Ext. % of a prepared corpus (Rush et al.'s count-based rows)",
    add_arguments=add_arguments,
    run=run,
)
