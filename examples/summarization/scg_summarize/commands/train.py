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
import os
import sys
from pathlib import Path
from typing import Any

from ..devices import missing_cuda
from . import Command

__all__ = ["COMMAND", "add_arguments", "evaluate_test", "run", "test_table"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        help="a named configuration (see --list), or a configuration file: a path with a '/' or a .toml "
        "suffix (./mine.toml; ./C2F is a file, not the named C2F)",
    )
    parser.add_argument("--data", type=Path, help="a prepared corpus (scg-summarize prepare)")
    parser.add_argument("--out", type=Path, help="the run directory")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="TABLE.KEY=VALUE",
        help="override a configuration value (repeatable), e.g. --set model.hidden=64",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from RUN_DIR/checkpoint.pt (--config and --data default to the run's)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="start again in a folder that holds a run (its checkpoints and results are deleted)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar or per-step lines")
    parser.add_argument("--no-test", action="store_true", help="skip the final test-split evaluation")
    parser.add_argument("--rouge", action="store_true", help="also decode the test split and compute ROUGE")
    parser.add_argument("--list", action="store_true", help="list the named configurations and exit")


def evaluate_test(run_dir: Path, data: Path, *, rouge: bool) -> dict[str, Any]:
    """The best checkpoint on the test split: teacher-forced perplexity and attention statistics,
    and with ``rouge`` the shared decoding + ROUGE evaluation (``RUN_DIR/results.json``)."""
    import torch

    from ..evaluation.report import read_training_record
    from ..evaluation.runs import evaluate_run
    from ..models.loading import load_model
    from ..train.config import Config
    from ..train.data import load_dataset
    from ..train.evaluate import evaluate_nll
    from ..train.fingerprint import check_fingerprint
    from ..train.progress import PhaseProgress
    from ..train.run_dir import BEST

    def say(line: str) -> None:
        print(f"train: {line}", file=sys.stderr, flush=True)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model, raw = load_model(run_dir / BEST, device)
    config = Config.from_dict(raw)
    dc = config.data
    check_fingerprint(run_dir, data, dc.splits, "evaluate the test split")
    test = load_dataset(data, config.data.test_split, config)
    if len(test) == 0:
        raise ValueError(
            f"{data}: the test split {config.data.test_split!r} has no examples (skip the test "
            f"evaluation with --no-test, or name another split with --set data.test_split=NAME)"
        )
    phase = PhaseProgress("test evaluation (perplexity)", len(test), say)
    summary: dict[str, Any] = {
        "config": config.name,
        "split": config.data.test_split,
        "family": config.model.family,
        "teacher_forced": evaluate_nll(model, test, config, device, progress=phase),
        "training": read_training_record(run_dir),
    }
    phase.done()
    if rouge:
        phase = PhaseProgress("test evaluation (decoding and ROUGE)", len(test), say)
        result, _ = evaluate_run(run_dir, data, device=str(device), progress=phase)
        phase.done()
        summary["decoded"] = result["metrics"]
    else:
        path = run_dir / "results.json"
        if _decoded_result_of(path, summary["training"]):
            say(f"{path} holds the decoded (ROUGE) evaluation of this model; kept (--rouge evaluates it again)")
        else:
            path.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _decoded_result_of(path: Path, training: dict[str, Any] | None) -> bool:
    """Whether ``path`` holds a decoded evaluation (``--rouge``) of the model the run has now (the
    same training record: ``--resume`` of a finished run trains nothing, and its test evaluation
    without ``--rouge`` would replace the ROUGE scores with perplexity alone)."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not (isinstance(old, dict) and "metrics" in old and isinstance(old.get("training"), dict) and training):
        return False
    same = ("steps", "best_step", "valid_ppl")  # (not its seconds: a resume that trains nothing rewrites them)
    return all(old["training"].get(key) == training.get(key) for key in same)


def test_table(summary: dict[str, Any]) -> str:
    """The final test evaluation as a markdown table (the chunk-attention columns only for the
    ``c2f`` family, whose models attend over chunks; ROUGE only when decoded)."""
    tf, decoded = summary["teacher_forced"], summary.get("decoded") or {}
    columns = [("PPL", tf.get("ppl"), "{:.2f}"), ("tokens", tf.get("tokens"), "{:,}")]
    if summary.get("family", "c2f") == "c2f":
        columns += [
            ("coarse acc", tf.get("coarse_acc"), "{:.1%}"),
            ("H(chunks)", tf.get("attn_entropy"), "{:.2f}"),
            ("words read", tf.get("read_frac"), "{:.1%}"),
        ]
    columns += [
        (title, decoded.get(key), "{:.2f}") for title, key in (("R-1", "rouge1"), ("R-2", "rouge2"), ("R-L", "rougeL"))
    ]
    shown = [(title, fmt.format(value)) for title, value, fmt in columns if value is not None]
    return "\n".join(
        [
            f"test evaluation of best.pt ({summary['config']}, split {summary['split']!r}, teacher-forced"
            + (", ROUGE of the decoded summaries" if decoded else "")
            + "):",
            "| " + " | ".join(t for t, _ in shown) + " |",
            "|" + "---:|" * len(shown),
            "| " + " | ".join(v for _, v in shown) + " |",
        ]
    )


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies below it (after resolving links and ``..``)."""
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def _problems(args: argparse.Namespace, saved: dict[str, Any] | None) -> tuple[Any, list[str]]:
    """The configuration (``saved``: the one a resumed run recorded, overrides applied), and every
    problem with it and the arguments (reported together)."""
    from ..data.storage import META_FILE
    from ..train.config import Config
    from ..train.config_loading import load_config
    from ..train.schema import ConfigError

    problems: list[str] = []
    config = None
    try:
        config = Config.from_dict(saved) if saved is not None else load_config(args.config, args.set)
    except ConfigError as err:
        problems += err.problems
    except ValueError as err:
        problems.append(str(err))
    if args.rouge and args.no_test:  # (--rouge was dropped without a word)
        problems.append(
            "--rouge decodes the test split after training, which --no-test skips: leave one of them out "
            "(scg-summarize evaluate --run RUN_DIR scores a run later)"
        )
    if args.out.exists() and not args.out.is_dir():
        problems.append(f"--out {args.out}: an existing file; expected a run directory (new, or one to --resume)")
    if _inside(args.out, args.data) or _inside(args.data, args.out):
        problems.append(
            f"--out {args.out} and --data {args.data} overlap: a run folder must be outside the corpus "
            "(its checkpoints and metrics would be written among the corpus files); choose another --out"
        )
    elif not args.data.exists():
        problems.append(f"--data {args.data}: no such directory; expected a corpus written by scg-summarize prepare")
    elif not (args.data / META_FILE).is_file():
        problems.append(
            f"--data {args.data}: not a prepared corpus (no {META_FILE}); expected a directory "
            f"written by scg-summarize prepare"
        )
    missing = None if config is None else missing_cuda(config.train.device)
    if missing is not None:
        problems.append(f"train.device: {missing}; expected 'auto' or 'cpu'")
    if config is not None and args.resume and (args.out / "config.json").is_file():
        saved = json.loads((args.out / "config.json").read_text())
        if saved.get("name") != config.name:
            problems.append(f"--resume: {args.out} holds a run of {saved.get('name')!r}, not {config.name!r}")
    return config, problems


def run(args: argparse.Namespace) -> int:
    """Execute ``train``: 0 done, 2 bad input or refused (every problem listed, one per line), 1 a
    failure while training (divergence, a checkpoint that cannot be written), 128 + signal number
    when stopped by SIGTERM/SIGINT (after writing a checkpoint)."""
    if not args.list and not args.resume and None in (args.config, args.data, args.out):  # before any import
        missing = [
            flag
            for flag, value in (("--config", args.config), ("--data", args.data), ("--out", args.out))
            if value is None
        ]
        print(
            f"train: error: missing {', '.join(missing)} (a new run needs --config NAME, --data CORPUS and --out "
            "RUN_DIR; --resume needs only --out)",
            file=sys.stderr,
        )
        return 2
    from ..dirlock import DirLock, LockedError
    from ..models.loading import CheckpointError
    from ..train.config_loading import available_configs, load_config
    from ..train.loop import Trainer
    from ..train.signals import Interrupted, TrainingStopped, interrupt_on_signals
    from ..train.step import TrainingDiverged

    if args.list:
        for name in available_configs():
            print(f"{name:18s} {load_config(name).description}")
        print("(prefix a name with small- or tiny- for the smaller sizes)")
        return 0
    from ._train_checks import check_run_folder, missing_test_split, resume_settings

    saved, recorded_data = (None, None)
    if args.resume and args.out is not None and (args.config is None or args.data is None):
        try:
            saved, recorded_data = resume_settings(args.out, args.set)
        except (ValueError, FileNotFoundError) as err:
            print(f"train: error: {err}", file=sys.stderr)
            return 2
        if args.config is not None:
            saved = None  # --config names the configuration; only the corpus comes from the run
    args.data = args.data or recorded_data
    missing = [
        flag
        for flag, value in (("--config", args.config or saved), ("--data", args.data), ("--out", args.out))
        if value is None
    ]
    if missing:
        hint = (
            "; --resume reads them from the run folder given by --out"
            if args.out is None
            else f"; {args.out} records no corpus (no data.json): pass --data"
        )
        print(f"train: error: missing {', '.join(missing)}{hint}", file=sys.stderr)
        return 2
    config, problems = _problems(args, saved)
    if problems:
        for line in problems:
            print(f"train: error: {line}", file=sys.stderr)
        return 2
    trainer = None
    try:
        if args.out.is_dir() and os.environ.get("RANK", "0") == "0":  # never clear a folder in use
            with DirLock(args.out, "scg-summarize train"):
                check_run_folder(args.out, resume=args.resume, overwrite=args.overwrite)
        note = None if args.no_test else missing_test_split(args.data, config.data.test_split)
        if note is not None:
            print(f"train: note: {note}", file=sys.stderr)
            args.no_test = True
        if not args.no_test:  # a damaged test split is found now, not after the training
            from ..data.storage import load_split

            load_split(args.data, config.data.test_split)
        trainer = Trainer(config, args.data, args.out, resume=args.resume, quiet=args.quiet)
        trainer.fit()
        main = trainer.dist.is_main
        trainer.leave_process_group()
        if main and not args.no_test:
            with interrupt_on_signals():
                summary = evaluate_test(args.out, args.data, rouge=args.rouge)
            print(test_table(summary), file=sys.stderr)
    except Interrupted as stop:  # training is complete and written; only the test evaluation is abandoned
        print(
            f"train: {stop} during the final test evaluation: training is finished ({args.out / 'best.pt'} "
            f"is written); evaluate later with: scg-summarize evaluate --run {args.out}",
            file=sys.stderr,
        )
        return stop.status
    except TrainingStopped as stop:
        if trainer is None or trainer.dist.is_main:
            print(f"train: {stop}; {args.out / 'checkpoint.pt'} is written: continue with --resume", file=sys.stderr)
        return stop.status
    except KeyboardInterrupt:
        print("train: interrupted (the last checkpoint is intact; continue with --resume)", file=sys.stderr)
        return 130
    except FloatingPointError as err:  # a model's numerical check (MAL's PageRankError): the run has diverged
        print(
            f"train: error: {err}; {args.out / 'checkpoint.pt'} holds the last checkpoint written before it",
            file=sys.stderr,
        )
        return 1
    except (TrainingDiverged, CheckpointError) as err:
        print(f"train: error: {err}", file=sys.stderr)
        return 2 if isinstance(err, CheckpointError) and "could not write" not in str(err) else 1
    except (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, LockedError, KeyError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"train: error: {message}", file=sys.stderr)
        return 2
    except OSError as err:  # a full disk while writing metrics.jsonl or a checkpoint (written atomically)
        print(
            f"train: error: {err.strerror or err} while writing {err.filename or args.out}: the run stopped; its "
            f"last checkpoint ({args.out / 'checkpoint.pt'}) is intact; make room and continue with --resume",
            file=sys.stderr,
        )
        return 1
    finally:
        if trainer is not None:
            trainer.close()
    return 0


COMMAND = Command(
    name="train",
    help="train a summarizer (named configurations for every row of the paper's Table 1)",
    add_arguments=add_arguments,
    run=run,
)
