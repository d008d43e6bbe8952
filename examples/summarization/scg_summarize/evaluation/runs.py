"""Test-set evaluation of a finished training run, as the trainer and the demo do it.

`evaluate_run` loads ``RUN_DIR/best.pt`` through `scg_summarize.decoding.load_run`,
decodes the split with the run's ``[eval]`` settings (over the defaults of
`DecodeOptions`; or ``decode`` when given) and scores it with
[`evaluate_model`][scg_summarize.evaluation.runner.evaluate_model] (perplexity, ROUGE-1/2/L/Lsum with
stemming and max over references, digits and ``#`` mapped to 0 for a run trained with digit mapping
as ``evaluate --hash-digits auto`` does, coarse-attention entropy, fraction of words read, coarse
accuracy), so that numbers from ``train --rouge``, the demo and ``scg-summarize evaluate`` agree.

It reads the run's ``config.json`` as plain JSON (``data.test_split``, the ``[eval]`` table), so
evaluation does not depend on the trainer's code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..data.dataset import SummarizationDataset
from ..decode_options import DecodeOptions
from ..decoding.loading import load_run
from ..devices import checked_device
from ..jsonlines import json_object
from .rouge import RougeOptions
from .runner import evaluate_model

__all__ = ["evaluate_run", "run_settings"]


def run_settings(run_dir: str | Path) -> dict[str, Any]:
    """The run configuration stored in ``RUN_DIR/config.json`` (a dict; ``ValueError`` naming the
    file when it is missing or not JSON)."""
    path = Path(run_dir) / "config.json"
    try:
        return json_object(path)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file: not a training run directory") from None


def evaluate_run(
    run_dir: str | Path,
    data_dir: str | Path,
    *,
    split: str | None = None,
    limit: int | None = None,
    device: str = "cpu",
    decode: DecodeOptions | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Decode and score ``split`` (default: the run's test split); writes ``RUN_DIR/results.json``
    (the result record) and ``RUN_DIR/<split>.summaries.jsonl``. Returns ``(result, outputs)``.

    Args:
        run_dir: a run written by ``scg-summarize train``.
        data_dir: its prepared corpus.
        split: the split (default: the run's ``data.test_split``).
        limit: the first ``limit`` examples (default: the run's ``eval.max_examples``, 0 = all).
        device: where the model runs.
        decode: search settings (default: the run's ``[eval]`` table over the defaults).
        progress: called with the number of examples finished after every batch.
    """
    checked_device(device, "evaluate_run")
    run_dir = Path(run_dir)
    raw = run_settings(run_dir)
    eval_table, data_table = raw.get("eval"), raw.get("data")
    table: dict[str, Any] = eval_table if isinstance(eval_table, dict) else {}
    split = split or str((data_table if isinstance(data_table, dict) else {}).get("test_split", "test"))
    if decode is None:
        decode = DecodeOptions.from_eval_table(table)
    run = load_run(run_dir, data_dir=data_dir, device=device)
    dataset = SummarizationDataset(data_dir, split, vocab=run.vocab)
    limit = limit or int(table.get("max_examples", 0)) or None
    result, outputs = evaluate_model(
        run,
        dataset,
        decode,
        RougeOptions(hash_digits=run.prep_options.digits_to_hash),  # `evaluate`'s --hash-digits auto
        limit=limit,
        batch_size=int(table.get("batch_size", 32)),
        device=device,
        progress=progress,
    )
    (run_dir / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    with open(run_dir / f"{split}.summaries.jsonl", "w", encoding="utf-8") as f:
        for out in outputs:
            f.write(json.dumps(out) + "\n")
    return result, outputs
