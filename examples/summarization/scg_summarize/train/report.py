"""Test-set evaluation of a finished run with the project's shared decoding and ROUGE.

:func:`evaluate_run` loads ``RUN_DIR/best.pt`` through :func:`scg_summarize.decoding.load_run`,
decodes the split with the run's ``[eval]`` options and scores it with
:func:`scg_summarize.evaluation.evaluate_model` (perplexity, ROUGE-1/2/L/Lsum with stemming and
max over references, coarse-attention entropy, fraction of words read, coarse accuracy), so
that numbers from ``train --rouge``, the demo and ``scg-summarize evaluate`` agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..data import SummarizationDataset
from .config import Config, EvalConfig

__all__ = ["decode_options", "evaluate_run"]


def decode_options(e: EvalConfig, extras: tuple[str, ...] = ()) -> Any:
    """The :class:`~scg_summarize.decoding.DecodeOptions` of an ``[eval]`` table."""
    from ..decoding import DecodeOptions

    return DecodeOptions(beam_size=e.beam, greedy=e.beam == 1, max_len=e.max_len, min_len=e.min_len,
                         length_penalty=e.length_penalty, no_repeat_ngram=e.block_ngram, unk=e.unk,  # type: ignore[arg-type]
                         extras=extras)


def evaluate_run(run_dir: str | Path, data_dir: str | Path, *, split: str | None = None, limit: int | None = None,
                 device: str = "cpu") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Decode and score ``split`` (default: the run's test split); writes ``RUN_DIR/results.json``
    (the result record) and ``RUN_DIR/<split>.summaries.jsonl``. Returns ``(result, outputs)``."""
    from ..decoding import load_run
    from ..evaluation import RougeOptions, evaluate_model

    run_dir = Path(run_dir)
    config = Config.from_dict(json.loads((run_dir / "config.json").read_text()))
    split = split or config.data.test_split
    run = load_run(run_dir, data_dir=data_dir, device=device)
    dataset = SummarizationDataset(data_dir, split, vocab=run.vocab)
    limit = limit or config.eval.max_examples or None
    result, outputs = evaluate_model(run, dataset, decode_options(config.eval), RougeOptions(), limit=limit,
                                     batch_size=config.eval.batch_size, device=device)
    (run_dir / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    with open(run_dir / f"{split}.summaries.jsonl", "w") as f:
        for out in outputs:
            f.write(json.dumps(out) + "\n")
    return result, outputs
