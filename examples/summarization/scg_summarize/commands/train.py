"""The ``scg-summarize train`` subcommand.

Examples::

    scg-summarize train --config small-C2F+MULTI2 --data data/synthetic --out runs/c2f
    scg-summarize train --config C2F --data data/cnndm --out runs/c2f --set train.batch_size=32
    scg-summarize train --config C2F --data data/cnndm --out runs/c2f --resume      # after a crash
    torchrun --nproc_per_node 4 -m scg_summarize.cli train --config C2F --data ... --out ...
    scg-summarize train --list                                                      # named configs

After training, the best checkpoint is evaluated on the test split (perplexity and attention
statistics; ``--rouge`` also decodes and scores ROUGE) and the numbers are written to
``RUN_DIR/results.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..cli import Command

__all__ = ["COMMAND", "add_arguments", "evaluate_run", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="a named configuration (see --list) or a .toml file")
    parser.add_argument("--data", type=Path, help="a prepared corpus (scg-summarize prepare)")
    parser.add_argument("--out", type=Path, help="the run directory")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="TABLE.KEY=VALUE",
        help="override a configuration value (repeatable), e.g. --set model.hidden=64",
    )
    parser.add_argument("--resume", action="store_true", help="continue from RUN_DIR/checkpoint.pt")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or per-step lines")
    parser.add_argument("--no-test", action="store_true", help="skip the final test-split evaluation")
    parser.add_argument("--rouge", action="store_true", help="also decode the test split and compute ROUGE")
    parser.add_argument("--list", action="store_true", help="list the named configurations and exit")


def evaluate_run(
    run_dir: Path, data: Path, *, rouge: bool, split: str | None = None, log: Any = None
) -> dict[str, Any]:
    """Evaluate ``run_dir/best.pt`` on the test split; writes and returns ``results.json``'s content."""
    import torch

    from ..train.data import load_split
    from ..train.evaluate import evaluate_nll, generate
    from ..train.evaluate import rouge as rouge_fn
    from ..train.loop import BEST, load_model

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model, config = load_model(run_dir / BEST, device)
    split = split or config.data.test_split
    dataset = load_split(data, split, config, with_text=rouge)
    results: dict[str, Any] = {
        "config": config.name,
        "split": split,
        "params": sum(p.numel() for p in model.parameters()),
    }
    results.update(evaluate_nll(model, dataset, config, device))
    if rouge:
        hyps, refs = generate(model, dataset, config, device)
        results.update(rouge_fn(hyps, refs))
        (run_dir / f"{split}.hyp.txt").write_text("".join(h + "\n" for h in hyps))
    (run_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    if log is not None:
        log(json.dumps(results))
    return results


def run(args: argparse.Namespace) -> int:
    from ..train.config import available_configs, load_config
    from ..train.loop import Trainer

    if args.list:
        for name in available_configs():
            print(f"{name:18s} {load_config(name).description}")
        print("(prefix a name with small- or tiny- for the smaller sizes)")
        return 0
    missing = [
        flag for flag, value in (("--config", args.config), ("--data", args.data), ("--out", args.out)) if value is None
    ]
    if missing:
        print(f"train: missing {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config, args.set)
        if args.resume and (args.out / "config.json").is_file():
            saved = json.loads((args.out / "config.json").read_text())
            if saved.get("name") != config.name:
                print(
                    f"train: --resume: {args.out} holds a run of {saved.get('name')!r}, not {config.name!r}",
                    file=sys.stderr,
                )
                return 2
        trainer = Trainer(config, args.data, args.out, resume=args.resume, quiet=args.quiet)
        trainer.fit()
        main = trainer.dist.is_main
        trainer.dist.close()
    except (ValueError, FileNotFoundError, KeyError) as err:
        print(f"train: error: {err}", file=sys.stderr)
        return 1
    if main and not args.no_test:
        evaluate_run(args.out, args.data, rouge=args.rouge, log=lambda line: print(line, file=sys.stderr))
    return 0


COMMAND = Command(
    name="train",
    help="train a summarizer (named configurations for every row of the paper's Table 1)",
    add_arguments=add_arguments,
    run=run,
)
