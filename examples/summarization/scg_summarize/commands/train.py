"""The ``scg-summarize train`` subcommand.

Examples::

    scg-summarize train --config small-C2F+MULTI2 --data data/synthetic --out runs/c2f
    scg-summarize train --config C2F --data data/cnndm --out runs/c2f --set train.batch_size=32
    scg-summarize train --out runs/c2f --resume            # after a crash: config and data from the run
    scg-summarize train --config C2F --data data/cnndm --out runs/c2f --overwrite   # start runs/c2f again
    torchrun --nproc_per_node 4 -m scg_summarize.cli train --config C2F --data ... --out ...
    scg-summarize train --list                                                      # named configs

After training, the best checkpoint is evaluated on the test split: teacher-forced perplexity and
attention statistics, printed; with ``--rouge`` also decoded (the run's ``[eval]`` options) and
scored by :mod:`scg_summarize.evaluation` into ``RUN_DIR/results.json`` (the same record as
``scg-summarize evaluate``) and ``RUN_DIR/test.summaries.jsonl``. A folder that holds a run is
only continued (``--resume``) or started again (``--overwrite``), never silently replaced; a
corpus without the test split skips that evaluation with a note (see ``_train_checks``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..cli import Command

__all__ = ["COMMAND", "add_arguments", "evaluate_test", "run"]


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
    parser.add_argument("--resume", action="store_true",
                        help="continue from RUN_DIR/checkpoint.pt (--config and --data default to the run's)")
    parser.add_argument("--overwrite", action="store_true",
                        help="start again in a folder that holds a run (its checkpoints and results are deleted)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or per-step lines")
    parser.add_argument("--no-test", action="store_true", help="skip the final test-split evaluation")
    parser.add_argument("--rouge", action="store_true", help="also decode the test split and compute ROUGE")
    parser.add_argument("--list", action="store_true", help="list the named configurations and exit")


def evaluate_test(run_dir: Path, data: Path, *, rouge: bool) -> dict[str, Any]:
    """The best checkpoint on the test split: teacher-forced perplexity and attention statistics,
    and with ``rouge`` the shared decoding + ROUGE evaluation (``RUN_DIR/results.json``)."""
    import torch

    from ..train.data import load_split
    from ..train.evaluate import evaluate_nll
    from ..train.loop import BEST, load_model
    from ..train.report import evaluate_run

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model, config = load_model(run_dir / BEST, device)
    test = load_split(data, config.data.test_split, config)
    summary: dict[str, Any] = {"config": config.name, "split": config.data.test_split,
                               "teacher_forced": evaluate_nll(model, test, config, device)}
    if rouge:
        result, _ = evaluate_run(run_dir, data, device=str(device))
        summary["decoded"] = result["metrics"]
    else:
        (run_dir / "results.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def run(args: argparse.Namespace) -> int:
    from ..train.config import Config, available_configs, load_config
    from ..train.loop import Trainer

    if args.list:
        for name in available_configs():
            print(f"{name:18s} {load_config(name).description}")
        print("(prefix a name with small- or tiny- for the smaller sizes)")
        return 0
    from ._train_checks import check_run_folder, missing_test_split, resume_settings

    saved, recorded_data = (None, None)
    if args.resume and args.out is not None and args.config is None:
        try:
            saved, recorded_data = resume_settings(args.out, args.set)
        except (ValueError, FileNotFoundError) as err:
            print(f"train: error: {err}", file=sys.stderr)
            return 1
    args.data = args.data or recorded_data
    missing = [flag for flag, value in (("--config", args.config or saved), ("--data", args.data), ("--out", args.out))
               if value is None]
    if missing:
        print(f"train: missing {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        check_run_folder(args.out, resume=args.resume, overwrite=args.overwrite)
        config = Config.from_dict(saved) if saved is not None else load_config(args.config, args.set)
        if args.resume and saved is None and (args.out / "config.json").is_file():
            saved = json.loads((args.out / "config.json").read_text())
            if saved.get("name") != config.name:
                print(
                    f"train: --resume: {args.out} holds a run of {saved.get('name')!r}, not {config.name!r}",
                    file=sys.stderr,
                )
                return 2
        note = None if args.no_test else missing_test_split(args.data, config.data.test_split)
        if note is not None:
            print(f"train: note: {note}", file=sys.stderr)
            args.no_test = True
        trainer = Trainer(config, args.data, args.out, resume=args.resume, quiet=args.quiet)
        trainer.fit()
        main = trainer.dist.is_main
        trainer.dist.close()
    except (ValueError, FileNotFoundError, FileExistsError, KeyError) as err:
        print(f"train: error: {err}", file=sys.stderr)
        return 1
    if main and not args.no_test:
        summary = evaluate_test(args.out, args.data, rouge=args.rouge)
        print(json.dumps(summary), file=sys.stderr)
    return 0


COMMAND = Command(
    name="train",
    help="train a summarizer (named configurations for every row of the paper's Table 1)",
    add_arguments=add_arguments,
    run=run,
)
