"""Train ABS by negative log-likelihood with the paper's schedule (Rush et al. 2015, Section 7.3).

* minibatch SGD, learning rate 0.05, batches of 64, on the NLL of the summaries (summed over
  each summary's words, averaged over the batch);
* batches grouped by input length (examples sorted by input length, cut into batches, the
  batch order shuffled every epoch with a fixed seed);
* after every epoch: the validation log-likelihood; when it did not improve, the learning rate
  is halved; then every embedding table is renormalized to a maximum row norm (the max-norm
  constraint of Hinton et al. 2012; the paper gives no bound, 2.0 here).

Decoding after training (``--decode N``) uses the paper's fixed output length (``--length``,
the Gigaword setting is the average title length, about 8 words) and beam 5.

The data is a corpus prepared by ``scg-summarize prepare`` (for Gigaword: ``--format parallel``
with ``--valid-fraction``); every input is flattened to one sentence
(:func:`~.step.flatten_source`). A pipeline check on the 1000 Gigaword pairs on hand::

    scg-summarize prepare --format parallel --input train=../shared/data/gigaword-1k/train \\
        --valid-fraction 0.1 --output /tmp/giga1k --min-freq 1
    python -m scg_summarize.train.abs.loop --data /tmp/giga1k --out /tmp/abs-run \\
        --max-steps 300 --decode 50

writes ``abs.pt`` (weights), ``abs.json`` (configuration), ``log.jsonl`` (one record per
epoch) and, with ``--decode N``, beam-search summaries of N validation examples and their
ROUGE. This is the paper's loop, kept for the Table 2 and variant runs (``variants`` reads its
runs); ABS is also the registered ``abs`` family (:mod:`scg_summarize.models.abs.family`), trained,
resumed and evaluated by ``scg-summarize train --config ABS`` like the other families.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from ...data.dataset import SummarizationDataset
from ...models.abs.nnlm import AbsConfig, AbsModel
from ...models.abs.step import AbsStepDecoder, flatten_source

__all__ = ["AbsTrainConfig", "Example", "batches", "evaluate_nll", "load_examples", "main", "next_lr", "train"]


@dataclass(frozen=True)
class AbsTrainConfig:
    """Optimization settings (the paper's by default)."""

    lr: float = 0.05
    batch_size: int = 64
    epochs: int = 15
    max_steps: int = 0  # 0: no limit
    max_norm: float = 2.0
    seed: int = 0
    optimizer: str = "sgd"  # the paper; "adam" (ours) for runs far shorter than the paper's 15 epochs of 4M pairs

    def __post_init__(self) -> None:
        if self.optimizer not in ("sgd", "adam"):
            raise ValueError(f"AbsTrainConfig.optimizer must be 'sgd' or 'adam', got {self.optimizer!r}")
        if not self.lr > 0 or self.batch_size < 1:
            raise ValueError(f"AbsTrainConfig: lr must be > 0 and batch_size >= 1, got {self.lr}, {self.batch_size}")


@dataclass
class Example:
    """One training pair as id lists: the flattened input and ``<s> title </s>``."""

    src: list[int]
    tgt: list[int]


def load_examples(root: str | Path, split: str) -> tuple[list[Example], SummarizationDataset]:
    """Every example of a prepared split, inputs flattened to one sentence."""
    data = SummarizationDataset(root, split, with_text=True)
    out = []
    for i in range(len(data)):
        item = data[i]
        words, mask, _ = flatten_source(item["src"].unsqueeze(0), item["src_mask"].unsqueeze(0))
        src = words[0][mask[0]].tolist()
        if not src:
            raise ValueError(f"{root}: {split} example {i} ({item.get('id')}) has an empty input")
        out.append(Example(src, item["tgt"].tolist()))
    return out, data


def batches(examples: Sequence[Example], size: int, rng: random.Random | None = None) -> list[list[int]]:
    """Indices of examples in batches of similar input length (sorted by length, cut in
    ``size``); the batch order is shuffled with ``rng`` when given."""
    order = sorted(range(len(examples)), key=lambda i: (len(examples[i].src), i))
    groups = [order[i : i + size] for i in range(0, len(order), size)]
    if rng is not None:
        rng.shuffle(groups)
    return groups


def _device(model: AbsModel) -> torch.device:
    return next(model.parameters()).device


def _tensors(
    examples: Sequence[Example], index: Sequence[int], device: torch.device | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    chosen = [examples[i] for i in index]
    src = torch.zeros(len(chosen), max(len(e.src) for e in chosen), dtype=torch.long)
    tgt = torch.zeros(len(chosen), max(len(e.tgt) for e in chosen), dtype=torch.long)
    for b, e in enumerate(chosen):
        src[b, : len(e.src)] = torch.tensor(e.src)
        tgt[b, : len(e.tgt)] = torch.tensor(e.tgt)
    if device is not None and device.type != "cpu":
        src, tgt = src.to(device, non_blocking=True), tgt.to(device, non_blocking=True)
    return src, src != 0, tgt


@torch.no_grad()
def evaluate_nll(model: AbsModel, examples: Sequence[Example], batch_size: int = 64) -> tuple[float, int]:
    """Summed NLL (nats) of every target word and ``</s>`` of ``examples``, and their count;
    ``exp(nll / count)`` is the perplexity of Table 2."""
    was_training = model.training
    model.eval()
    total, count, device = 0.0, 0, _device(model)
    for index in batches(examples, batch_size):
        nll, n = model.nll(*_tensors(examples, index, device))
        total, count = total + float(nll), count + n
    model.train(was_training)
    return total, count


def next_lr(lr: float, likelihood: float, best: float) -> float:
    """The paper's schedule: half the learning rate when the validation log-likelihood per word
    did not improve on the best so far."""
    return lr / 2 if likelihood <= best else lr


def train(
    model: AbsModel,
    train_set: Sequence[Example],
    valid_set: Sequence[Example],
    config: AbsTrainConfig,
    log: Any = None,
) -> list[dict[str, Any]]:
    """Train in place; returns one record per epoch (lr, losses, validation perplexity, time)."""
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    optimizer: torch.optim.Optimizer = (
        torch.optim.SGD(model.parameters(), lr=config.lr)
        if config.optimizer == "sgd"
        else torch.optim.Adam(model.parameters(), lr=config.lr)
    )
    lr, best, steps, records = config.lr, -math.inf, 0, []
    device = _device(model)
    for epoch in range(config.epochs):
        model.train()
        start, count = time.perf_counter(), 0
        total = torch.zeros((), dtype=torch.float64, device=device)  # summed on the device: no sync per step
        for index in batches(train_set, config.batch_size, rng):
            nll, n = model.nll(*_tensors(train_set, index, device))
            optimizer.zero_grad()
            (nll / len(index)).backward()
            optimizer.step()
            total, count, steps = total + nll.detach(), count + n, steps + 1
            if config.max_steps and steps >= config.max_steps:
                break
        valid_nll, valid_count = evaluate_nll(model, valid_set, config.batch_size)
        likelihood = -valid_nll / max(valid_count, 1)
        lr = next_lr(lr, likelihood, best)
        for group in optimizer.param_groups:
            group["lr"] = lr
        best = max(best, likelihood)
        renormed = model.renormalize_embeddings(config.max_norm)
        record = {
            "epoch": epoch + 1,
            "steps": steps,
            "train_ppl": math.exp(float(total) / max(count, 1)),
            "valid_ppl": math.exp(-likelihood),
            "lr_next": lr,
            "renormalized_rows": renormed,
            "seconds": time.perf_counter() - start,
        }
        records.append(record)
        if log is not None:
            log(record)
        if config.max_steps and steps >= config.max_steps:
            break
    return records


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m scg_summarize.train.abs.loop", description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="a prepared corpus (scg-summarize prepare)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--train-split", default="train")
    p.add_argument("--valid-split", default="valid")
    p.add_argument("--encoder", default="attention", choices=("none", "bow", "conv", "attention"))
    p.add_argument("--embed", type=int, default=200, help="D")
    p.add_argument("--hidden", type=int, default=400, help="H")
    p.add_argument("--context", type=int, default=5, help="C")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many updates (0: none)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument(
        "--optimizer",
        default="sgd",
        choices=("sgd", "adam"),
        help="sgd (the paper) or adam (ours: for runs of a few thousand steps)",
    )
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--device", default="cpu", help="cpu or cuda (training and --decode)")
    p.add_argument("--max-norm", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--decode", type=int, default=0, metavar="N", help="beam-search N validation examples after")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--length", type=int, default=8, help="fixed summary length in words")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    args = _parse(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(max(args.threads, 1))
    torch.manual_seed(args.seed)
    train_set, train_data = load_examples(args.data, args.train_split)
    valid_set, valid_data = load_examples(args.data, args.valid_split)
    vocab = len(train_data.vocab)
    config = AbsConfig(
        vocab,
        vocab,
        encoder=args.encoder,
        embed=args.embed,
        hidden=args.hidden,
        context=args.context,
        bos=train_data.vocab.bos_id,
    )
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"--device {args.device}: no CUDA GPU is visible here", file=sys.stderr)
        return 2
    model = AbsModel(config).to(args.device)
    tc = AbsTrainConfig(
        lr=args.lr,
        batch_size=args.batch_size,
        epochs=args.epochs,
        max_steps=args.max_steps,
        max_norm=args.max_norm,
        seed=args.seed,
        optimizer=args.optimizer,
    )
    log_file = (out / "log.jsonl").open("w", encoding="utf-8")

    def log(record: dict[str, Any]) -> None:
        print(json.dumps(record), file=sys.stderr)
        log_file.write(json.dumps(record) + "\n")
        log_file.flush()

    start = time.perf_counter()
    records = train(model, train_set, valid_set, tc, log)
    seconds = time.perf_counter() - start
    log_file.close()
    torch.save({k: v.cpu() for k, v in model.state_dict().items()}, out / "abs.pt")  # loads anywhere
    summary: dict[str, Any] = {
        "model": config.to_dict(),
        "train": asdict(tc),
        "device": str(args.device),
        "train_seconds": seconds,
        "steps": records[-1]["steps"] if records else 0,
        "valid_ppl": records[-1]["valid_ppl"] if records else None,
    }
    if args.decode:
        summary["decode"] = _decode(model, valid_set, valid_data, args)
    (out / "abs.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in summary.items() if k != "model"}, indent=2))
    return 0


def _decode(
    model: AbsModel, examples: Sequence[Example], data: SummarizationDataset, args: argparse.Namespace
) -> dict[str, Any]:
    from ...decoding import DecodeOptions, beam_search
    from ...evaluation.bm25 import extractive_percent
    from ...evaluation.rouge import Rouge, RougeOptions

    model.eval()
    decoder = AbsStepDecoder(model)
    options = DecodeOptions(
        beam_size=args.beam,
        max_len=args.length,
        min_len=args.length,
        length_penalty=0.0,
        no_repeat_ngram=0,
        unk="allow",
    )  # the paper: fixed length, no blocking
    n = min(args.decode, len(examples))
    start = time.perf_counter()
    outputs, inputs, refs = [], [], []
    for lo in range(0, n, 16):
        index = list(range(lo, min(lo + 16, n)))
        src, mask, _ = _tensors(examples, index, _device(model))
        with torch.no_grad():
            hyps = beam_search(decoder, {"src": src.unsqueeze(1), "src_mask": mask.unsqueeze(1)}, options)
        for i, h in zip(index, hyps):
            outputs.append(data.vocab.decode(h[0].tokens))
            inputs.append(data.vocab.decode(examples[i].src, stop_at_eos=False))
            refs.append(list(data.text(i)["refs"]))
    seconds = time.perf_counter() - start
    rouge = Rouge(RougeOptions(metrics=("rouge1", "rouge2", "rougeL"))).corpus([" ".join(o) for o in outputs], refs)
    (Path(args.out) / "summaries.txt").write_text("".join(" ".join(o) + "\n" for o in outputs), encoding="utf-8")
    return {
        "examples": n,
        "beam": args.beam,
        "length": args.length,
        "seconds": seconds,
        "rouge_f1": rouge.scores,
        "ext_percent": extractive_percent(outputs, inputs),
    }


if __name__ == "__main__":
    from ...subcommand import script_main

    raise SystemExit(script_main("python -m scg_summarize.train.abs.loop", main))
