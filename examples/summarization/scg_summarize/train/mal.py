"""A small trainer for MAL on a prepared corpus (``scg-summarize prepare``), with every term of
the objective and the attention entropies in the metrics.

Li et al. (Section 2.5): L = L_s + L_NLL (eq. 21) trained end to end with Adadelta (ρ = 0.95,
ε = 1e-6; lr 1). Per logged window, ``RUN_DIR/metrics.jsonl`` gets a ``train`` line with

* ``loss`` (L per document), ``loss_s`` (L_s per document, eq. 19), ``nll_tok`` (L_NLL per
  target token, eq. 20) and ``ppl``;
* ``entropy_s`` / ``entropy_u``: the mean normalized entropy of a^s / a^u (1 = uniform), the
  measure of the near-uniform attentions of the literal eq. (8) and (12);
* ``label_rate``: the fraction of source words labelled salient.

At the end a ``valid`` line (the same numbers, teacher-forced on ``valid_examples`` examples
of the validation split) and a ``table4`` line (:func:`~scg_summarize.evaluation.saliency_topk.saliency_top_k`)
are written, and the run directory is saved (:func:`~scg_summarize.models.mal.step.save_mal_run`), ready for
``scg-summarize evaluate --run RUN_DIR``.

Command line::

    python -m scg_summarize.train.mal --data DIR --out RUN --ablation +MAL \\
        --max-steps 200 --set model.temperature_s=0.1 --set train.batch_size=16

MAL is also a family of the model registry (``scg-summarize train --config MAL``, with
resumption and checkpoint selection; :mod:`scg_summarize.models.mal.family`); this small trainer
(no resumption, no DDP, no learning-rate schedule) is kept for the measurements of
``docs/mal.md``, whose ``valid`` line also reports L_s and the attention entropies.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..data import SummarizationDataset, make_dataloader
from ..evaluation.saliency_topk import saliency_top_k
from ..models.mal import ABLATIONS, MALConfig, MALOutput, MALSummarizer, save_mal_run

__all__ = ["MALTrainConfig", "evaluate_terms", "main", "train_mal"]


@dataclass
class MALTrainConfig:
    """Training settings (the paper's optimizer; the rest is ours and small).

    Attributes:
        batch_size: documents per step.
        max_steps: stop after this many steps (0: no limit).
        epochs: passes over the training split (with ``max_steps``, whichever ends first).
        time_budget_s: stop after this many seconds (0: no limit).
        seed: initialization and shuffling.
        log_every: steps per ``train`` metrics line.
        valid_examples: validation examples for the final ``valid`` and ``table4`` lines.
        max_target_len: target words kept (the paper: 50 on Gigaword).
        lr / rho / eps: Adadelta (the paper: ρ = 0.95, ε = 1e-6; lr 1 is Zeiler's).
        max_grad_norm: gradients renormalized to this norm (0: off; ours).
        threads: torch threads (0: leave as is).
        top_k: words per document of the Table 4 analysis.
    """

    batch_size: int = 32
    max_steps: int = 0
    epochs: int = 1
    time_budget_s: float = 0.0
    seed: int = 1
    log_every: int = 20
    valid_examples: int = 200
    max_target_len: int = 30
    lr: float = 1.0
    rho: float = 0.95
    eps: float = 1e-6
    max_grad_norm: float = 5.0
    threads: int = 1
    top_k: int = 10


class _Window:
    """Sums of the logged numbers over a window of steps."""

    def __init__(self) -> None:
        self.docs = self.tokens = self.steps = 0
        self.sums: dict[str, float] = {}
        self.start = time.perf_counter()

    def add(self, out: MALOutput, docs: int) -> None:
        m = out.metrics()
        self.steps += 1
        self.docs += docs
        self.tokens += out.tokens
        for key in ("loss", "loss_s", "entropy_s", "entropy_u", "label_rate"):
            if m[key] is not None:
                self.sums[key] = self.sums.get(key, 0.0) + float(m[key]) * docs
        self.sums["nll_sum"] = self.sums.get("nll_sum", 0.0) + float(m["nll_sum"])

    def result(self) -> dict[str, Any]:
        docs, tokens = max(self.docs, 1), max(self.tokens, 1)
        out: dict[str, Any] = {k: v / docs for k, v in self.sums.items() if k != "nll_sum"}
        nll_tok = self.sums.get("nll_sum", 0.0) / tokens
        out.update(
            nll_tok=nll_tok,
            ppl=math.exp(min(nll_tok, 50.0)),
            docs=self.docs,
            tokens=self.tokens,
            tok_per_s=self.tokens / max(time.perf_counter() - self.start, 1e-9),
        )
        return out


def evaluate_terms(
    model: MALSummarizer, dataset: SummarizationDataset, examples: int, batch_size: int
) -> dict[str, Any]:
    """Teacher-forced L_s, L_NLL per token and the attention entropies on the first ``examples``
    examples of ``dataset``."""
    loader = make_dataloader(dataset, batch_size, shuffle=False)
    window = _Window()
    model.eval()
    with torch.no_grad():
        for batch in _first(loader, examples):
            window.add(model(batch["src"], batch["src_mask"], batch["tgt"], batch["tgt_mask"]), len(batch["tgt"]))
    model.train()
    result = window.result()
    result.pop("tok_per_s", None)
    return result


def _first(loader: Any, examples: int) -> Any:
    seen = 0
    for batch in loader:
        if seen >= examples:
            return
        take = min(examples - seen, int(batch["src"].shape[0]))
        if take < batch["src"].shape[0]:
            batch = {k: (v[:take] if isinstance(v, (torch.Tensor, list)) else v) for k, v in batch.items()}
        seen += take
        yield batch


def train_mal(
    model_config: MALConfig,
    config: MALTrainConfig,
    data_dir: str | Path,
    out_dir: str | Path,
    *,
    train_split: str = "train",
    valid_split: str = "valid",
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train MAL on ``data_dir`` into ``out_dir``; returns the final ``valid`` and ``table4`` records."""
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)
    train = SummarizationDataset(data_dir, train_split, max_target_len=config.max_target_len, with_text=False)
    valid = SummarizationDataset(data_dir, valid_split, vocab=train.vocab, max_target_len=config.max_target_len)
    model = MALSummarizer.for_vocab(model_config, train.vocab)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=config.lr, rho=config.rho, eps=config.eps)
    loader = make_dataloader(train, config.batch_size, seed=config.seed)
    metrics = out / "metrics.jsonl"
    metrics.write_text("")

    def record(event: str, **values: Any) -> None:
        with open(metrics, "a", encoding="utf-8") as f:
            f.write(json.dumps({"event": event, "step": step, **values}) + "\n")

    (out / "train_config.json").write_text(
        json.dumps(
            {"model": model_config.to_dict(), "train": asdict(config), "data": str(Path(data_dir).resolve())}, indent=2
        )
        + "\n"
    )
    log(
        f"MAL {model_config.ablation}: {sum(p.numel() for p in model.parameters())} parameters, "
        f"{len(train)} training examples"
    )
    step, start, window = 0, time.perf_counter(), _Window()
    done = False
    model.train()
    for _ in range(config.epochs):
        for batch in loader:
            result = model(batch["src"], batch["src_mask"], batch["tgt"], batch["tgt_mask"])
            optimizer.zero_grad(set_to_none=True)
            result.loss.backward()  # type: ignore[no-untyped-call]
            if config.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            optimizer.step()
            step += 1
            window.add(result, len(batch["tgt"]))
            if step % config.log_every == 0:
                values = window.result()
                record("train", **values)
                log(
                    f"step {step}: "
                    + ", ".join(
                        f"{k} {v:.4g}"
                        for k, v in values.items()
                        if k in ("loss", "loss_s", "nll_tok", "entropy_s", "entropy_u")
                    )
                )
                window = _Window()
            elapsed = time.perf_counter() - start
            if (config.max_steps and step >= config.max_steps) or (
                config.time_budget_s and elapsed >= config.time_budget_s
            ):
                done = True
                break
        if done:
            break
    final = evaluate_terms(model, valid, config.valid_examples, config.batch_size)
    record("valid", **final, elapsed_s=time.perf_counter() - start)
    log("valid: " + ", ".join(f"{k} {v:.4g}" for k, v in final.items() if isinstance(v, float)))
    table4: dict[str, Any] = {}
    if model_config.suatt or model_config.unatt:
        model.eval()
        table4 = saliency_top_k(
            model,
            _first(make_dataloader(valid, config.batch_size, shuffle=False), config.valid_examples),
            train.vocab.id_to_token,
            k=config.top_k,
        )
        record("table4", **table4)
        log(f"table 4 (top-{config.top_k} words, ROUGE-1 F1): {table4['rouge1']}")
    save_mal_run(out, model, data_dir, {"step": step})
    return {"valid": final, "table4": table4, "steps": step}


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _apply_sets(sets: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    model: dict[str, Any] = {}
    train: dict[str, Any] = {}
    known_train = {f.name for f in fields(MALTrainConfig)}
    for item in sets:
        key, sep, value = item.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot or section not in ("model", "train"):
            raise SystemExit(f"--set {item!r}: expected model.NAME=VALUE or train.NAME=VALUE")
        if section == "train" and name not in known_train:
            known = ", ".join(sorted(known_train))
            raise SystemExit(f"--set {item!r}: unknown training option {name!r} (known: {known})")
        (model if section == "model" else train)[name] = _parse_value(value)
    return model, train


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scg_summarize.train.mal",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", required=True, help="a prepared corpus (scg-summarize prepare)")
    parser.add_argument("--out", required=True, help="the run directory")
    parser.add_argument("--ablation", default="+MAL", choices=list(ABLATIONS))
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--time-budget", type=float, default=None, help="seconds")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.NAME=VALUE")
    args = parser.parse_args(argv)
    model_over, train_over = _apply_sets(args.set)
    if args.max_steps is not None:
        train_over["max_steps"] = args.max_steps
    if args.time_budget is not None:
        train_over["time_budget_s"] = args.time_budget
    try:
        model_config = MALConfig.for_ablation(args.ablation, **model_over)
        train_config = MALTrainConfig(**train_over)
    except (TypeError, ValueError) as err:
        raise SystemExit(f"configuration: {err}") from None
    train_mal(model_config, train_config, args.data, args.out)
    return 0


if __name__ == "__main__":
    from ..subcommand import script_main

    raise SystemExit(script_main("python -m scg_summarize.train.mal", main))
